"""rdflib targets: caller-supplied stores and ``file:`` targets with their sidecar."""

from __future__ import annotations

import shutil
from pathlib import Path

from rdflib import Dataset, Graph
from rdflib.plugins.stores.memory import Memory

from patchsync.apply.targets.file import FileTarget
from patchsync.apply.targets.rdflib_store import RdflibTarget

from .apply_helpers import apply_text, iri, reference, state

S, P = iri("s"), iri("p")
PART1 = f"H id <urn:1> .\nPA ex <http://ex/> .\nA {S} {P} {iri('1')} .\nA _:b {P} {iri('1')} {iri('g')} .\nZ .\n"
PART2 = f"H id <urn:2> .\nH prev <urn:1> .\nD _:b {P} {iri('1')} {iri('g')} .\nA {S} {P} {iri('2')} .\nPD ex .\nZ .\n"


def test_a_callers_store_and_graph() -> None:
    store = Memory()
    target = RdflibTarget(store)
    apply_text(PART1 + PART2, target)
    assert state(target) == reference(PART1 + PART2)
    assert len(Dataset(store=store)) == 2  # the caller sees the data in its own store
    graph = Graph()
    apply_text(f"A {S} {P} {iri('1')} .\n", RdflibTarget(graph))
    assert len(graph) == 1


def test_crash_between_data_and_sidecar_replays_a_suffix(tmp_path: Path) -> None:
    path = tmp_path / "state.trig"
    apply_text(PART1, FileTarget(path))
    old_sidecar = tmp_path / "old.json"
    shutil.copy(path.with_name("state.trig.patchsync.json"), old_sidecar)
    apply_text(PART1 + PART2, FileTarget(path))
    # The data was renamed into place, the sidecar was not: the checkpoint is behind.
    shutil.copy(old_sidecar, path.with_name("state.trig.patchsync.json"))
    r = apply_text(PART1 + PART2, FileTarget(path))
    assert r.patches == 1  # PART2 replayed onto data that already holds it: no change
    assert (r.added, r.deleted) == (0, 0)
    assert state(FileTarget(path)) == reference(PART1 + PART2)


def test_foreign_file_is_parsed_by_rdflib(tmp_path: Path) -> None:
    path = tmp_path / "seed.nq"
    path.write_text(f"{S} {P} {iri('seed')} .\n")
    apply_text(f"A {S} {P} {iri('1')} .\n", FileTarget(path))
    assert state(FileTarget(path))[0] == {(S, P, iri("seed"), ""), (S, P, iri("1"), "")}
