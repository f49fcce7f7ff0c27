"""Prefix rows (``PA``/``PD``) inside commit groups on SQL targets.

A unit's prefix rows are held with its quads and written with its group, so they must leave
the store, the counts and the patch records exactly as the reference MemoryTarget, which
takes every unit on its own: in committed, aborted and implicit units, a prefix bound again
within a group, removed when absent, in a unit that writes before its end, in a patch
skipped as re-delivered. And they must cost no savepoint and no statement per row.
"""

from __future__ import annotations

from typing import Any

import pytest

from patchsync.apply import MemoryTarget
from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.targets.sql import SqlTarget
from patchsync.codec.rdfp import read_rdfp

from .apply_helpers import iri, state

S, P, G = iri("s"), iri("p"), iri("g1")
NS1, NS2, NS3 = iri("ns1/"), iri("ns2/"), iri("ns3/")


def _patch(n: int, body: str) -> str:
    return f"H id <urn:p{n}> .\n" + (f"H prev <urn:p{n - 1}> .\n" if n else "") + body + "Z .\n"


def _add(o: str) -> str:
    return f"A {S} {P} {iri(o)} .\n"


#: name -> patches; each exercises one shape of prefix rows inside a group.
LOGS: dict[str, list[str]] = {
    "committed": [_patch(0, f"TX .\nPA ex {NS1} .\n{_add('o1')}TC .\nTX .\nPA fx {NS2} {G} .\nTC .\n")],
    "aborted": [
        _patch(0, f"TX .\nPA ex {NS1} .\nTC .\n"),
        # The aborted unit rebinds ex, removes it and binds gx: none of it may stay.
        _patch(1, f"TX .\nPA ex {NS2} .\n{_add('o1')}PD ex .\nPA gx {NS3} .\nTA .\nTX .\n{_add('o2')}TC .\n"),
    ],
    "implicit": [_patch(0, f"PA ex {NS1} .\n{_add('o1')}PD fx .\n"), _patch(1, f"TX .\nTC .\nPA fx {NS2} .\n")],
    "rebound": [
        _patch(0, f"TX .\nPA ex {NS1} .\nPA ex {NS2} .\nTC .\nTX .\nPD ex .\nPA ex {NS3} .\nTC .\n"),
        _patch(1, f"TX .\nPA fx {NS1} .\nTC .\nTX .\nPD fx .\nTC .\nTX .\nPA ex {NS1} {G} .\nPD ex .\nTC .\n"),
    ],
    "absent": [_patch(0, f"TX .\nPD ex .\nPD ex {G} .\n{_add('o1')}TC .\nPD zz .\n")],
    "deleted-then-aborted": [
        _patch(0, f"TX .\nPA ex {NS1} .\nTC .\nTX .\nPD ex .\nTA .\n"),
        _patch(1, f"TX .\nPA ex {NS2} .\nTC .\nTX .\nPA ex {NS3} .\n{_add('o1')}{_add('o2')}{_add('o3')}TA .\n"),
    ],
    # Rows filling a batch (batch_rows=2 below) send the unit before its end: its prefix
    # rows held so far go with it, the later ones as they come; the abort undoes them all.
    "direct": [
        _patch(0, f"TX .\nPA ex {NS1} .\n{_add('o1')}{_add('o2')}{_add('o3')}PA fx {NS2} .\nTC .\n"),
        _patch(1, f"TX .\nPA ex {NS3} .\n{_add('o4')}{_add('o5')}{_add('o6')}PD fx .\nTA .\nTX .\nPD ex .\nTC .\n"),
    ],
}


def _apply(target: Any, text: str, source: str, **kwargs: Any) -> ApplyResult:
    return Applier(target, source=source, **kwargs).apply(read_rdfp(text, target.adapter))


def _counts(r: ApplyResult) -> tuple[int, ...]:
    return (r.units, r.aborted, r.added, r.deleted, r.noop, r.patches, r.skipped)


def _history(target: Any) -> list[tuple[Any, ...]]:
    records = target.history() if callable(target.history) else target.history
    return [(r.patch_id, r.prev, r.source, r.offset, r.added, r.deleted, r.noop) for r in records]


@pytest.mark.parametrize("name", sorted(LOGS))
@pytest.mark.parametrize("knobs", [{}, {"group_units": 1}, {"group_units": 2, "batch_rows": 2}])
def test_prefix_rows_in_groups_match_the_reference(sql_url: str, name: str, knobs: dict[str, int]) -> None:
    patches = LOGS[name]
    # The first patch under source a, then the whole log re-delivering it under b (skipped).
    plan = [("a", patches[0]), ("b", "".join(patches))]
    reference = MemoryTarget()
    expected = [_counts(_apply(reference, log, source)) for source, log in plan]
    with SqlTarget(sql_url) as target:
        got = [_counts(_apply(target, log, source, **knobs)) for source, log in plan]
        assert got == expected
        assert _history(target) == _history(reference)
        assert state(target) == state(reference)


class _Counting:
    """A driver cursor counting the statements it runs (``executemany`` counts once)."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.seen: list[str] = []

    def execute(self, sql: Any, *args: Any) -> Any:
        self.seen.append(str(sql))
        return self.cursor.execute(sql, *args)

    def executemany(self, sql: Any, *args: Any) -> Any:
        self.seen.append(str(sql))
        return self.cursor.executemany(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cursor, name)


def test_prefix_rows_cost_no_savepoint_and_no_statement_each(sql_url: str) -> None:
    units = "".join(
        f"TX .\nPA ex {iri(f'ns{u}/')} .\nPA n{u % 3} {NS1} .\n{_add(f'o{u}')}{'TA' if u % 4 == 3 else 'TC'} .\n"
        for u in range(40)
    )
    log = _patch(0, units + f"PD n0 .\nPA n1 {NS2} .\n{_add('last')}")
    reference = MemoryTarget()
    expected = _counts(_apply(reference, log, "log"))
    with SqlTarget(sql_url) as target:
        cursor = target.link.cur = _Counting(target.link.cur)
        assert _counts(_apply(target, log, "log")) == expected
        assert state(target) == state(reference)
        assert [s for s in cursor.seen if "SAVEPOINT" in s and "ps_unit" in s] == []
        # One group: one write of the bindings left (nothing is unbound at its end but n0).
        assert len([s for s in cursor.seen if "ps_namespaces" in s]) == 2
