"""The strict chain policy of the applier: decide each patch, and decide again when another
applier moved the target (docs/design.md §3, §4).

A patch is decided when its first change arrives, against the head the applier expects the
target to have (its own last applied patch, or the target's head when it was last read):
``prev`` is that head, apply it; the target (or the held group) has its id, skip it as
re-delivered; else read the target's head again where it cannot move and decide once more,
then fail with :class:`ChainError`. The expected head is never trusted for a write: after
every ``Target.begin`` (which holds what keeps the target's state from changing until the
commit) the head is read again, and if another applier moved it, the patches decided on
the old head are decided again on the new one (:meth:`ChainChecks._redecide`).
"""

from __future__ import annotations

from patchsync.apply.group import CommitGroup, Decision, HeldUnit
from patchsync.apply.result import ApplyResult
from patchsync.apply.target import PrefixOp, Quad, Target
from patchsync.chains import follows
from patchsync.errors import ChainError, param
from patchsync.events import Event
from patchsync.units import UnitReader


class ChainChecks:
    """The chain decisions of :class:`~patchsync.apply.applier.Applier` (a mixin: its state is the applier's)."""

    target: Target
    source: str
    strict: bool
    result: ApplyResult
    _head: str | None
    _group: CommitGroup | None
    _unit_open: bool
    _open: bool
    _ops: dict[Quad, int]
    _prefixes: list[PrefixOp]
    _reader: UnitReader
    _checked: bool
    _skipping: bool
    _decision: Decision | None

    def _write_group(self, *, wait: bool = True) -> None:
        raise NotImplementedError

    def _land(self) -> None:
        raise NotImplementedError

    def _check_chain(self, at: Event) -> None:
        """Decide, at a patch's first change, whether to apply it, skip it or stop."""
        self._checked = True
        patch = self._reader.patch
        patch_id = patch.id
        if not self.strict or patch_id is None:
            return
        if not self._decide(patch_id):
            # The expected head may be stale (another applier moved the target): read it
            # again where nothing can move it, after writing what this applier holds.
            self._write_group()
            began = not self._unit_open
            if began:
                self.target.begin()
                self._unit_open = True
            try:
                self._head = self.target.head()
                decided = self._decide(patch_id)
            finally:
                if began:
                    self._unit_open = False
                    self.target.rollback()
            if not decided:
                kind = "fork" if patch.prev is None or self._head is None else "gap or fork"
                raise ChainError(
                    f"{self.source}, byte {at.offset}: patch {patch_id} follows "
                    f"{patch.prev or '(no prev: a first patch)'} but the target's last applied patch is "
                    f"{self._head or '(none)'} ({kind}); use {param('chain', 'ignore')} to apply anyway"
                ).naming(("chain", "ignore"))
        self._decision = Decision(patch_id, patch.prev, at.offset, self._skipping)

    def _decide(self, patch_id: str) -> bool:
        """Apply the patch (True) or skip it (True, ``_skipping``) on the expected head; False: the chain breaks."""
        prev = self._reader.patch.prev
        if follows(patch_id, prev, self._head):
            # The chain moves on by one. An id applied before would sit at or before the
            # head, so its prev could not be the head without a cycle: no lookup needed.
            return True
        held = self._group is not None and self._group.holds(patch_id)
        if not held:
            self._land()  # a group still being written holds patches the target does not show yet
        if held or self.target.has_patch(patch_id):
            self._skipping = True
            return True
        return prev == self._head

    def _validate(self) -> None:
        """After ``target.begin()`` with no units held: the target's head (read where it cannot
        move) must be the expected one; else decide the current patch again (:meth:`_redecide`)."""
        if not self.strict:
            return
        head = self.target.head()
        if head != self._head:
            _units, error = self._redecide([], head)
            if error is not None:
                raise error

    def _redecide(self, units: list[HeldUnit], head: str | None) -> tuple[list[HeldUnit], ChainError | None]:
        """Decide again, on the target's actual ``head``, the patches of ``units`` (held on
        another head) and the current patch, under the target's lock.

        A patch that no longer follows the head and that the target holds was applied by
        another applier: it is skipped, counted as re-delivered, and its held units write
        nothing. Any other such patch is a fork: the units before it are returned to be
        written, with the error to raise after them.
        """
        expected = head
        seen: set[int] = set()
        skipped: set[int] = set()  # decisions turned to skip here
        decisions: list[tuple[int, Decision]] = [(i, u.decision) for i, u in enumerate(units) if u.decision is not None]
        if self._decision is not None and not self._decision.skip:
            decisions.append((len(units), self._decision))
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
        self._head = expected
        if self._decision is not None and id(self._decision) in skipped:
            self._skipping = True
            self._ops = {}
            self._prefixes = []
            self._open = False
        for unit in units:
            if unit.decision is not None and id(unit.decision) in skipped:
                # Moved from applied to re-delivered: the held units write nothing.
                if unit.ends_patch:
                    self.result.patches -= 1
                    self.result.skipped += 1
                unit.ops, unit.unit, unit.record, unit.prefixes = {}, False, None, []
        return units, error

    def _fork(self, d: Decision, head: str | None) -> ChainError:
        error = ChainError(
            f"{self.source}, byte {d.offset}: patch {d.patch_id} follows {d.prev or '(no prev: a first patch)'} "
            f"but another applier moved the target on: its last applied patch is now {head or '(none)'} (fork); "
            f"use {param('chain', 'ignore')} to apply anyway"
        )
        error.naming(("chain", "ignore"))
        return error


__all__ = ["ChainChecks"]
