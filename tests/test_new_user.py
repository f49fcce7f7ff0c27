"""What a new user meets following the README: every command does what its name and suffix say.

Each test runs the real command line in a scratch folder holding the README's example logs
(``examples/library*.rdfp``, which contain an RDF-star quoted triple).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchsync import formats

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def patchsync(cwd: Path, *args: str, umask: int = -1, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        umask=umask,
    )


def ok(cwd: Path, *args: str, umask: int = -1) -> str:
    done = patchsync(cwd, *args, umask=umask)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def one_line_error(done: subprocess.CompletedProcess[str], code: int | None = 1) -> str:
    """The one error line of a failed command (``code`` ``None``: any failing exit code)."""
    assert done.returncode == code if code is not None else done.returncode not in (0, None), (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The example logs, applied into ``lib.db``."""
    for name in ("library.rdfp", "library-more.rdfp"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    ok(tmp_path, "apply", "--no-progress", "--target", "sqlite:///lib.db", "library.rdfp", "library-more.rdfp")
    return tmp_path


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_written_files_get_the_mode_open_would_give(folder: Path, umask: int) -> None:
    want = 0o666 & ~umask
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.nq", umask=umask)
    ok(folder, "convert", "library.rdfp", "library.jellyp", umask=umask)
    (folder / "plain.nt").write_text("<http://e/s> <http://e/p> <http://e/o> .\n")
    ok(folder, "diff", "plain.nt", "plain.nt", "-o", "none.rdfp", umask=umask)
    ok(folder, "reverse", "library-more.rdfp", "-o", "undo.rdfp", umask=umask)
    for name in ("state.nq", "library.jellyp", "none.rdfp", "undo.rdfp"):
        assert (folder / name).stat().st_mode & 0o777 == want, name


def test_rewriting_a_file_keeps_its_mode(folder: Path) -> None:
    (folder / "state.nq").write_text("")
    (folder / "state.nq").chmod(0o640)
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.nq", umask=0o022)
    assert (folder / "state.nq").stat().st_mode & 0o777 == 0o640


# -- dump writes the format its output's suffix names ------------------------------------

PLAIN = (
    "H id <urn:p:1> .\n"
    'PA "ex" <http://example.org/> .\n'
    'A <http://example.org/s> <http://example.org/p> "o"@en .\n'
    "A <http://example.org/s> <http://example.org/q> _:b1 .\n"
)


def _quads(path: Path) -> set[tuple[str, str, str, str | None]]:
    from patchsync.logs.rdf_files import read_rdf_quads

    return {(s, p, o, g or None) for s, p, o, g in read_rdf_quads(path).quads}


@pytest.mark.parametrize("fmt", formats.names(formats.DUMP))
def test_dump_writes_the_format_its_suffix_names(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "plain.rdfp").write_text(PLAIN)
    ok(tmp_path, "apply", "--no-progress", "--target", "sqlite:///plain.db", "plain.rdfp")
    ok(tmp_path, "dump", "--target", "sqlite:///plain.db", "-o", "reference.nq")
    suffix = formats.get(fmt).suffixes[0]
    ok(tmp_path, "dump", "--target", "sqlite:///plain.db", "-o", f"out{suffix}")
    # Read back by its suffix: a file in another format fails to parse or differs.
    assert len(_quads(tmp_path / f"out{suffix}")) == 2
    if formats.get(fmt).keeps_labels and fmt not in ("ttl", "trig"):
        assert _quads(tmp_path / f"out{suffix}") == _quads(tmp_path / "reference.nq")


def test_dump_to_jelly_is_jelly_rdf_and_holds_rdf_star(folder: Path) -> None:
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.jelly")
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.nq")
    assert "rdf_star=True" in ok(folder, "inspect", "state.jelly")
    assert _quads(folder / "state.jelly") == _quads(folder / "state.nq")
    assert any(q[0].startswith("<<") or q[2].startswith("<<") for q in _quads(folder / "state.jelly"))


@pytest.mark.parametrize("name", ["state.xyz", "state.jsonld", "state", "state.jellyp"])
def test_dump_refuses_a_suffix_it_does_not_write(folder: Path, name: str) -> None:
    line = one_line_error(patchsync(folder, "dump", "--target", "sqlite:///lib.db", "-o", name))
    assert name in line and ".jelly" in line and ".nq" in line
    assert not (folder / name).exists()
    assert not list(folder.glob(f".{name}.*"))  # no temporary file left either


# -- readers refuse a target that does not exist; nothing is created before inputs are checked --


@pytest.mark.parametrize("spec", ["sqlite:///missing.db", "file:missing.nq", "oxigraph:missing"])
@pytest.mark.parametrize("command", [["snapshot", "-o", "s.jelly"], ["dump"], ["status"]])
def test_read_only_commands_refuse_a_missing_target(tmp_path: Path, spec: str, command: list[str]) -> None:
    line = one_line_error(patchsync(tmp_path, command[0], "--target", spec, *command[1:]), code=2)
    assert "missing" in line and "does not exist" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["tail", "nosuchdir", "--once"], "nosuchdir: no such directory"),
        (["tail", "gone/log.jellyp", "--once"], "its directory gone does not exist"),
        (["tail", "logs", "--once", "--base", "missing.jelly"], "missing.jelly: no such file"),
        (["apply", "library.rdfp", "--base", "missing.jelly"], "missing.jelly: no such file"),
        (["apply", "library.rdfp", "--base", "library-more.rdfp"], ".rdfp is a patch log"),
    ],
)
def test_nothing_is_created_before_the_inputs_are_checked(tmp_path: Path, args: list[str], said: str) -> None:
    shutil.copy(EXAMPLES / "library.rdfp", tmp_path)
    shutil.copy(EXAMPLES / "library-more.rdfp", tmp_path)
    (tmp_path / "logs").mkdir()
    line = one_line_error(patchsync(tmp_path, *args, "--target", "sqlite:///t.db"), code=None)
    assert said in line
    assert not (tmp_path / "t.db").exists() and not (tmp_path / "t.db.tail").exists()


# -- smaller things a newcomer trips on --------------------------------------------------


def test_a_sqlite_url_with_two_slashes_says_to_use_three(folder: Path) -> None:
    line = one_line_error(patchsync(folder, "apply", "library.rdfp", "--target", "sqlite://library.db"), code=2)
    assert "sqlite:///library.db" in line and "three slashes" in line
    assert not (folder / "library.db").exists()


def test_a_flag_typo_prints_the_usage_of_its_command(folder: Path) -> None:
    done = patchsync(folder, "apply", "--targt", "sqlite:///x.db", "library.rdfp")
    assert done.returncode == 2
    assert "usage: patchsync apply" in done.stderr and "unrecognized arguments: --targt" in done.stderr


@pytest.mark.parametrize("command", ["apply", "tail"])
def test_a_snapshot_given_as_a_log_points_to_base(folder: Path, command: str) -> None:
    ok(folder, "snapshot", "--target", "sqlite:///lib.db", "-o", "primary.jelly")
    args = [command, "primary.jelly", "--target", "sqlite:///replica.db"] + (["--once"] if command == "tail" else [])
    line = one_line_error(patchsync(folder, *args), code=2)
    assert "primary.jelly" in line and "--base primary.jelly" in line
    assert not (folder / "replica.db").exists()


# -- diff and append handle RDF-star, as the example logs use it -------------------------


@pytest.mark.parametrize("suffix", [".nq", ".jelly"])
def test_diff_of_rdf_star_data_applies_to_give_the_new_state(folder: Path, suffix: str) -> None:
    ok(folder, "apply", "--no-progress", "--target", "sqlite:///old.db", "library.rdfp")
    ok(folder, "dump", "--target", "sqlite:///old.db", "-o", f"old{suffix}")
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", f"new{suffix}")
    (folder / "empty.nq").write_text("")
    # From nothing: the patch adds the quoted triple; then the step between the two states.
    ok(folder, "diff", "empty.nq", f"old{suffix}", "-o", "first.jellyp")
    ok(folder, "diff", f"old{suffix}", f"new{suffix}", "-o", "step.rdfp")
    assert "rdf_star=True" in ok(folder, "inspect", "first.jellyp")
    ok(folder, "apply", "--no-progress", "--chain", "ignore", "--target", "sqlite:///r.db", "first.jellyp", "step.rdfp")
    ok(folder, "dump", "--target", "sqlite:///r.db", "-o", "replica.nq")
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "primary.nq")
    assert _quads(folder / "replica.nq") == _quads(folder / "primary.nq")


def test_append_into_a_new_log_declares_what_the_sources_use(folder: Path) -> None:
    out = ok(folder, "append", "library.rdfp", "library-more.rdfp", "-o", "new.jellyp")
    assert "appended 5, skipped 0 already present" in out
    assert "rdf_star=True" in ok(folder, "inspect", "new.jellyp")
    ok(folder, "apply", "--no-progress", "--target", "sqlite:///r.db", "new.jellyp")
    ok(folder, "dump", "--target", "sqlite:///r.db", "-o", "replica.nq")
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "primary.nq")
    assert _quads(folder / "replica.nq") == _quads(folder / "primary.nq")


def test_append_to_a_log_without_rdf_star_names_file_and_line(tmp_path: Path) -> None:
    first = "H id <urn:p:1> .\nA <http://e/s> <http://e/p> <http://e/o> .\n"
    second = (
        "H id <urn:p:2> .\nH prev <urn:p:1> .\nA <http://e/s> <http://e/p> <http://e/o2> .\n"
        "A << <http://e/s> <http://e/p> <http://e/o> >> <http://e/p> <http://e/o> .\n"
    )
    (tmp_path / "first.rdfp").write_text(first)
    (tmp_path / "second.rdfp").write_text(second)
    ok(tmp_path, "append", "first.rdfp", "-o", "d.jellyp")
    before = (tmp_path / "d.jellyp").read_bytes()
    line = one_line_error(patchsync(tmp_path, "append", "second.rdfp", "-o", "d.jellyp"))
    assert f"second.rdfp, byte {second.index('A <<')}, line 4" in line and "RDF-star" in line
    assert (tmp_path / "d.jellyp").read_bytes() == before


def test_tail_of_a_directory_of_rdfp_logs_says_it_follows_jellyp_segments(tmp_path: Path) -> None:
    # README: a source is "a directory of .jellyp segments"; .rdfp logs in one are not followed.
    (tmp_path / "logs").mkdir()
    shutil.copy(EXAMPLES / "library.rdfp", tmp_path / "logs")
    target = ["--target", "sqlite:///t.db"]
    line = one_line_error(patchsync(tmp_path, "tail", "logs", "--once", *target), code=2)
    assert line.startswith("patchsync: logs: a directory without .jellyp segments, only library.rdfp"), line
    assert "tail follows the .jellyp segments of a directory" in line and "patchsync convert" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
    # The daemon waits for a segment to come, and says once what it found instead.
    err = tmp_path / "daemon.err"
    with err.open("w") as stderr:
        daemon = subprocess.Popen(
            [sys.executable, "-m", "patchsync", "tail", "logs", *target], cwd=tmp_path, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 60
        while "event=no_segments" not in err.read_text() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert daemon.poll() is None, err.read_text()
        assert "event=no_segments source=logs reason=" in err.read_text(), err.read_text()
    finally:
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(60) == 0, err.read_text()
    # A directory with nothing in it yet is nothing to say anything of (a fresh volume).
    (tmp_path / "fresh").mkdir()
    done = patchsync(tmp_path, "tail", "fresh", "--once", "--target", "sqlite:///f.db")
    assert done.returncode == 0 and "patchsync:" not in done.stderr, done.stderr
