"""The command line as a user meets it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.events import Add, Delete, Header, PatchEnd
from patchsync.logs.patch_logs import read_events

from .helpers import JVM_PATCHES, in_default_graph, patches

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "library.rdfp"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args], input=stdin, capture_output=True, cwd=ROOT, timeout=120
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode != 0
    assert err.count("\n") == 1 and err.startswith("patchsync: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_example_round_trips_through_jelly_patch(tmp_path: Path) -> None:
    jelly, text = tmp_path / "lib.jellyp", tmp_path / "lib.rdfp"
    assert run("convert", str(EXAMPLE), str(jelly)).returncode == 0
    assert run("convert", str(jelly), str(text)).returncode == 0
    original = patches(read_events(EXAMPLE))
    assert len(original) == 3
    # The text has triples and quads; the QUADS stream carries triples in the default graph.
    assert patches(read_events(jelly)) == in_default_graph(original)
    assert patches(read_events(text)) == original
    assert jelly.stat().st_size < EXAMPLE.stat().st_size / 2


@pytest.mark.parametrize("fixture", sorted(p.name for p in JVM_PATCHES.glob("*.rdfp")))
@pytest.mark.parametrize("stream_type", ["frame", "flat", "punctuated"])
def test_jvm_fixtures_convert_with_every_stream_type(tmp_path: Path, fixture: str, stream_type: str) -> None:
    out = tmp_path / "out.jellyp"
    proc = run("convert", str(JVM_PATCHES / fixture), str(out), "--stream-type", stream_type, "--frame-size", "7")
    assert proc.returncode == 0, proc.stderr.decode()
    want = [e for group in in_default_graph(patches(read_events(JVM_PATCHES / fixture))) for e in group]
    got = [e for group in patches(read_events(out)) for e in group]
    assert got == want


def test_pipes_need_and_use_explicit_formats(tmp_path: Path) -> None:
    assert_one_line_error(run("convert", "-", str(tmp_path / "x.jellyp")), "--from")
    proc = run("convert", "-", "-", "--from", "rdfp", "--to", "jellyp", stdin=EXAMPLE.read_bytes())
    assert proc.returncode == 0
    back = run("convert", "-", "-", "--from", "jellyp", "--to", "rdfp", stdin=proc.stdout)
    assert back.returncode == 0
    assert b"Z ." in back.stdout and b"Stanis\xc5\x82aw Lem" in back.stdout


def test_triples_output_refuses_named_graphs_and_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "x.jellyp"
    proc = run("convert", str(EXAMPLE), str(out), "--statements", "triples")
    assert_one_line_error(proc, "TRIPLES stream cannot carry")
    assert list(tmp_path.iterdir()) == []


def test_a_quoted_triple_naming_a_graph_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    # Jelly's RdfQuad graph is an IRI, a blank node, the default graph or a literal, never a
    # quoted triple (https://w3id.org/jelly/dev/specification/serialization/, "RDF statements
    # and graphs"); RDF Patch text can write one, so only the text output keeps it.
    src = tmp_path / "q.rdfp"
    src.write_text(
        'A <http://e/s> <http://e/p> "o" .\nA <http://e/s> <http://e/p> "o" <<( <http://e/a> <http://e/b> <http://e/c> )>> .\n'
    )
    proc = run("convert", str(src), str(tmp_path / "q.jellyp"))
    assert_one_line_error(proc, "q.rdfp", "line 2", "a quoted triple names a graph")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.rdfp"]
    assert run("convert", str(src), str(tmp_path / "q2.rdfp")).returncode == 0


def test_truncated_input_names_file_offset_and_rule(tmp_path: Path) -> None:
    good = tmp_path / "good.jellyp"
    assert run("convert", str(EXAMPLE), str(good)).returncode == 0
    cut = tmp_path / "cut.jellyp"
    cut.write_bytes(good.read_bytes()[:-5])
    last_frame = max(e.offset for e in read_events(good))
    proc = run("convert", str(cut), str(tmp_path / "out.rdfp"))
    assert_one_line_error(proc, str(cut), f"byte {last_frame}", "truncated frame")
    assert not (tmp_path / "out.rdfp").exists()


def test_bad_text_input_names_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.rdfp"
    bad.write_text("TX .\nA <http://x/s> <http://x/p> .\n")
    assert_one_line_error(run("inspect", str(bad)), str(bad), "line 2")


def test_missing_file_and_unknown_extension() -> None:
    assert_one_line_error(run("inspect", "nope.jellyp"), "nope.jellyp", "No such file")
    assert_one_line_error(run("inspect", "README.md"), "cannot tell the format")


def test_inspect_json_reports_counts(tmp_path: Path) -> None:
    jelly = tmp_path / "lib.jellyp"
    assert run("convert", str(EXAMPLE), str(jelly), "--frame-size", "4").returncode == 0
    proc = run("inspect", str(jelly), "--json")
    assert proc.returncode == 0
    summary = json.loads(proc.stdout)
    events = list(read_events(EXAMPLE))
    assert summary["patches"] == sum(type(e) is PatchEnd for e in events) == 3
    assert summary["rows"]["A"] == sum(type(e) is Add for e in events)
    assert summary["rows"]["D"] == sum(type(e) is Delete for e in events)
    assert summary["rows"]["H"] == sum(type(e) is Header for e in events)
    assert summary["options"]["stream_type"] == "PUNCTUATED" and summary["options"]["rdf_star"] is True
    assert summary["frames"] >= 4
    assert summary["lookups"]["names"]["entries"] > 0


# -- a closed pipe ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["dump", "--target", "sqlite:///{db}"],
        ["inspect", str(EXAMPLE)],
        ["status", "--json", "--target", "sqlite:///{db}"],
        ["convert", str(EXAMPLE), "-", "--to", "jellyp"],
    ],
    ids=["dump", "inspect", "status --json", "convert to stdout"],
)
def test_a_closed_pipe_stops_a_command_quietly(tmp_path: Path, command: list[str]) -> None:
    # As `patchsync dump | head -1` once head has gone: every write to the pipe fails (EPIPE).
    # A Unix tool stops without a word, and the shell reports 128 + SIGPIPE (README, "Commands").
    db = tmp_path / "r.db"
    assert run("apply", str(EXAMPLE), "--target", f"sqlite:///{db}").returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes anything
    try:
        done = subprocess.run(
            [sys.executable, "-m", "patchsync", *(arg.format(db=db) for arg in command)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr.decode()) == (141, "")


# -- errors name what the user named ----------------------------------------------------------


def test_an_output_in_a_missing_directory_is_named_as_given(tmp_path: Path) -> None:
    # The output is written to a temporary file beside it first: that name is no business
    # of the user's.
    out = tmp_path / "nodir" / "x.jellyp"
    proc = run("convert", str(EXAMPLE), str(out))
    assert_one_line_error(proc, f"{out}: cannot write: No such file or directory")
    assert ".tmp" not in proc.stderr.decode()
    db = tmp_path / "r.db"
    assert run("apply", str(EXAMPLE), "--target", f"sqlite:///{db}").returncode == 0
    proc = run("dump", "--target", f"sqlite:///{db}", "-o", str(out.with_suffix(".nq")))
    assert_one_line_error(proc, f"{out.with_suffix('.nq')}: cannot write: No such file or directory")


def test_a_file_target_in_a_missing_directory_is_the_targets_fault(tmp_path: Path) -> None:
    target = tmp_path / "nodir" / "x.nq"
    proc = run("apply", str(EXAMPLE), "--target", f"file:{target}")
    assert_one_line_error(proc, f"{target}: cannot open the target: no such directory {target.parent}")
    assert str(EXAMPLE) not in proc.stderr.decode()  # the log is not to blame
    assert not target.parent.exists()


@pytest.mark.parametrize("spec", ["file:{}/x.nq", "sqlite:///{}/x.db"], ids=["file", "sqlite"])
def test_tail_refuses_a_target_in_a_missing_directory_as_apply_does(tmp_path: Path, spec: str) -> None:
    # tail's state directory beside the target made the directory; apply refuses it: one rule.
    missing = tmp_path / "nodir"
    target = spec.format(missing)
    where = missing / spec.rpartition("/")[2]
    for command in (["apply", str(EXAMPLE)], ["tail", str(tmp_path), "--once"], ["tail", str(tmp_path)]):
        proc = run(*command, "--target", target)
        assert_one_line_error(proc, f"{where}: cannot open the target: no such directory {missing}")
        assert sorted(p.name for p in tmp_path.iterdir()) == [], command


def test_convert_and_reverse_refuse_an_output_that_is_their_input(tmp_path: Path) -> None:
    log = tmp_path / "same.rdfp"
    log.write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "link.rdfp").symlink_to(log)
    (tmp_path / "hard.rdfp").hardlink_to(log)
    for command, name in [
        (["convert", "same.rdfp"], "same.rdfp"),
        (["convert", "same.rdfp"], "./same.rdfp"),
        (["convert", "same.rdfp"], "link.rdfp"),
        (["convert", "same.rdfp"], "hard.rdfp"),
        (["reverse", "same.rdfp", "-o"], "link.rdfp"),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "patchsync", *command, name],
            capture_output=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert proc.returncode == 2, name
        assert_one_line_error(proc, name, "is the input same.rdfp")
        assert log.read_bytes() == EXAMPLE.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.rdfp", "link.rdfp", "same.rdfp"]


@pytest.mark.parametrize("to_file", [False, True])
def test_dump_to_one_graph_decides_before_writing(tmp_path: Path, to_file: bool) -> None:
    log = tmp_path / "g.rdfp"
    # The default graph's quad comes first, so a dump that wrote as it went would write it.
    log.write_text(
        "H id <urn:p:1> .\nTX .\nA <http://e/s> <http://e/p> <http://e/o> .\n"
        "A <http://e/s> <http://e/p> <http://e/o> <http://e/g> .\nTC .\n"
    )
    target = f"sqlite:///{tmp_path / 't.db'}"
    assert run("apply", "--no-progress", str(log), "--target", target).returncode == 0
    out = tmp_path / "out.nt"
    out.write_text("kept\n")
    args = ["-o", str(out)] if to_file else []
    proc = run("dump", "--target", target, "--format", "nt", *args)
    assert_one_line_error(proc, "named graph <http://e/g>")
    assert str((tmp_path / "t.db").resolve()) in proc.stderr.decode()  # the target is named
    assert proc.stdout == b""
    assert out.read_text() == "kept\n"


@pytest.mark.parametrize("command", ["snapshot", "compact"])
def test_an_output_written_through_a_partial_file_is_named_as_given(tmp_path: Path, command: str) -> None:
    # snapshot and compact write OUT.partial, then rename it: the error is the output's.
    db = tmp_path / "r.db"
    assert run("apply", str(EXAMPLE), "--target", f"sqlite:///{db}").returncode == 0
    out = tmp_path / "nodir" / ("x.jelly" if command == "snapshot" else "x.jellyp")
    args = ["--target", f"sqlite:///{db}"] if command == "snapshot" else [str(EXAMPLE)]
    proc = run(command, *args, "-o", str(out))
    assert_one_line_error(proc, f"patchsync: {out}: cannot write: No such file or directory")
    assert ".partial" not in proc.stderr.decode()
    assert not out.parent.exists()
