"""Oxigraph specifics: RDF-star as objects, the redo journal, SPARQL over the applied state."""

from __future__ import annotations

from pathlib import Path

import pytest

from .apply_helpers import apply_text, iri, reference, state

pytest.importorskip("pyoxigraph")

from patchsync.apply.targets.oxigraph import OxigraphTarget
from patchsync.errors import ApplyError

S, P, O = iri("s"), iri("p"), iri("o")  # noqa: E741


def test_triple_terms_as_objects_and_subjects_refused(tmp_path: Path) -> None:
    target = OxigraphTarget(tmp_path / "ox")
    text = f'A {S} {P} << {S} {P} << _:b {P} "1" >> >> .\nZ .\n'
    apply_text(text, target)
    assert state(target)[0] == reference(text)[0]
    with pytest.raises(ApplyError, match=r"RDF 1\.2"):
        apply_text(f"TX .\nA {S} {P} {O} .\nA << {S} {P} {O} >> {P} {O} .\nTC .\n", target, source="b")
    assert state(target)[0] == reference(text)[0]
    target.close()


def test_leftover_journal_is_redone_on_open(tmp_path: Path) -> None:
    target = OxigraphTarget(tmp_path / "ox")
    apply_text(f"A {S} {P} {O} .\nZ .\n", target)
    # A crash after the journal was written and before the store changed.
    target._pending = {}
    quad = target._quad(*(target.adapter.iri(x[1:-1]) for x in (S, P, O)), None)
    target._write_journal([quad], [])
    target.close()
    reopened = OxigraphTarget(tmp_path / "ox")
    assert state(reopened)[0] == set()
    assert not (tmp_path / "ox.journal").exists()
    reopened.close()


def test_state_is_queryable_with_sparql(tmp_path: Path) -> None:
    target = OxigraphTarget(tmp_path / "ox")
    apply_text(f'H id <urn:1> .\nA {S} {P} "v" .\nZ .\n', target)
    rows = list(target.store.query(f"SELECT ?o WHERE {{ {S} {P} ?o }}"))
    assert [r["o"].value for r in rows] == ["v"]
    assert target.head() == "urn:1"
    target.close()
