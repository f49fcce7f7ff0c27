"""docs/design.md §5: TRIPLES streams go to the default graph of a dataset target, or a chosen graph."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync import UsageError
from patchsync.apply import MemoryTarget, apply_stream
from patchsync.codec.rdfp import read_rdfp
from patchsync.options import PatchOptions, StatementType
from patchsync.terms.ntriples import NTriplesTerms

from .apply_helpers import state
from .helpers import encode

ROOT = Path(__file__).resolve().parents[1]
G = "http://example.org/chosen"
TEXT = (
    "TX .\n"
    'PA "ex" <http://example.org/> .\n'
    "A <http://example.org/s> <http://example.org/p> <http://example.org/o> .\n"
    "A <http://example.org/s> <http://example.org/p> <http://example.org/o2> <http://example.org/named> .\n"
    "TC .\n"
)


def test_triples_go_to_the_chosen_graph_and_quads_keep_theirs() -> None:
    target = MemoryTarget()
    result = apply_stream(io.BytesIO(TEXT.encode()), target, "rdfp", source="log", graph=G)
    assert result.added == 2
    quads, namespaces = state(target)[:2]
    assert ("<http://example.org/s>", "<http://example.org/p>", "<http://example.org/o>", f"<{G}>") in quads
    assert any(q[3] == "<http://example.org/named>" for q in quads)
    assert not any(q[3] in ("", None) for q in quads)  # nothing left in the default graph
    assert any(f"<{G}>" in str(ns) for ns in namespaces)


def test_without_a_chosen_graph_triples_go_to_the_default_graph() -> None:
    target = MemoryTarget()
    apply_stream(io.BytesIO(TEXT.encode()), target, "rdfp", source="log")
    assert any(q[3] in ("", None) for q in state(target)[0])


def test_a_graph_that_is_not_an_iri_is_refused() -> None:
    with pytest.raises(UsageError, match="not an absolute IRI"):
        apply_stream(io.BytesIO(TEXT.encode()), MemoryTarget(), "rdfp", source="log", graph="no iri")


def test_cli_applies_a_triples_jelly_stream_into_a_chosen_graph(tmp_path: Path) -> None:
    log = tmp_path / "triples.jellyp"
    events = read_rdfp(TEXT.replace(" <http://example.org/named>", ""), NTriplesTerms())
    log.write_bytes(encode(events, PatchOptions(statement_type=StatementType.TRIPLES), NTriplesTerms()))
    db = f"sqlite:///{tmp_path / 'state.db'}"
    run = [sys.executable, "-m", "patchsync"]
    applied = subprocess.run([*run, "apply", str(log), "--target", db, "--graph", G], capture_output=True, cwd=ROOT)
    assert applied.returncode == 0, applied.stderr.decode()
    dump = subprocess.run([*run, "dump", "--target", db], capture_output=True, cwd=ROOT)
    lines = dump.stdout.decode().splitlines()
    assert lines and all(line.endswith(f"<{G}> .") for line in lines), lines
