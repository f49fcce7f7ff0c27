"""How the applier writes a commit group (:mod:`patchsync.apply.group`) to its target.

A group is written as one target unit: ``begin``, the head checked again under the
target's lock (strict chains), the presence lookup and replay (:func:`.group.settle`), the
prefix rows, the net deletes and adds, then the counts, patch records and ``commit``.
Where the target can leave a write running (``write_later``, PostgreSQL), a full group's
lone adds are the last write and are left running: the group is finished (counts, records,
commit) when the next group is written or anything else needs the target, so the server
inserts one group while the client decodes the next. Until then the group's
units are neither held nor committed; every path that reads the target's state or writes
to it first finishes it (:meth:`GroupWrites._land`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

from patchsync.apply.chain import ChainChecks
from patchsync.apply.group import HeldUnit, Settlement, settle
from patchsync.apply.target import PatchRecord, PrefixOp
from patchsync.errors import ChainError


class GroupWrites(ChainChecks):
    """Commit-group writes of :class:`~patchsync.apply.applier.Applier` (a mixin: its state is the applier's)."""

    _write_each: bool
    _write_later: bool
    _write_prefixes_at_once: bool
    _landing: Callable[[], None] | None
    _p_added: int
    _p_deleted: int
    _p_noop: int

    def _mark_unit(self) -> None:
        raise NotImplementedError

    def _write_group(self, *, wait: bool = True) -> None:
        """Write the held units as one target unit (see patchsync.apply.group).

        Without ``wait``, where the target can (``write_later``), the group's last write is
        left running and the group is finished (counts, records, commit) by :meth:`_land`,
        when the next group is written or anything else needs the target: the client
        decodes the next group while the server writes this one.
        """
        self._land()
        if self._group is None or not self._group.units:
            return
        base = self._group.base
        units = self._group.take()
        target = cast(Any, self.target)  # a group's target has contains and last_writes
        target.begin()
        self._unit_open = True  # an error from here on rolls the target back (_fail)
        error: ChainError | None = None
        if self.strict:
            head = target.head()  # read where no other applier can move it until the commit
            if head != base:
                units, error = self._redecide(units, head)
                if not units:
                    assert error is not None
                    raise error
        target.last_writes()
        settled = settle(units, target.contains, lone=self._write_each)
        # The prefix rows first: they commute with the quads, and the adds may be left running.
        self._write_prefixes([op for unit in units for op in unit.prefixes])
        if settled.deletes:  # the four writes are on distinct quads: any order
            target.delete(settled.deletes)
        if settled.lone_deletes:
            settled.deleted(target.delete_each(settled.lone_deletes))
        if settled.adds:
            target.add(settled.adds)
        answer: Callable[[], list[bool]] | None = None
        if settled.lone_adds:
            if self._write_later:
                answer = target.add_each_later(settled.lone_adds)
            else:
                settled.added(target.add_each(settled.lone_adds))

        def finish() -> None:
            if answer is not None:
                settled.added(answer())
            self._finish_group(units, settled, error)

        if wait or answer is None or error is not None:
            finish()
        else:
            self._unit_open = False  # until _land: the units held from here are a new group
            self._landing = finish

    def _land(self) -> None:
        """Finish the group whose last write was left running (see :meth:`_write_group`)."""
        landing, self._landing = self._landing, None
        if landing is not None:
            self._unit_open = True  # the group's target unit, open until it commits
            landing()

    def _finish_group(self, units: list[HeldUnit], settled: Settlement, error: ChainError | None) -> None:
        """The written group's counts and patch records, and its commit; then ``error``."""
        target = cast(Any, self.target)
        records: list[PatchRecord] = []
        result = self.result
        for unit, (added, deleted, noop) in zip(units, settled.unit_counts(), strict=True):
            self._p_added += added
            self._p_deleted += deleted
            self._p_noop += noop
            if unit.unit:
                result.units += 1
                result.added += added
                result.deleted += deleted
                result.noop += noop
            if unit.ends_patch:
                if unit.record is not None:
                    records.append(
                        replace(unit.record, added=self._p_added, deleted=self._p_deleted, noop=self._p_noop)
                    )
                self._p_added = self._p_deleted = self._p_noop = 0
        target.commit(self.source, units[-1].checkpoint, records)
        self._unit_open = False
        self._mark_unit()
        if error is not None:
            raise error

    def _write_prefixes(self, ops: list[PrefixOp]) -> None:
        """The prefix rows of a group's units, in log order; they commute with its quads."""
        if not ops:
            return
        target = cast(Any, self.target)
        if self._write_prefixes_at_once:
            target.write_prefixes(ops)
            return
        for bind, graph, name, iri in ops:
            if bind:
                target.add_prefix(graph, name, iri)
            else:
                target.delete_prefix(graph, name)


__all__ = ["GroupWrites"]
