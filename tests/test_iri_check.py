"""Relative IRIs are refused by default (``Limits.require_absolute_iris``).

Two Jelly-Patch logs joined with ``cat`` decode the second log's rows against the first
log's lookup tables, which yields IRIs such as ``<q>``: the applier must stop there with one
line naming the file, byte and rule, having applied nothing of the bad unit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import DecodeError
from patchsync.events import Add
from patchsync.logs.patch_logs import read_events
from patchsync.options import Limits
from patchsync.terms.ntriples import NTriplesTerms

A_RDFP = """H id <urn:uuid:aaaa> .
TX .
A <http://example.org/s1> <http://example.org/p1> "x" .
A <http://example.org/s2> <http://example.org/p2> "y" <http://example.org/g> .
TC .
"""
B_RDFP = """H id <urn:uuid:bbbb> .
H prev <urn:uuid:aaaa> .
TX .
A <http://other.org/t/1> <http://other.org/q> "z" .
A <http://other.org/t/2> <http://other.org/q> "w" .
TC .
"""
EXPECTED = {
    '<http://example.org/s1> <http://example.org/p1> "x" .',
    '<http://example.org/s2> <http://example.org/p2> "y" <http://example.org/g> .',
    '<http://other.org/t/1> <http://other.org/q> "z" .',
    '<http://other.org/t/2> <http://other.org/q> "w" .',
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, text=True, timeout=120)


def _lines(path: Path) -> set[str]:
    return {line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """a.jellyp and b.jellyp written separately, and c.jellyp = cat a b."""
    out = []
    for name, text in (("a", A_RDFP), ("b", B_RDFP)):
        (tmp_path / f"{name}.rdfp").write_text(text, encoding="utf-8")
        done = _cli("convert", str(tmp_path / f"{name}.rdfp"), str(tmp_path / f"{name}.jellyp"))
        assert done.returncode == 0, done.stderr
        out.append(tmp_path / f"{name}.jellyp")
    joined = tmp_path / "c.jellyp"
    joined.write_bytes(out[0].read_bytes() + out[1].read_bytes())
    return out[0], out[1], joined


def test_cat_joined_logs_stop_with_one_line_and_nothing_of_the_bad_unit(tmp_path: Path, logs: tuple[Path, ...]) -> None:
    _, _, joined = logs
    target = tmp_path / "t.nq"
    done = _cli("apply", str(joined), "--target", f"file:{target}")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "c.jellyp" in lines[0] and "byte " in lines[0] and "is not absolute (RFC 3987" in lines[0]
    assert "Traceback" not in done.stderr
    # The first log's unit was fine and is kept; nothing of the second unit got in.
    assert _lines(target) == {q for q in EXPECTED if "example.org" in q}


def test_with_the_limit_off_the_garbage_applies(tmp_path: Path, logs: tuple[Path, ...]) -> None:
    _, _, joined = logs
    target = tmp_path / "t.nq"
    done = _cli("apply", str(joined), "--target", f"file:{target}", "--allow-relative-iris")
    assert done.returncode == 0, done.stderr
    got = _lines(target)
    assert len(got) == 4 and got != EXPECTED  # applied, and wrong: why the check exists
    assert any("<q>" in line for line in got)


def test_append_of_the_same_logs_applies_correctly(tmp_path: Path, logs: tuple[Path, ...]) -> None:
    a, b, _ = logs
    joined = tmp_path / "j.jellyp"
    done = _cli("append", str(a), str(b), "-o", str(joined))
    assert done.returncode == 0, done.stderr
    target = tmp_path / "t.nq"
    done = _cli("apply", str(joined), "--target", f"file:{target}")
    assert done.returncode == 0, done.stderr
    assert _lines(target) == EXPECTED


def test_jelly_patch_decoder_checks_once_per_built_iri(logs: tuple[Path, ...]) -> None:
    _, _, joined = logs
    with pytest.raises(DecodeError, match=r"byte \d+.*IRI <[^>]*> is not absolute"):
        list(read_events(joined, adapter=NTriplesTerms()))
    events = list(read_events(joined, adapter=NTriplesTerms(), limits=Limits(require_absolute_iris=False)))
    assert sum(type(e) is Add for e in events) == 4


@pytest.mark.parametrize(
    ("iri", "ok"),
    [
        ("http://example.org/a", True),
        ("urn:uuid:1", True),
        ("a+b-c.d:x", True),
        ("x:", True),
        ("q", False),
        ("45", False),
        ("1http://example.org/", False),  # a scheme starts with a letter
        ("//example.org/a", False),
        ("-a:b", False),
        ("", False),
    ],
)
def test_rdf_patch_text_checks_the_scheme(iri: str, ok: bool) -> None:
    text = f'A <{iri}> <http://example.org/p> "o" .\n'
    if ok:
        assert type(read_rdfp(text, NTriplesTerms())[0]) is Add
        return
    with pytest.raises(DecodeError, match=r"line 1: IRI .* is not absolute"):
        read_rdfp(text, NTriplesTerms())


def test_rdf_patch_text_checks_every_position_and_the_limit_turns_it_off() -> None:
    rows = [
        "H id <rel> .\n",
        'PA "ex" <rel/> .\n',
        'A <http://e/s> <http://e/p> <<( <rel> <http://e/p> "o" )>> .\n',
        'A <http://e/s> <http://e/p> "o" <rel> .\n',
    ]
    from patchsync.codec.rdfp import RdfPatchTextReader

    for row in rows:
        reader = RdfPatchTextReader(NTriplesTerms(), source="x.rdfp")
        reader.feed(row.encode())
        with pytest.raises(DecodeError, match=r"x.rdfp, byte 0, line 1: IRI <rel/?> is not absolute"):
            reader.close()
            list(reader)
        lenient = RdfPatchTextReader(NTriplesTerms(), limits=Limits(require_absolute_iris=False))
        lenient.feed(row.encode())
        lenient.close()
        assert list(lenient)
