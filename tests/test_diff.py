"""diff and reverse: the library functions and the ``patchsync diff`` / ``reverse`` commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.compare import isomorphic
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync import Add, Delete, Header, UsageError
from patchsync.apply import MemoryTarget, apply_file
from patchsync.capture import Recorder
from patchsync.capture.diff import diff, read_dataset, reverse
from patchsync.cli.main import main
from patchsync.events import PatchEnd, PrefixDelete
from patchsync.logs.patch_logs import read_events
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import content
from .test_capture import replay, state

EX = "http://example.org/"
DG = DATASET_DEFAULT_GRAPH_ID

OLD_NQ = """\
<http://example.org/a> <http://example.org/p> "01"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://example.org/a> <http://example.org/p> _:x <http://example.org/g> .
_:x <http://example.org/q> "kept" <http://example.org/g> .
<http://example.org/gone> <http://example.org/p> "bye" .
"""
NEW_NQ = """\
<http://example.org/a> <http://example.org/p> "01"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://example.org/a> <http://example.org/p> _:x <http://example.org/g> .
_:x <http://example.org/q> "kept" <http://example.org/g> .
_:x <http://example.org/q> "new" <http://example.org/g> .
<http://example.org/b> <http://example.org/p> "chat"@fr .
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_diff_is_minimal_and_keeps_labels_and_lexical_forms(tmp_path: Path) -> None:
    old = read_dataset(write(tmp_path / "old.nq", OLD_NQ))
    new = read_dataset(write(tmp_path / "new.nq", NEW_NQ))
    rows = [e for e in content(diff(old, new)) if type(e) in (Add, Delete)]
    assert sorted(map(repr, rows)) == sorted(
        map(
            repr,
            [
                Delete(URIRef(EX + "gone"), URIRef(EX + "p"), Literal("bye"), DG),
                Add(BNode("x"), URIRef(EX + "q"), Literal("new"), URIRef(EX + "g")),
                Add(URIRef(EX + "b"), URIRef(EX + "p"), Literal("chat", lang="fr"), DG),
            ],
        )
    )
    assert content(diff(old, old)) == content(diff(new, new))  # equal inputs: an empty patch
    assert not [e for e in diff(old, old) if type(e) in (Add, Delete)]


@pytest.mark.parametrize("ext", ["jellyp", "rdfp"])
def test_cli_diff_then_replay_on_old_gives_new(tmp_path: Path, ext: str) -> None:
    old_path = write(tmp_path / "old.nq", OLD_NQ)
    new_path = write(tmp_path / "new.nq", NEW_NQ)
    out = tmp_path / f"d.{ext}"
    assert main(["diff", str(old_path), str(new_path), "-o", str(out)]) == 0
    target = read_dataset(old_path)
    replay(read_events(out), target=target)
    assert state(target)[0] == state(read_dataset(new_path))[0]


def test_canonical_diff_ignores_blank_node_labels_and_applies_to_old(tmp_path: Path) -> None:
    old_ttl = "@prefix ex: <http://example.org/> . ex:a ex:p [ ex:q 1 ; ex:r [ ex:q 2 ] ] ."
    new_ttl = "@prefix ex: <http://example.org/> . ex:a ex:p [ ex:q 1 ; ex:r [ ex:q 3 ] ] ."
    old = read_dataset(write(tmp_path / "old.ttl", old_ttl))
    # The same data with the blank nodes labelled: _:x and _:y, not the anon<n> labels
    # patchsync gives [] nodes by document order.
    again_ttl = "@prefix ex: <http://example.org/> . ex:a ex:p _:x . _:x ex:q 1 ; ex:r _:y . _:y ex:q 2 ."
    again = read_dataset(write(tmp_path / "again.ttl", again_ttl))
    new = read_dataset(write(tmp_path / "new.ttl", new_ttl))
    # By label (labels are system identifiers) the two files differ ...
    assert [e for e in diff(old, again) if type(e) in (Add, Delete)]
    # ... while two reads of one file are equal: labels, even generated ones, are kept.
    assert not [e for e in diff(old, read_dataset(tmp_path / "old.ttl")) if type(e) in (Add, Delete)]
    # ... canonically they are equal.
    assert not [e for e in diff(old, again, canonical=True) if type(e) in (Add, Delete)]
    patch = diff(old, new, canonical=True)
    assert len([e for e in patch if type(e) in (Add, Delete)]) == 2  # only the changed node's q
    replay(patch, target=old)
    assert isomorphic(Graph().__iadd__(old.graph(DG)), Graph().__iadd__(new.graph(DG)))


def test_diff_prefixes(tmp_path: Path) -> None:
    old = read_dataset(write(tmp_path / "old.ttl", "@prefix a: <http://a/> . a:x a:y a:z ."))
    new = read_dataset(write(tmp_path / "new.ttl", "@prefix b: <http://a/> . <http://a/x> <http://a/y> <http://a/z> ."))
    patch = content(diff(old, new, prefixes=True))
    assert PrefixDelete("a", URIRef("http://a/")) in patch
    assert not [e for e in patch if type(e) in (Add, Delete)]


def test_reverse_of_a_recorded_log_through_the_cli(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    ds = Dataset()
    with Recorder(ds, log) as rec:
        g = rec.graph
        with rec.transaction():
            g.add((URIRef(EX + "s"), URIRef(EX + "p"), Literal(1), URIRef(EX + "g")))
            g.bind("ex", URIRef(EX))
        with rec.transaction():
            g.remove((None, None, Literal(1)))
            g.add((URIRef(EX + "s"), URIRef(EX + "p"), BNode("b")))
    for ext in ("jellyp", "rdfp"):
        out = tmp_path / f"rev.{ext}"
        assert main(["reverse", str(log), "-o", str(out)]) == 0
        replica = replay(read_events(log))
        assert state(replica) == state(ds)
        replay(read_events(out), target=replica)
        assert state(replica) == (set(), {})


def test_reverse_needs_the_namespace_a_pd_removed() -> None:
    with pytest.raises(UsageError, match="cannot reverse PD"):
        list(reverse([PrefixDelete("ex"), PatchEnd()]))


def test_cli_errors_are_one_line_and_leave_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.nq", "<http://a> <http://b> .\n")
    good = write(tmp_path / "good.nq", "")
    out = tmp_path / "d.jellyp"
    assert main(["diff", str(bad), str(good), "-o", str(out)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("patchsync: ") and err.count("\n") == 1 and "bad.nq" in err
    assert not out.exists() and not list(tmp_path.glob(".d.jellyp*"))
    assert main(["diff", str(tmp_path / "x.csv"), str(good), "-o", str(out)]) != 0
    assert "extension" in capsys.readouterr().err
    truncated = write(tmp_path / "t.rdfp", "H id <urn:x> .\nTX .\nA <http://a> <http://b> <http://c> .\n")
    assert main(["reverse", str(truncated), "-o", str(out)]) != 0
    assert capsys.readouterr().err.count("\n") == 1 and not out.exists()


def test_reverse_through_stdout(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    log = tmp_path / "log.rdfp"
    with Recorder(Dataset(), log) as rec:
        rec.graph.add((URIRef(EX + "s"), URIRef(EX + "p"), Literal(1)))
    assert main(["reverse", str(log), "-o", "-", "--to", "rdfp"]) == 0
    text = capsysbinary.readouterr().out.decode()
    assert "D <http://example.org/s> <http://example.org/p>" in text


def test_cli_apply_of_the_diff_on_old_gives_new(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Through the applier of issue #4: OLD is loaded into a SQLite target as the patch
    # from an empty file, then the diff is applied and the target dumped.
    pytest.importorskip("sqlalchemy")
    empty = write(tmp_path / "empty.nq", "")
    old = write(tmp_path / "old.nq", OLD_NQ)
    new = write(tmp_path / "new.nq", NEW_NQ)
    base, patch, dumped = tmp_path / "base.jellyp", tmp_path / "d.jellyp", tmp_path / "out.nq"
    target = f"sqlite:///{tmp_path / 't.db'}"
    assert main(["diff", str(empty), str(old), "-o", str(base)]) == 0
    assert main(["diff", str(old), str(new), "-o", str(patch)]) == 0
    assert main(["apply", str(base), str(patch), "--target", target, "--chain", "ignore", "--no-progress"]) == 0
    assert main(["dump", "--target", target, "-o", str(dumped)]) == 0
    capsys.readouterr()
    assert state(read_dataset(dumped))[0] == state(read_dataset(new))[0]


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("ext", ["jellyp", "rdfp"])
def test_the_reverse_of_a_log_chains_onto_its_head(
    tmp_path: Path, ext: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The example log holds an RDF-star quoted triple: a Jelly-Patch output must declare it.
    log = EXAMPLES / "library.rdfp"
    out = tmp_path / f"rev.{ext}"
    assert main(["reverse", str(log), "-o", str(out)]) == 0
    ids = [e.value for e in read_events(log, adapter=NTriplesTerms()) if type(e) is Header and e.key == "id"]
    first = next(e for e in read_events(out, adapter=NTriplesTerms()) if type(e) is Header and e.key == "prev")
    assert first.value == ids[-1]
    # The documented round trip: the log, then its reverse, under the strict chain policy.
    target = MemoryTarget()
    apply_file(log, target)
    assert set(target.quads())
    apply_file(out, target)
    assert set(target.quads()) == set()
    capsys.readouterr()


def test_an_inverse_that_cannot_be_written_names_the_file_and_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(
        tmp_path / "g.rdfp",
        "H id <urn:a> .\nTX .\nA <http://e/s> <http://e/p> <http://e/o> << <http://e/a> <http://e/b> <http://e/c> >> .\nTC .\n",
    )
    out = tmp_path / "rev.jellyp"
    assert main(["reverse", str(log), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "g.rdfp, byte 20: " in err and "graph" in err
    assert not out.exists()


def test_the_documented_diff_then_reverse_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # docs/capture-and-diff.md: the change applied to OLD, then its reverse, under the strict
    # chain policy, give OLD back.
    old = write(tmp_path / "old.nq", OLD_NQ)
    new = write(tmp_path / "new.nq", NEW_NQ)
    change, undo, dumped = tmp_path / "change.jellyp", tmp_path / "undo.jellyp", tmp_path / "out.nq"
    target = f"sqlite:///{tmp_path / 't.db'}"
    assert main(["diff", str(old), str(new), "-o", str(change)]) == 0
    assert main(["reverse", str(change), "-o", str(undo)]) == 0
    assert main(["apply", "--base", str(old), str(change), "--target", target, "--no-progress"]) == 0
    assert main(["apply", str(undo), "--target", target, "--no-progress"]) == 0
    assert main(["dump", "--target", target, "-o", str(dumped)]) == 0
    capsys.readouterr()
    assert sorted(dumped.read_text().splitlines()) == sorted(OLD_NQ.splitlines())
