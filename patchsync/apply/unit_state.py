"""What the applier's parts share: the target's open unit and the running counts.

The applier (:mod:`patchsync.apply.applier`) is composed of parts, each with its own state:
the unit reader (:mod:`patchsync.units`), the chain checks (:mod:`patchsync.apply.chain`)
and, for targets that take commit groups, the group writes
(:mod:`patchsync.apply.group_writes`). Two things are written by more than one of them, so
each is one object here with the only methods that change it, and the parts hold it:

- :class:`TargetUnit`: whether a unit is open on the target (begun and not yet committed
  or rolled back). Any part may begin one (a chain check reads the head under the target's
  lock, a group is written as one unit); after an error the applier rolls back what is open.
- :class:`Tally`: the counts of the current patch (for its :class:`PatchRecord`) and the
  apply's :class:`ApplyResult`, which the applier adds to at a unit's commit and the group
  writes when a group's counts are known.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchsync.apply.result import ApplyResult
from patchsync.apply.target import Checkpoint, PatchRecord, Target


class TargetUnit:
    """The target's unit of work and whether it is open (see the module docstring)."""

    __slots__ = ("open", "target")

    def __init__(self, target: Target) -> None:
        self.target = target
        self.open = False

    def begin(self) -> None:
        """Begin a unit on the target."""
        self.target.begin()
        self.open = True

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        """Commit the open unit with ``source``'s checkpoint and the patch records it ends.

        If the target fails, the unit stays open, and the applier's error path rolls it back."""
        self.target.commit(source, checkpoint, records)
        self.open = False

    def rollback(self) -> None:
        """Undo the open unit; it is closed even if the target fails to (the error is raised)."""
        try:
            self.target.rollback()
        finally:
            self.open = False


class Tally:
    """The current patch's counts (added, deleted, no-op) and the apply's result.

    The patch's counts go into its :class:`PatchRecord` when it ends; the counts of the
    units before the open one are marked (:meth:`mark`) so an aborted unit's are taken back
    (:meth:`restore`) and a committed unit's are added to the result (:meth:`unit_committed`).
    """

    __slots__ = ("_marked", "added", "deleted", "noop", "result")

    def __init__(self, result: ApplyResult) -> None:
        self.result = result
        self.added = self.deleted = self.noop = 0
        self._marked = (0, 0, 0)

    def add(self, added: int, deleted: int, noop: int) -> None:
        """Rows of the current patch written."""
        self.added += added
        self.deleted += deleted
        self.noop += noop

    def patch_ended(self) -> tuple[int, int, int]:
        """The ended patch's counts; the next patch starts from zero."""
        counts = self.added, self.deleted, self.noop
        self.added = self.deleted = self.noop = 0
        return counts

    def mark(self) -> None:
        """A unit ended (committed or written): the next one starts from here."""
        self._marked = self.added, self.deleted, self.noop

    def restore(self) -> None:
        """The open unit aborted: its rows count for nothing."""
        self.added, self.deleted, self.noop = self._marked

    def unit_committed(self) -> None:
        """The open unit committed: its rows since :meth:`mark` go to the result."""
        result = self.result
        added0, deleted0, noop0 = self._marked
        result.units += 1
        result.added += self.added - added0
        result.deleted += self.deleted - deleted0
        result.noop += self.noop - noop0


__all__ = ["Tally", "TargetUnit"]
