"""Commit groups: complete units the applier holds back and writes together.

For a target that answers presence in bulk (``contains``) and takes an announcement of a
unit's last writes (``last_writes``), the SQL target, the applier does not send each unit
at its commit. It holds the complete unit (its rows per quad, its checkpoint and patch
record) in a :class:`CommitGroup`, and writes the group when it is full or must not wait:

1. one ``contains`` for every quad the held units touch more than once (two units, or
   one unit twice): their presence before the group;
2. the held units replayed in log order against that presence (:func:`settle`): the exact
   added / deleted / no-op counts of each unit, as if applied one row at a time (set
   semantics, docs/design.md §5), and the quads whose presence the group changes;
3. one ``delete`` and one ``add`` of that net change; the quads touched once (most of
   them) written as they are, by ``delete_each`` and ``add_each``, whose answers (which
   quads changed the store) correct the counts of their units; then one ``commit`` with
   the last unit's checkpoint and every patch record of the group.

A target without ``add_each``/``delete_each`` (no ``write_each`` capability) gets every
touched quad looked up in step 1 instead.

The target sees the group as one unit whose rows all come with its commit, so it sets no
savepoint for it, and its checkpoint is the last held unit's: a crash loses whole groups
and the checkpoint still names exactly what the store holds (docs/design.md §2, §3).
A held unit carries its prefix rows too; the group hands them over in log order with its
quads, in one call (``write_prefixes``) where the target takes them so. Aborted units never
reach the group, nor do their prefix rows. Which events force a write (a unit that must
send rows before its end, a pause of the input, errors, the end of an apply) is the
applier's business; this module only holds and settles.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from patchsync.apply.target import Checkpoint, PatchRecord, PrefixBatches, PrefixOp, Presence, Quad, Target

#: Held rows (distinct quads per unit, summed) that make the applier write its group. Larger
#: groups save PostgreSQL little more, and the rows held alive make Python's cyclic GC run
#: more often (``python -m bench.apply_workload`` shows the trade-off).
DEFAULT_GROUP_ROWS = 5_000
#: Held units (and record-only steps) that make the applier write its group.
DEFAULT_GROUP_UNITS = 2_000

#: ``(added, deleted, noop)`` rows of one unit.
Counts = tuple[int, int, int]


@dataclass(slots=True, eq=False)
class Decision:
    """The strict chain policy's decision on one patch: apply it, or skip it as applied.

    Made when the patch's first change arrives, against the head the applier expects the
    target to have; a group's write checks that head under the target's lock and, if
    another applier moved the target, decides again (``skip`` may turn true, never back).
    Every unit of the patch refers to the same object. ``offset`` is where the patch's
    first change is, for messages.
    """

    patch_id: str
    prev: str | None
    offset: int
    skip: bool = False


@dataclass(slots=True)
class HeldUnit:
    """One complete unit (or a record-only step at a patch end) waiting in a group.

    ``ops`` maps each quad the unit touches to its operations in order, as bits after a
    leading 1 (add = 1, delete = 0), the applier's own encoding. ``record`` is the patch
    record of a patch the step ends, its counts filled in when the group is written.
    ``unit`` is False for a step that only moves the checkpoint (no unit was open).
    ``decision`` is the chain decision on the unit's patch (none without the strict
    policy or a patch id). ``prefixes`` are the unit's prefix rows in order.
    """

    ops: dict[Quad, int]
    checkpoint: Checkpoint
    unit: bool
    ends_patch: bool
    record: PatchRecord | None
    decision: Decision | None = None
    prefixes: list[PrefixOp] = field(default_factory=list)


def replay(seq: int, present: bool) -> tuple[int, int, int, bool]:
    """One quad's operations ``seq`` (bits after a leading 1, add = 1, delete = 0) applied in
    order to a target where the quad is ``present`` or not: ``(added, deleted, noop, present
    after)``, as applying them one row at a time under set semantics (docs/design.md §5)."""
    added = deleted = noop = 0
    for bit in bin(seq)[3:]:
        if (bit == "1") is present:
            noop += 1
        elif present:
            deleted += 1
            present = False
        else:
            added += 1
            present = True
    return added, deleted, noop, present


def write_rows(target: Target, ops: dict[Quad, int], presence: Presence | None = None) -> Counts:
    """Send one unit's pending rows ``ops`` (quad -> operations, as in :class:`HeldUnit`) to
    ``target``: deletes, then adds, in bulk (rows on distinct quads commute); the counts.

    A quad touched more than once is resolved on its own: deleting it tells whether it was
    present (or, where the target tells presence in bulk, ``presence``, one lookup for all
    such quads), which fixes how many of its operations changed the target; it is added
    back if its last operation was an add.
    """
    added = deleted = noop = 0
    adds: list[Quad] = []
    deletes: list[Quad] = []
    multi: list[tuple[Quad, int]] = []
    for quad, seq in ops.items():
        if seq == 3:
            adds.append(quad)
        elif seq == 2:
            deletes.append(quad)
        else:
            multi.append((quad, seq))
    if deletes:
        changed = target.delete(deletes)
        deleted += changed
        noop += len(deletes) - changed
    if adds:
        changed = target.add(adds)
        added += changed
        noop += len(adds) - changed
    if not multi:
        return added, deleted, noop
    initial = presence.contains([q for q, _ in multi]) if presence is not None else None
    final_add: list[Quad] = []
    final_delete: list[Quad] = []
    for index, (quad, seq) in enumerate(multi):
        was = target.delete([quad]) == 1 if initial is None else initial[index]
        a, d, n, present = replay(seq, was)
        added += a
        deleted += d
        noop += n
        if present:
            final_add.append(quad)
        elif initial is not None:
            final_delete.append(quad)
    if final_delete:
        target.delete(final_delete)
    if final_add:
        target.add(final_add)
    return added, deleted, noop


def write_prefixes(target: Target, batches: PrefixBatches | None, ops: list[PrefixOp]) -> None:
    """Send held prefix rows ``ops`` in log order: in one call where the target takes
    them so (``batches``), else one ``add_prefix``/``delete_prefix`` each."""
    if not ops:
        return
    if batches is not None:
        batches.write_prefixes(ops)
        return
    for bind, graph, name, iri in ops:
        if bind:
            target.add_prefix(graph, name, iri)
        else:
            target.delete_prefix(graph, name)


@dataclass(slots=True)
class Settlement:
    """What :func:`settle` found for a group: each unit's counts and the writes that realise it.

    ``deletes`` and ``adds`` are the net change of the quads whose presence was looked up.
    ``lone_adds`` and ``lone_deletes`` (only with ``settle(..., lone=True)``) are quads one
    unit of the group touches once, unit after unit: their counts assume the write changes
    the target, and :meth:`added` / :meth:`deleted` correct them from what the target
    reports it changed.
    """

    counts: list[list[int]]
    deletes: list[Quad]
    adds: list[Quad]
    lone_adds: list[Quad] = field(default_factory=list)
    lone_deletes: list[Quad] = field(default_factory=list)
    # How many lone adds (deletes) the units up to each one hold: where each unit's end.
    add_ends: list[int] = field(default_factory=list)
    delete_ends: list[int] = field(default_factory=list)

    def added(self, changed: Sequence[bool]) -> None:
        """Whether each of ``lone_adds`` was added: one that was already present is a no-op."""
        self._correct(self.add_ends, changed, 0)

    def deleted(self, changed: Sequence[bool]) -> None:
        """Whether each of ``lone_deletes`` was deleted: one that was absent is a no-op."""
        self._correct(self.delete_ends, changed, 1)

    def _correct(self, ends: list[int], changed: Sequence[bool], column: int) -> None:
        if all(changed):  # the usual case
            return
        counts = self.counts
        for i, did in enumerate(changed):
            if not did:
                unit = counts[bisect.bisect_right(ends, i)]
                unit[column] -= 1
                unit[2] += 1

    def unit_counts(self) -> list[Counts]:
        """``(added, deleted, noop)`` of each unit, in order."""
        return [(a, d, n) for a, d, n in self.counts]


def settle(units: Sequence[HeldUnit], present: Callable[[list[Quad]], list[bool]], *, lone: bool = False) -> Settlement:
    """Each unit's counts and the group's net change.

    ``present`` answers, for a list of quads, whether each is in the target before the
    group (one bulk lookup). Its deletes are the quads present before and absent after the
    group, its adds the reverse; the others end as they began and need no write. With
    ``lone``, quads that one unit touches once (one add or one delete in the whole group)
    are not looked up: they are written as they are, and the write tells whether each
    changed the target (see :class:`Settlement`). Most quads of a group are such.
    """
    # Every row of the group passes here: set operations on the units' dicts, not a loop.
    touched: dict[Quad, int] = {}
    if lone:
        multi: set[Quad] = set()
        for unit in units:
            ops = unit.ops
            if touched:
                multi |= ops.keys() & touched.keys()
            touched.update(ops)
            if max(ops.values(), default=0) > 3:  # a quad this unit touches more than once
                multi.update(q for q, seq in ops.items() if seq > 3)
        quads = list(multi)
    else:
        for unit in units:
            touched.update(unit.ops)
        quads = list(touched)
    before = dict(zip(quads, present(quads), strict=True)) if quads else {}
    state = dict(before)
    result = Settlement([], [], [])
    lone_adds, add_ends = result.lone_adds, result.add_ends
    lone_deletes, delete_ends = result.lone_deletes, result.delete_ends
    for unit in units:
        ops = unit.ops
        added = deleted = noop = 0
        if lone and (not state or state.keys().isdisjoint(ops)):
            # No quad of this unit was looked up: all its quads are lone.
            adds = [q for q, seq in ops.items() if seq == 3]
            lone_adds += adds
            added = len(adds)
            if added < len(ops):
                lone_deletes += [q for q, seq in ops.items() if seq == 2]
                deleted = len(ops) - added
        else:
            for quad, seq in ops.items():
                was = state.get(quad)
                if was is None:  # lone: its write tells whether it changed the target
                    if seq == 3:
                        added += 1
                        lone_adds.append(quad)
                    else:
                        deleted += 1
                        lone_deletes.append(quad)
                elif seq == 3:  # one add
                    if was:
                        noop += 1
                    else:
                        added += 1
                        state[quad] = True
                elif seq == 2:  # one delete
                    if was:
                        deleted += 1
                        state[quad] = False
                    else:
                        noop += 1
                else:
                    a, d, n, state[quad] = replay(seq, was)
                    added += a
                    deleted += d
                    noop += n
        add_ends.append(len(lone_adds))
        delete_ends.append(len(lone_deletes))
        result.counts.append([added, deleted, noop])
    result.deletes = [q for q, now in state.items() if not now and before[q]]
    result.adds = [q for q, now in state.items() if now and not before[q]]
    return result


class CommitGroup:
    """The complete units the applier holds back (see the module docstring).

    Full when the held rows reach ``rows`` or the held steps ``units``. Keep both below the
    target's own group bounds so that a target transaction closes at a group's commit.
    """

    def __init__(self, *, rows: int = DEFAULT_GROUP_ROWS, units: int = DEFAULT_GROUP_UNITS) -> None:
        self.max_rows = max(1, rows)
        self.max_units = max(1, units)
        self.units: list[HeldUnit] = []
        self.rows = 0
        #: The head the applier expected the target to have when the first unit was held:
        #: the chain decisions on the held units assume it (see :class:`Decision`).
        self.base: str | None = None
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self.units)

    def hold(self, unit: HeldUnit) -> bool:
        """Hold ``unit``; returns whether the group is now full."""
        self.units.append(unit)
        self.rows += len(unit.ops) + len(unit.prefixes)
        if unit.record is not None and unit.record.patch_id is not None:
            self._ids.add(unit.record.patch_id)
        return self.rows >= self.max_rows or len(self.units) >= self.max_units

    def holds(self, patch_id: str) -> bool:
        """Whether a held step records the patch ``patch_id`` (the target does not know it yet)."""
        return patch_id in self._ids

    def take(self) -> list[HeldUnit]:
        """The held units, in log order; the group is empty afterwards."""
        units, self.units = self.units, []
        self.rows = 0
        self._ids.clear()
        return units


__all__ = [
    "DEFAULT_GROUP_ROWS",
    "DEFAULT_GROUP_UNITS",
    "CommitGroup",
    "Counts",
    "Decision",
    "HeldUnit",
    "Settlement",
    "replay",
    "settle",
    "write_prefixes",
    "write_rows",
]
