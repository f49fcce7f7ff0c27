"""How the applier writes a commit group (:mod:`patchsync.apply.group`) to its target.

A group is written as one target unit: ``begin``, the head checked again under the
target's lock (strict chains), the presence lookup and replay (:func:`.group.settle`), the
prefix rows, the net deletes and adds, then the counts, patch records and ``commit``.
Where the target can leave a write running (``write_later``, PostgreSQL), a full group's
lone adds are the last write and are left running: the group is finished (counts, records,
commit) when the next group is written or anything else needs the target, so the server
inserts one group while the client decodes the next. Until then the group's
units are neither held nor committed; every path that reads the target's state or writes
to it first finishes it (:meth:`GroupWrites.land`).

:class:`GroupWrites` is a part of the applier with its own state (the group, the write
left running); it exists only for a target that takes commit groups
(:class:`~patchsync.apply.target.GroupTarget`), and holds the target's optional writes as
typed views checked when the applier was built (:class:`~patchsync.apply.target.Abilities`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from patchsync.apply.chain import ChainChecks
from patchsync.apply.group import CommitGroup, HeldUnit, Settlement, settle, write_prefixes
from patchsync.apply.target import Abilities, GroupTarget, PatchRecord
from patchsync.apply.unit_state import Tally, TargetUnit
from patchsync.errors import ChainError


class GroupWrites:
    """The commit group of an applier and how it is written (see the module docstring); a part it holds."""

    __slots__ = ("_batches", "_each", "_landing", "_later", "chain", "group", "source", "tally", "target", "unit")

    def __init__(
        self,
        target: GroupTarget,
        abilities: Abilities,
        unit: TargetUnit,
        chain: ChainChecks,
        tally: Tally,
        *,
        source: str,
        rows: int,
        units: int,
    ) -> None:
        self.target = target
        self.unit = unit
        self.chain = chain
        self.tally = tally
        self.source = source
        self.group = CommitGroup(rows=rows, units=units)
        # Quads touched once are written without a lookup where the writes tell what changed,
        # and a full group's adds may be left running while the next group is decoded.
        self._each = abilities.writes_each
        self._later = abilities.writes_later
        self._batches = abilities.prefix_batches
        # Finishes the group whose adds were left running (see write, land).
        self._landing: Callable[[], None] | None = None

    def holds(self, patch_id: str) -> bool:
        """Whether a held unit records the patch ``patch_id``."""
        return self.group.holds(patch_id)

    def hold(self, unit: HeldUnit, base: str | None) -> None:
        """Hold a complete unit, decided on the expected head ``base``; write the group (its
        adds perhaps left running) once it is full."""
        group = self.group
        if not group.units:
            group.base = base
        if group.hold(unit):
            self.write(wait=False)

    def write(self, *, wait: bool = True) -> None:
        """Write the held units as one target unit (see patchsync.apply.group).

        Without ``wait``, where the target can (``write_later``), the group's last write is
        left running and the group is finished (counts, records, commit) by :meth:`land`,
        when the next group is written or anything else needs the target: the client
        decodes the next group while the server writes this one.
        """
        self.land()
        if not self.group.units:
            return
        base = self.group.base
        units = self.group.take()
        target = self.target
        self.unit.begin()  # an error from here on rolls the target back (the applier's error path)
        error: ChainError | None = None
        if self.chain.strict:
            head = target.head()  # read where no other applier can move it until the commit
            if head != base:
                units, error, moved = self.chain.redecide(units, head)
                result = self.tally.result
                result.patches -= moved
                result.skipped += moved
                if not units:
                    assert error is not None
                    raise error
        target.last_writes()
        each = self._each
        settled = settle(units, target.contains, lone=each is not None)
        # The prefix rows first: they commute with the quads, and the adds may be left running.
        write_prefixes(target, self._batches, [op for unit in units for op in unit.prefixes])
        if settled.deletes:  # the four writes are on distinct quads: any order
            target.delete(settled.deletes)
        if settled.lone_deletes:
            assert each is not None  # lone quads are found only with write_each
            settled.deleted(each.delete_each(settled.lone_deletes))
        if settled.adds:
            target.add(settled.adds)
        answer: Callable[[], list[bool]] | None = None
        if settled.lone_adds:
            assert each is not None
            if self._later is not None:
                answer = self._later.add_each_later(settled.lone_adds)
            else:
                settled.added(each.add_each(settled.lone_adds))

        def finish() -> None:
            if answer is not None:
                settled.added(answer())
            self._finish(units, settled, error)

        if wait or answer is None or error is not None:
            finish()
        else:
            self.unit.open = False  # until land: the units held from here are a new group
            self._landing = finish

    def land(self) -> None:
        """Finish the group whose last write was left running (see :meth:`write`)."""
        landing, self._landing = self._landing, None
        if landing is not None:
            self.unit.open = True  # the group's target unit, open until it commits
            landing()

    def _finish(self, units: list[HeldUnit], settled: Settlement, error: ChainError | None) -> None:
        """The written group's counts and patch records, and its commit; then ``error``."""
        records: list[PatchRecord] = []
        tally = self.tally
        result = tally.result
        for unit, (added, deleted, noop) in zip(units, settled.unit_counts(), strict=True):
            tally.add(added, deleted, noop)
            if unit.unit:
                result.units += 1
                result.added += added
                result.deleted += deleted
                result.noop += noop
            if unit.ends_patch:
                counts = tally.patch_ended()
                if unit.record is not None:
                    records.append(replace(unit.record, added=counts[0], deleted=counts[1], noop=counts[2]))
        self.unit.commit(self.source, units[-1].checkpoint, records)
        tally.mark()
        if error is not None:
            raise error


__all__ = ["GroupWrites"]
