"""Commit groups (issue #14): units held by the applier and written together to SQL targets.

Differential: on generated logs (quads repeated across units and patches, aborts, deletes
of absent quads, re-adds, blank nodes, named graphs, prefix rows, re-delivered patches)
the SQL targets must end in the state of the reference MemoryTarget, which takes every
unit on its own, with the same counts per apply and per patch record. Group bounds and
batch sizes are drawn too, so groups end anywhere: inside a patch, right before a unit
that must write early, at a re-delivered patch.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchsync.apply import MemoryTarget
from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.group import CommitGroup, HeldUnit, settle
from patchsync.apply.target import (
    CAN_LAST_WRITES,
    CAN_WRITE_EACH,
    CAN_WRITE_LATER,
    CAN_WRITE_PREFIXES,
    Checkpoint,
    PrefixOp,
    Quad,
    abilities_of,
)
from patchsync.apply.targets.sql import SqlTarget
from patchsync.apply.targets.sql.dialects.postgres import _EACH_TRUST
from patchsync.codec.rdfp import RdfPatchTextReader, read_rdfp
from patchsync.errors import UsageError

from .apply_helpers import RecordingCursor, iri, state

SUBJECTS = [iri("s0"), iri("s1"), "_:b0", "_:b1"]
PREDICATES = [iri("p0"), iri("p1")]
OBJECTS = [iri("o0"), '"x"', '"y"@en']
GRAPHS = ["", f" {iri('g1')}"]
QUADS = [f"{s} {p} {o}{g}" for s in SUBJECTS for p in PREDICATES for o in OBJECTS for g in GRAPHS][::5]

row = st.tuples(st.sampled_from("AD"), st.sampled_from(QUADS)).map(lambda r: f"{r[0]} {r[1]} .\n")
prefix_row = st.sampled_from(
    [
        f"PA ex {iri('ns/')} .\n",
        f"PA ex {iri('ns2/')} .\n",
        "PD ex .\n",
        f"PA fx {iri('ns/')}{GRAPHS[1]} .\n",
        f"PD fx{GRAPHS[1]} .\n",
    ]
)
unit_rows = st.lists(st.one_of(row, row, row, row, row, row, prefix_row), max_size=6).map("".join)
unit = st.tuples(st.sampled_from(["TC", "TC", "TC", "TA", "implicit"]), unit_rows)


@st.composite
def logs(draw: st.DrawFn) -> list[str]:
    """Patches of RDF Patch text, chained by id and prev; each a list item."""
    patches = []
    for n in range(draw(st.integers(1, 7))):
        text = f"H id <urn:p{n}> .\n" + (f"H prev <urn:p{n - 1}> .\n" if n else "")
        units = draw(st.lists(unit, min_size=0, max_size=3))
        for i, (kind, rows) in enumerate(units):
            if kind == "implicit":
                if i == len(units) - 1:
                    text += rows  # rows outside TX end at the patch end
                continue
            text += f"TX .\n{rows}{kind} .\n"
        patches.append(text + "Z .\n")
    return patches


knobs = st.fixed_dictionaries(
    {
        "group_rows": st.sampled_from([1, 3, 20_000]),
        "group_units": st.sampled_from([1, 2, 5, 2_000]),
        "batch_rows": st.sampled_from([2, 5_000]),
    }
)


def _apply(target: Any, text: str, source: str, **kwargs: Any) -> ApplyResult:
    return Applier(target, source=source, **kwargs).apply(read_rdfp(text, target.adapter))


def _history(target: Any) -> list[tuple[Any, ...]]:
    records = target.history() if callable(target.history) else target.history
    return [(r.patch_id, r.prev, r.source, r.offset, r.added, r.deleted, r.noop) for r in records]


def _counts(r: ApplyResult) -> tuple[int, ...]:
    return (r.units, r.aborted, r.added, r.deleted, r.noop, r.patches, r.skipped)


def _plan(patches: list[str], first: int, again: int | None) -> list[tuple[str, str]]:
    """(source, log) applies: the first ``first`` patches under ``a``, then the whole log
    (plus patch ``again`` re-delivered at its end) under ``b``: ``a``'s patches are skipped."""
    whole = "".join(patches) + (patches[again] if again is not None else "")
    return [("a", "".join(patches[:first])), ("b", whole)]


def _differential(make: Any, patches: list[str], first: int, again: int | None, kw: dict[str, Any]) -> None:
    reference = MemoryTarget()
    expected = [_counts(_apply(reference, log, source)) for source, log in _plan(patches, first, again)]
    target = make()
    try:
        got = [_counts(_apply(target, log, source, **kw)) for source, log in _plan(patches, first, again)]
        assert got == expected
        assert _history(target) == _history(reference)
        assert state(target) == state(reference)
    finally:
        target.close()


case = st.tuples(logs(), st.integers(0, 3), st.one_of(st.none(), st.integers(0, 6)), knobs)


def _case(patches: list[str], first: int, again: int | None) -> tuple[int, int | None]:
    return min(first, len(patches)), (None if again is None or again >= len(patches) else again)


_files = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case)
def test_sqlite_groups_match_the_reference(
    tmp_path: Path, c: tuple[list[str], int, int | None, dict[str, int]]
) -> None:
    patches, first, again, kw = c
    first, again = _case(patches, first, again)
    _differential(lambda: SqlTarget(f"sqlite:///{tmp_path / f'g{next(_files)}.db'}"), patches, first, again, kw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case)
def test_postgresql_groups_match_the_reference(
    pg_url: str, c: tuple[list[str], int, int | None, dict[str, int]]
) -> None:
    patches, first, again, kw = c
    first, again = _case(patches, first, again)
    with SqlTarget(pg_url) as t, t.engine.begin() as conn:
        # A clean store per example; the term dictionary stays (it only grows), so later
        # examples also meet terms the database knows and the cache does not.
        for table in ("ps_quads", "ps_patches", "ps_sources", "ps_namespaces"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    _differential(lambda: SqlTarget(pg_url), patches, first, again, kw)


# -- settle: the replay against presence, by itself ------------------------------------------


def _ops(rows: list[tuple[str, int]]) -> dict[Any, int]:
    ops: dict[Any, int] = {}
    for op, quad in rows:
        seq = ops.get(quad)
        ops[quad] = (3 if op == "A" else 2) if seq is None else (seq << 1) | (op == "A")
    return ops


@given(
    st.sets(st.integers(0, 5)),
    st.lists(st.lists(st.tuples(st.sampled_from("AD"), st.integers(0, 5)), max_size=8), max_size=5),
    st.booleans(),
)
def test_settle_counts_like_rows_applied_one_at_a_time(
    initial: set[int], units: list[list[tuple[str, int]]], lone: bool
) -> None:
    held = [HeldUnit(_ops(rows), Checkpoint(0, 0, 0), True, False, None) for rows in units]
    asked: list[list[Any]] = []

    def present(quads: list[Any]) -> list[bool]:
        asked.append(quads)
        return [q in initial for q in quads]

    settled = settle(held, present, lone=lone)
    # The target's add_each / delete_each, as a store holding ``initial`` would answer.
    store = set(initial) - set(settled.deletes) | set(settled.adds)
    deleted = [q in store for q in settled.lone_deletes]
    store -= set(settled.lone_deletes)
    added = [q not in store for q in settled.lone_adds]
    store |= set(settled.lone_adds)
    settled.deleted(deleted)
    settled.added(added)
    live = set(initial)
    expected = []
    touches: dict[int, int] = {}
    for rows in units:
        a = d = n = 0
        for op, quad in rows:
            touches[quad] = touches.get(quad, 0) + 1
            if op == "A":
                a, n = (a, n + 1) if quad in live else (a + 1, n)
                live.add(quad)
            else:
                d, n = (d + 1, n) if quad in live else (d, n + 1)
                live.discard(quad)
        expected.append((a, d, n))
    assert settled.unit_counts() == expected
    assert store == live
    assert len(asked) <= 1  # one bulk lookup per group
    looked_up = set(asked[0]) if asked else set()
    if lone:
        # Only quads touched more than once in the group are looked up; the others are written.
        assert looked_up == {q for q, n in touches.items() if n > 1}
        assert not set(settled.lone_adds) & looked_up and not set(settled.lone_deletes) & looked_up
    else:
        assert looked_up == set(touches) and not settled.lone_adds and not settled.lone_deletes


def test_group_bounds_and_held_ids() -> None:
    group = CommitGroup(rows=3, units=10)
    cp = Checkpoint(0, 0, 0)
    assert not group.hold(HeldUnit({("s", "p", "o", None): 3}, cp, True, False, None))
    assert group.hold(HeldUnit({("s", "p", f"o{i}", None): 3 for i in range(2)}, cp, True, False, None))
    assert len(group.take()) == 2 and len(group) == 0 and group.rows == 0


# -- what the target sees ---------------------------------------------------------------------


def _trace(target: SqlTarget) -> list[str]:
    """SQLite: every statement the target's connection runs from now on."""
    seen: list[str] = []
    driver: Any = target._conn.connection.driver_connection
    driver.set_trace_callback(seen.append)
    return seen


def _units(n: int) -> str:
    s, p = iri("s"), iri("p")
    return "".join(f"TX .\nA {s} {p} {iri(f'o{u}')} .\nD {s} {p} {iri(f'o{u - 1}')} .\nTC .\n" for u in range(n))


def test_held_units_reach_the_target_as_one_write_per_group(sqlite_url: str) -> None:
    with SqlTarget(sqlite_url) as t:
        seen = _trace(t)
        r = _apply(t, _units(50), "log", group_units=25)
        inserts = [s for s in seen if re.match(r"INSERT (OR \w+ )?INTO ps_quads", s)]
        deletes = [s for s in seen if s.startswith("DELETE FROM ps_quads")]
        # Two groups: within each, o(u) added then deleted by the next unit never reaches the table.
        assert len(inserts) == 2 and len(deletes) == 1
        assert not [s for s in seen if s.startswith("SAVEPOINT")]
        assert (r.units, r.added, r.deleted, r.noop) == (50, 50, 49, 1)
        assert state(t)[0] == {(iri("s"), iri("p"), iri("o49"), "")}


def test_a_redelivered_patch_still_held_is_skipped(sql_url: str) -> None:
    s, p = iri("s"), iri("p")
    one = f"H id <urn:1> .\nA {s} {p} {iri('a')} .\nZ .\n"
    two = f"H id <urn:2> .\nH prev <urn:1> .\nD {s} {p} {iri('a')} .\nZ .\n"
    with SqlTarget(sql_url) as t:
        # urn:1 comes again while it and urn:2 are both held: skipped, not a chain error.
        r = _apply(t, one + two + one, "log")
        assert (r.patches, r.skipped, r.added, r.deleted) == (2, 1, 1, 1)
        assert [h.patch_id for h in t.history()] == ["urn:1", "urn:2"]
        assert state(t)[0] == frozenset()


def test_pause_writes_held_units_while_a_unit_is_open(sql_url: str) -> None:
    s, p = iri("s"), iri("p")
    a, b = (s, p, iri("a"), None), (s, p, iri("b"), None)
    with SqlTarget(sql_url) as t:
        applier = Applier(t, source="log")
        reader: RdfPatchTextReader[Any] = RdfPatchTextReader(t.adapter)
        reader.feed(f"TX .\nA {s} {p} {iri('a')} .\nTC .\nTX .\nA {s} {p} {iri('b')} .\n".encode())
        applier.feed(list(reader))
        assert applier.pause() is False  # a unit is open: the target is not flushed...
        assert applier._groups is not None and len(applier._groups.group) == 0  # ...but nothing complete is held
        assert applier.result.units == 1 and t.contains([a, b]) == [True, False]
        reader.feed(b"TC .\n")
        applier.feed(list(reader))
        assert applier.pause() is True
        assert applier.result.units == 2 and t.contains([a, b]) == [True, True]
        assert t.checkpoint("log") is not None


def test_a_term_added_by_another_applier_after_the_lookup_is_reused(pg_url: str) -> None:
    # The group's presence lookup finds the term absent; another writer stores it before
    # the group's adds: the plain insert fails on the unique index, insert-or-ignore follows.
    # Appliers of one target take turns under its write lock (docs/design.md §3), so the other
    # writer here is a plain connection, as a writer that does not take the lock would be.
    from sqlalchemy import create_engine, text

    from patchsync.apply.targets.sql.schema import term_hash

    quad = (iri("s"), iri("p"), '"late"', None)
    with SqlTarget(pg_url) as t:
        t.begin()
        assert t.contains([quad]) == [False]
        assert '"late"' in t.terms._absent
        engine = create_engine(pg_url)
        try:
            with engine.begin() as conn:
                stored = conn.execute(
                    text("INSERT INTO ps_terms (h, term) VALUES (:h, :t) RETURNING id"),
                    {"h": term_hash('"late"'), "t": '"late"'},
                ).scalar()
        finally:
            engine.dispose()
        assert t.add([quad]) == 1
        t.commit("log", Checkpoint(0, 0, 0), [])
        t.flush()
        assert t.terms.cache.ids['"late"'] == stored
        assert t.contains([quad]) == [True]


def test_presence_lookup_answers_each_quad_as_stored(sql_url: str) -> None:
    # The commit group's presence lookup (settle's ``present``): present and absent quads
    # interleaved, in batches of several sizes, repeated quads and quads with a term the
    # database lacks, each answered as stored.
    stored = [(iri(f"s{i}"), iri("p"), f'"{i}"', iri("g") if i % 3 else None) for i in range(0, 300, 2)]
    absent = [(iri(f"s{i}"), iri("p"), f'"{i}"', None) for i in range(1, 300, 2)]  # known terms, not stored
    unknown = [(iri("never"), iri("p"), '"x"', None)]
    with SqlTarget(sql_url) as t:
        t.begin()
        t.add(stored)
        t.commit("log", Checkpoint(0, 0, 0), [])
        t.flush()
        mixed = [q for pair in zip(stored, absent, strict=True) for q in pair]
        for count in (1, 2, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129, 300):
            quads = mixed[:count]
            assert t.contains(quads) == [q in stored for q in quads], count
        repeated = [stored[0], absent[0], stored[0], *unknown, stored[1]]
        assert t.contains(repeated) == [True, False, True, False, True]
        assert t.contains([]) == []


def test_writes_tell_which_quads_changed_the_table(sql_url: str) -> None:
    # add_each / delete_each (the lone quads of a group): stored, absent with stored terms,
    # with a term stored by this very call, and with a term the database never saw.
    stored = [(iri(f"s{i}"), iri("p"), f'"{i}"', iri("g") if i % 2 else None) for i in range(6)]
    known = [(iri(f"s{i}"), iri("p"), f'"{i + 1}"', None) for i in range(5)]  # stored terms, not stored
    fresh = [(iri("s0"), iri("p"), f'"new{i}"', None) for i in range(3)]
    never = [(iri("never"), iri("p"), '"x"', None)]
    with SqlTarget(sql_url) as t:
        t.begin()
        assert t.add_each(stored) == [True] * len(stored)
        t.commit("log", Checkpoint(0, 0, 0), [])
        t.flush()
        t.begin()
        quads = [stored[0], known[0], fresh[0], stored[3], known[4], fresh[1], stored[5]]
        assert t.add_each(quads) == [False, True, True, False, True, True, False]
        assert t.add_each([fresh[2], stored[1]]) == [True, False]
        gone = [stored[2], never[0], known[1], stored[4], fresh[0]]
        assert t.delete_each(gone) == [True, False, False, True, True]
        assert t.delete_each(never) == [False]
        assert t.delete_each([]) == [] and t.add_each([]) == []
        t.commit("log", Checkpoint(1, 0, 0), [])
        t.flush()
        expected = {stored[i] for i in (0, 1, 3, 5)} | {known[0], known[4], fresh[1], fresh[2]}
        assert t.contains([*stored, *known, *fresh, *never]) == [
            q in expected for q in [*stored, *known, *fresh, *never]
        ]


def test_long_batches_trust_the_row_count_when_every_quad_changed_the_table(pg_url: str) -> None:
    # PostgreSQL, batches of at least _EACH_AT_ONCE lone quads: written without RETURNING
    # inside a savepoint, and trusted when the count says every quad changed the table;
    # otherwise undone and written again returning what changed.
    quads = [(iri(f"s{i}"), iri("p"), f'"{i}"', iri("g") if i % 3 else None) for i in range(24)]
    never = (iri("never"), iri("p"), '"x"', None)
    with SqlTarget(pg_url) as t:
        t.begin()
        cursor = t.link.cur = RecordingCursor(t.link.cur)
        assert t.add_each(quads[:12]) == [True] * 12  # every one new: the count tells
        assert "INSERT RETURNING" not in cursor.seen and "ROLLBACK" not in cursor.seen
        assert t.add_each(quads[6:]) == [False] * 6 + [True] * 12  # six present: undone, returned
        assert cursor.seen.count("ROLLBACK") == 1 and "INSERT RETURNING" in cursor.seen
        # After a batch that paid for both writes, adds go straight to RETURNING until
        # _EACH_TRUST batches in a row changed the table with every quad.
        more = [(iri(f"m{i}"), iri("p"), f'"{i}"', None) for i in range(8 * _EACH_TRUST)]
        for n in range(_EACH_TRUST):
            cursor.seen.clear()
            assert t.add_each(more[8 * n : 8 * n + 8]) == [True] * 8
            assert cursor.seen == ["INSERT RETURNING"]
        cursor.seen.clear()
        assert t.add_each([(iri("last"), iri("p"), f'"{i}"', None) for i in range(8)]) == [True] * 8
        assert cursor.seen == ["SAVEPOINT", "INSERT", "RELEASE"]
        cursor.seen.clear()
        assert t.delete_each(quads[:10]) == [True] * 10
        assert "DELETE RETURNING" not in cursor.seen and "ROLLBACK" not in cursor.seen
        assert t.delete_each([*quads[5:15], never]) == [False] * 5 + [True] * 5 + [False]
        assert cursor.seen.count("ROLLBACK") == 1 and "DELETE RETURNING" in cursor.seen
        t.commit("log", Checkpoint(0, 0, 0), [])
        t.flush()
        assert t.contains([*quads, never]) == [i >= 15 for i in range(24)] + [False]
        assert t.contains(more) == [True] * len(more)


def test_a_group_looks_up_only_quads_touched_twice(sqlite_url: str) -> None:
    # Quads one unit touches once are written as they are (their writes tell what changed);
    # only o1, deleted by one unit of the group and added back by the next, is looked up.
    s, p = iri("s"), iri("p")
    first = f"H id <urn:1> .\nTX .\nA {s} {p} {iri('o0')} .\nA {s} {p} {iri('o1')} .\nTC .\nZ .\n"
    second = (
        f"H id <urn:2> .\nH prev <urn:1> .\nTX .\nD {s} {p} {iri('o1')} .\nD {s} {p} {iri('o9')} .\n"
        f"A {s} {p} {iri('o0')} .\nTC .\nTX .\nA {s} {p} {iri('o1')} .\nA {s} {p} {iri('o2')} .\nTC .\nZ .\n"
    )
    with SqlTarget(sqlite_url) as t:
        _apply(t, first, "log")
        seen = _trace(t)
        r = _apply(t, first + second, "log")
        probes = [q for q in seen if q.startswith("SELECT 1 FROM ps_quads")]
        ids = t.terms.cache.ids
        key = f"s = {ids[s]} AND p = {ids[p]} AND o = {ids[iri('o1')]} AND g = {ids['']}"
        assert probes == [f"SELECT 1 FROM ps_quads WHERE {key}"]
        assert (r.units, r.added, r.deleted, r.noop) == (2, 2, 1, 2)
        assert [(h.added, h.deleted, h.noop) for h in t.history()] == [(2, 0, 0), (2, 1, 2)]
        assert state(t)[0] == {(s, p, iri(o), "") for o in ("o0", "o1", "o2")}


class GroupingMemoryTarget(MemoryTarget):
    """The reference target declaring every optional write ability of patchsync.apply.target,
    each written the plainest way: the applier then holds commit groups, writes lone quads
    with ``add_each``/``delete_each``, leaves adds "running" and batches prefix rows."""

    capabilities = MemoryTarget.capabilities | {CAN_LAST_WRITES, CAN_WRITE_EACH, CAN_WRITE_LATER, CAN_WRITE_PREFIXES}

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def last_writes(self) -> None:
        self.calls["last_writes"] += 1

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        self.calls["add_each"] += 1
        return [self.add([q]) == 1 for q in quads]

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        self.calls["delete_each"] += 1
        return [self.delete([q]) == 1 for q in quads]

    def add_each_later(self, quads: Sequence[Quad]) -> Callable[[], list[bool]]:
        self.calls["add_each_later"] += 1
        added = self.add_each(quads)
        return lambda: added

    def write_prefixes(self, ops: Sequence[PrefixOp]) -> None:
        self.calls["write_prefixes"] += 1
        for bind, graph, name, value in ops:
            if bind:
                self.add_prefix(graph, name, value)
            else:
                self.delete_prefix(graph, name)


@settings(max_examples=60, deadline=None)
@given(case)
def test_every_optional_ability_on_the_reference_target_matches_it(
    c: tuple[list[str], int, int | None, dict[str, int]],
) -> None:
    # Differential: the abilities (patchsync.apply.target's protocols) change speed, never
    # what the store holds nor any count; here they wrap the reference's own writes.
    patches, first, again, kw = c
    first, again = _case(patches, first, again)
    _differential(GroupingMemoryTarget, patches, first, again, kw)


def test_the_abilities_are_seen_once_and_used() -> None:
    target = GroupingMemoryTarget()
    applier = Applier(target, source="log")
    assert applier._groups is not None  # contains + last_writes: commit groups
    text = f"TX .\nA {iri('s')} {iri('p')} {iri('o')} .\nPA ex {iri('ns/')} .\nTC .\n"
    result = applier.apply(read_rdfp(text, target.adapter))
    assert (result.units, result.added) == (1, 1)
    assert {"last_writes", "add_each", "add_each_later", "write_prefixes"} <= set(target.calls)
    assert Applier(MemoryTarget(), source="log")._groups is None  # contains alone: units one by one


class _Boasting(MemoryTarget):
    capabilities = MemoryTarget.capabilities | {CAN_LAST_WRITES, CAN_WRITE_EACH}

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        return [self.add([q]) == 1 for q in quads]


def test_a_declared_ability_without_its_methods_is_refused_when_the_applier_is_built() -> None:
    with pytest.raises(
        UsageError, match=r"^_Boasting targets declare the 'last_writes' capability but lack last_writes\(\)"
    ):
        Applier(_Boasting(), source="log")
    with pytest.raises(UsageError, match=r"'write_each' capability but lack delete_each\(\)"):
        abilities_of(type("Half", (_Boasting,), {"last_writes": lambda self: None})())
