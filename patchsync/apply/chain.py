"""The strict chain policy of the applier: decide each patch, and decide again when another
applier moved the target (docs/design.md §3, §4).

A patch is decided when its first change arrives, against the head the applier expects the
target to have (its own last applied patch, or the target's head when it was last read):
``prev`` is that head, apply it; the target (or the held group) has its id, skip it as
re-delivered; else read the target's head again where it cannot move and decide once more,
then fail with :class:`ChainError`. The expected head is never trusted for a write: after
every ``Target.begin`` (which holds what keeps the target's state from changing until the
commit) the head is read again, and if another applier moved it, the patches decided on
the old head are decided again on the new one (:meth:`ChainChecks.redecide`).

:class:`ChainChecks` is a part of the applier with its own state: the expected head and
the decision on the current patch. It reaches what it does not own through the objects it
is given: the unit reader (the patch's ``id`` and ``prev``), the target's unit
(:class:`~patchsync.apply.unit_state.TargetUnit`), the units held back (:class:`HeldWrites`,
written before the head is read again) and a function that drops the open unit's rows
when the current patch turns out applied by another applier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from patchsync.apply.group import Decision, HeldUnit
from patchsync.apply.target import Target
from patchsync.apply.unit_state import TargetUnit
from patchsync.chains import follows
from patchsync.errors import ChainError, param
from patchsync.events import Event
from patchsync.units import UnitReader


class HeldWrites(Protocol):
    """Units the applier holds back and has not written (:mod:`patchsync.apply.group_writes`)."""

    def holds(self, patch_id: str) -> bool:
        """Whether a held unit records the patch ``patch_id`` (the target does not know it yet)."""
        ...

    def land(self) -> None:
        """Finish a group whose last write was left running."""
        ...

    def write(self, *, wait: bool = True) -> None:
        """Write every held unit."""
        ...


class NothingHeld:
    """:class:`HeldWrites` of an applier that holds nothing back (a target without groups)."""

    def holds(self, patch_id: str) -> bool:
        return False

    def land(self) -> None:
        pass

    def write(self, *, wait: bool = True) -> None:
        pass


class ChainChecks:
    """The chain decisions of an applier (see the module docstring); a part it holds.

    ``head`` is the head the applier expects the target to have after what it decided so
    far; ``skipping`` whether the current patch is skipped as re-delivered, ``decision``
    the decision on it (strict policy, a patch with an id), ``checked`` whether it was
    made. ``drop_unit`` is called when the current patch turns out applied meanwhile.
    """

    __slots__ = (
        "checked",
        "decision",
        "drop_unit",
        "head",
        "held",
        "reader",
        "skipping",
        "source",
        "strict",
        "target",
        "unit",
    )

    def __init__(
        self,
        target: Target,
        unit: TargetUnit,
        reader: UnitReader,
        *,
        source: str,
        strict: bool,
        head: str | None,
        drop_unit: Callable[[], None],
    ) -> None:
        self.target = target
        self.unit = unit
        self.reader = reader
        self.source = source
        self.strict = strict
        self.head = head
        self.drop_unit = drop_unit
        #: What the applier holds back; set by the applier once its group writes exist.
        self.held: HeldWrites = NothingHeld()
        self.new_patch()

    def new_patch(self) -> None:
        """A new patch starts: nothing is decided on it."""
        self.checked = False
        self.skipping = False
        self.decision: Decision | None = None

    def check(self, at: Event) -> None:
        """Decide, at a patch's first change, whether to apply it, skip it or stop."""
        self.checked = True
        patch = self.reader.patch
        patch_id = patch.id
        if not self.strict or patch_id is None:
            return
        if not self._decide(patch_id):
            # The expected head may be stale (another applier moved the target): read it
            # again where nothing can move it, after writing what this applier holds.
            self.held.write()
            unit = self.unit
            began = not unit.open
            if began:
                unit.begin()
            try:
                self.head = self.target.head()
                decided = self._decide(patch_id)
            finally:
                if began:
                    unit.rollback()
            if not decided:
                kind = "fork" if patch.prev is None or self.head is None else "gap or fork"
                raise ChainError(
                    f"{self.source}, byte {at.offset}: patch {patch_id} follows "
                    f"{patch.prev or '(no prev: a first patch)'} but the target's last applied patch is "
                    f"{self.head or '(none)'} ({kind}); use {param('chain', 'ignore')} to apply anyway"
                ).naming(("chain", "ignore"))
        self.decision = Decision(patch_id, patch.prev, at.offset, self.skipping)

    def _decide(self, patch_id: str) -> bool:
        """Apply the patch (True) or skip it (True, ``skipping``) on the expected head; False: the chain breaks."""
        prev = self.reader.patch.prev
        if follows(patch_id, prev, self.head):
            # The chain moves on by one. An id applied before would sit at or before the
            # head, so its prev could not be the head without a cycle: no lookup needed.
            return True
        held = self.held.holds(patch_id)
        if not held:
            self.held.land()  # a group still being written holds patches the target does not show yet
        if held or self.target.has_patch(patch_id):
            self.skipping = True
            return True
        return prev == self.head

    def validate(self) -> None:
        """After the target's ``begin()`` with no units held: the target's head (read where it
        cannot move) must be the expected one; else decide the current patch again (:meth:`redecide`)."""
        if not self.strict:
            return
        head = self.target.head()
        if head != self.head:
            _units, error, _moved = self.redecide([], head)
            if error is not None:
                raise error

    def redecide(self, units: list[HeldUnit], head: str | None) -> tuple[list[HeldUnit], ChainError | None, int]:
        """Decide again, on the target's actual ``head``, the patches of ``units`` (held on
        another head) and the current patch, under the target's lock.

        A patch that no longer follows the head and that the target holds was applied by
        another applier: it is skipped, and its held units are emptied (they write
        nothing). Any other such patch is a fork: the units before it are returned to be
        written, with the error to raise after them. The third value is how many held
        patches moved from applied to re-delivered (the caller's counts).
        """
        expected = head
        seen: set[int] = set()
        skipped: set[int] = set()  # decisions turned to skip here
        decisions: list[tuple[int, Decision]] = [(i, u.decision) for i, u in enumerate(units) if u.decision is not None]
        if self.decision is not None and not self.decision.skip:
            decisions.append((len(units), self.decision))
        for i, d in decisions:
            if id(d) not in seen:
                seen.add(id(d))
                if not d.skip and not follows(d.patch_id, d.prev, expected):
                    if not self.target.has_patch(d.patch_id):
                        units = units[:i]
                        error: ChainError | None = self._fork(d, expected)
                        break
                    d.skip = True
                    skipped.add(id(d))
            if i < len(units) and units[i].ends_patch and not d.skip:
                expected = d.patch_id
        else:
            error = None
        self.head = expected
        if self.decision is not None and id(self.decision) in skipped:
            self.skipping = True
            self.drop_unit()
        moved = 0
        for unit in units:
            if unit.decision is not None and id(unit.decision) in skipped:
                # Moved from applied to re-delivered: the held units write nothing.
                moved += unit.ends_patch
                unit.ops, unit.unit, unit.record, unit.prefixes = {}, False, None, []
        return units, error, moved

    def _fork(self, d: Decision, head: str | None) -> ChainError:
        error = ChainError(
            f"{self.source}, byte {d.offset}: patch {d.patch_id} follows {d.prev or '(no prev: a first patch)'} "
            f"but another applier moved the target on: its last applied patch is now {head or '(none)'} (fork); "
            f"use {param('chain', 'ignore')} to apply anyway"
        )
        error.naming(("chain", "ignore"))
        return error


__all__ = ["ChainChecks", "HeldWrites", "NothingHeld"]
