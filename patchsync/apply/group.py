"""Commit groups: complete units the applier holds back and writes together (issue #14).

For a target that answers presence in bulk (``contains``) and takes an announcement of a
unit's last writes (``last_writes``), the SQL target, the applier does not send each unit
at its commit. It holds the complete unit (its rows per quad, its checkpoint and patch
record) in a :class:`CommitGroup`, and writes the group when it is full or must not wait:

1. one ``contains`` for every quad the held units touch: their presence before the group;
2. the held units replayed in log order against that presence (:func:`settle`): the exact
   added / deleted / no-op counts of each unit, as if applied one row at a time (set
   semantics, docs/design.md §5), and the quads whose presence the group changes;
3. one ``delete`` and one ``add`` of that net change, then one ``commit`` with the last
   unit's checkpoint and every patch record of the group.

The target sees the group as one unit whose rows all come with its commit, so it sets no
savepoint for it, and its checkpoint is the last held unit's: a crash loses whole groups
and the checkpoint still names exactly what the store holds (docs/design.md §2, §3).
Aborted units never reach the group. Which events force a write (a unit that must send
rows before its end, prefix rows, a pause of the input, errors, the end of an apply) is
the applier's business; this module only holds and settles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from patchsync.apply.target import Checkpoint, PatchRecord, Quad

#: Held rows (distinct quads per unit, summed) that make the applier write its group. Larger
#: groups save PostgreSQL little more, and the rows held alive make Python's cyclic GC run
#: more often (measured: 0.3 s of 2.7 on the SQLite workload at 20,000).
DEFAULT_GROUP_ROWS = 5_000
#: Held units (and record-only steps) that make the applier write its group.
DEFAULT_GROUP_UNITS = 2_000

#: ``(added, deleted, noop)`` rows of one unit.
Counts = tuple[int, int, int]


@dataclass(slots=True)
class HeldUnit:
    """One complete unit (or a record-only step at a patch end) waiting in a group.

    ``ops`` maps each quad the unit touches to its operations in order, as bits after a
    leading 1 (add = 1, delete = 0), the applier's own encoding. ``record`` is the patch
    record of a patch the step ends, its counts filled in when the group is written.
    ``unit`` is False for a step that only moves the checkpoint (no unit was open).
    """

    ops: dict[Quad, int]
    checkpoint: Checkpoint
    unit: bool
    ends_patch: bool
    record: PatchRecord | None


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


def settle(
    units: Sequence[HeldUnit], present: Callable[[list[Quad]], list[bool]]
) -> tuple[list[Counts], list[Quad], list[Quad]]:
    """Each unit's counts and the group's net change: ``(counts, deletes, adds)``.

    ``present`` answers, for a list of quads, whether each is in the target before the
    group (one bulk lookup). ``deletes`` are the quads present before and absent after the
    group, ``adds`` the reverse; the others end as they began and need no write.
    """
    touched: dict[Quad, bool] = {}
    for unit in units:
        touched.update(dict.fromkeys(unit.ops, False))
    quads = list(touched)
    before = dict(zip(quads, present(quads), strict=True)) if quads else {}
    state = dict(before)
    counts: list[Counts] = []
    for unit in units:
        added = deleted = noop = 0
        for quad, seq in unit.ops.items():
            was = state[quad]
            if seq == 3:  # one add
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
        counts.append((added, deleted, noop))
    deletes = [q for q, now in state.items() if not now and before[q]]
    adds = [q for q, now in state.items() if now and not before[q]]
    return counts, deletes, adds


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
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self.units)

    def hold(self, unit: HeldUnit) -> bool:
        """Hold ``unit``; returns whether the group is now full."""
        self.units.append(unit)
        self.rows += len(unit.ops)
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


__all__ = ["DEFAULT_GROUP_ROWS", "DEFAULT_GROUP_UNITS", "CommitGroup", "Counts", "HeldUnit", "replay", "settle"]
