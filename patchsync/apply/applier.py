"""The applier: a state machine from decoded events to atomic units on a :class:`Target`.

Theory of operation. Events arrive in log order. The applier groups them into units of atomicity
(docs/design.md §2): ``TX … TC`` is one unit, ``TX … TA`` is dropped, and rows outside a
transaction form an implicit unit that ends at the next ``TX`` or at patch end. Only a complete
unit reaches ``Target.commit``; a unit still open when the events stop (an incomplete patch, a
decode error) is rolled back, so the target never holds part of a unit.

Rows are collected per quad and sent in batches: all deletes, then all adds. Rows on
different quads commute, so only the order of operations on one quad matters, and the
applier keeps it (a quad touched several times in a batch is resolved on its own). This
lets SQL targets use one bulk statement per batch however adds and deletes interleave.
Each batch returns how many rows changed the target, so counts follow set semantics row
by row, exactly as applying the rows one at a time (docs/design.md §5).

Where the target tells presence in bulk and takes last writes without a savepoint (SQL),
complete units are not sent at their commit but held in a commit group and written
together (:mod:`patchsync.apply.group`): their counts and patch records are then made when
the group is written, and so are their prefix rows (``PA``/``PD``), which go with the group
in log order. A unit that must write before its end (its rows fill a batch) writes the
group first and then runs as above, its prefix rows sent as they come.

Chains (docs/design.md §4) are checked when a patch's first change arrives (its headers come
first): with ``chain="strict"`` a patch whose ``prev`` is not the target's head fails
with :class:`ChainError` and a patch whose ``id`` the target already holds is skipped
whole. The head the applier expects is never trusted for a write: another process may
have moved the target, so it is read again after every ``Target.begin`` and the patches
decided on it are decided again if it moved (:mod:`patchsync.apply.chain`).
Every unit commit carries the source's checkpoint (docs/design.md §3); resuming replays
the decode from the start of the log and sends nothing to the target up to the
checkpoint, so no unit is applied twice or skipped.

A ``TC`` commit is held back by one event so that, when the patch ends right after it,
the unit, the patch record and the checkpoint past the patch end are one commit.

The applier is composed of parts, each with its own state, and holds them: the unit reader
(:class:`~patchsync.units.UnitReader`), the chain checks (:class:`.chain.ChainChecks`: the
expected head, the decision on the current patch), the group writes
(:class:`.group_writes.GroupWrites`, only for a target that takes commit groups), the
target's unit and the running counts (:mod:`.unit_state`). The target's optional abilities
are checked once, when the applier is built (:func:`~patchsync.apply.target.abilities_of`).
This class holds the open unit's rows and drives the parts event by event.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from typing import NoReturn

from patchsync.apply.chain import ChainChecks
from patchsync.apply.group import (
    DEFAULT_GROUP_ROWS,
    DEFAULT_GROUP_UNITS,
    HeldUnit,
    write_prefixes,
    write_rows,
)
from patchsync.apply.group_writes import GroupWrites
from patchsync.apply.result import ApplyResult
from patchsync.apply.target import (
    Checkpoint,
    PatchRecord,
    PrefixOp,
    Quad,
    Target,
    abilities_of,
)
from patchsync.apply.unit_state import Tally, TargetUnit
from patchsync.errors import ApplyError, ChainError, CheckpointError, DecodeError, PatchsyncError, param
from patchsync.events import Add, Delete, Event, PrefixAdd, PrefixDelete
from patchsync.units import ENDS_PATCH, QUIET, Kind, Mark, UnitReader

CHAIN_POLICIES = ("strict", "ignore")

#: Rows per batch handed to the target.
DEFAULT_BATCH_ROWS = 5000


_CHANGE_QUIET = QUIET[Kind.CHANGE]
_FIRST_ROW, _HEADER, _TX, _TX_AFTER_IMPLICIT = Mark.FIRST_ROW, Mark.HEADER, Mark.TX, Mark.TX_AFTER_IMPLICIT
_COMMIT, _ABORT = Mark.COMMIT, Mark.ABORT


class Applier:
    """Applies the events of one source log to a target (see the module docstring).

    ``source`` names the log in the target's checkpoints; ``fingerprint`` identifies its
    content (a mismatch with the stored one raises :class:`CheckpointError` unless
    ``reset``, which starts the source over; re-delivered patches are still skipped by
    id). ``progress`` is called every ``progress_every`` events with the running result
    and the byte offset reached.
    """

    def __init__(
        self,
        target: Target,
        *,
        source: str = "<events>",
        fingerprint: str | None = None,
        chain: str = "strict",
        reset: bool = False,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        progress: Callable[[ApplyResult, int], None] | None = None,
        progress_every: int = 20_000,
        group_rows: int = DEFAULT_GROUP_ROWS,
        group_units: int = DEFAULT_GROUP_UNITS,
    ) -> None:
        if chain not in CHAIN_POLICIES:
            raise ApplyError(f"unknown chain policy {chain!r} (expected strict or ignore)")
        self.target = target
        self.source = source
        self.fingerprint = fingerprint
        self.strict = chain == "strict"
        self.batch_rows = max(1, batch_rows)
        self.progress = progress
        self.progress_every = progress_every
        # The target's optional abilities, checked here once (a declared one it lacks is refused).
        abilities = abilities_of(target)
        stored = target.checkpoint(source)
        if (
            stored is not None
            and not reset
            and fingerprint
            and stored.fingerprint
            and stored.fingerprint != fingerprint
        ):
            raise CheckpointError(
                f"{source}: the log no longer matches the target's checkpoint (fingerprint {stored.fingerprint[:16]} "
                f"stored, {fingerprint[:16]} now): it was replaced; apply with {param('reset', True)} to start it over"
            ).naming(("reset", True))
        if reset:
            stored = None
        self._resume: tuple[int, int] | None = (stored.offset, stored.row) if stored is not None else None
        self._patches = stored.patches if stored is not None else 0
        self._last_id = stored.last_id if stored is not None else None
        self._tally = Tally(ApplyResult(source=source))
        self._unit = TargetUnit(target)
        # Units, their boundaries and each patch's chain headers: the unit reader of
        # patchsync.units, fed every event (rows inside a unit excepted, which change nothing).
        self._reader = UnitReader(target.adapter)
        # The head this applier expects the target to have after what it decided so far is
        # a first guess, checked under the target's lock at every write (ChainChecks.validate).
        self._chain = ChainChecks(
            target,
            self._unit,
            self._reader,
            source=source,
            strict=self.strict,
            head=target.head(),
            drop_unit=self._drop_unit,
        )
        self._last_writes = abilities.last_writes
        self._presence = abilities.presence
        self._prefix_batches = abilities.prefix_batches
        # Complete units held back and written together (patchsync.apply.group), where the
        # target tells presence in bulk and takes last writes without a savepoint.
        self._groups: GroupWrites | None = None
        if abilities.group is not None:
            self._groups = GroupWrites(
                abilities.group,
                abilities,
                self._unit,
                self._chain,
                self._tally,
                source=source,
                rows=group_rows,
                units=group_units,
            )
            self._chain.held = self._groups
        self._open = False  # a unit not skipped is open
        # The open unit's pending rows: quad -> its operations in order, as bits after a
        # leading 1 (add = 1, delete = 0), so one dict lookup per row keeps exact counts.
        self._ops: dict[Quad, int] = {}
        # The open unit's prefix rows in order, while it is to be held in a group.
        self._prefixes: list[PrefixOp] = []
        self._last: Event | None = None  # last event of the current unit
        self._held: Event | None = None  # a TC whose commit waits for the next event
        self._at: Event | None = None  # the event being applied, for error messages

    @property
    def result(self) -> ApplyResult:
        """What this applier did so far (a caller may give its own object to add to)."""
        return self._tally.result

    @result.setter
    def result(self, result: ApplyResult) -> None:
        self._tally.result = result

    # -- units ---------------------------------------------------------------------------

    def _begin_unit(self, at: Event) -> None:
        chain = self._chain
        if not chain.checked:
            chain.check(at)
        if chain.skipping:
            return
        if self._groups is None and not self._begin_target():
            return
        self._open = True

    def _begin_target(self) -> bool:
        """Begin a unit on the target and check the head; False: the current patch turned out
        applied by another applier (the unit is rolled back, the patch skipped)."""
        self._unit.begin()
        self._chain.validate()
        if self._chain.skipping:
            self._unit.rollback()
            return False
        return True

    def _drop_unit(self) -> None:
        """The current patch turned out applied by another applier: its open unit writes nothing."""
        self._ops = {}
        self._prefixes = []
        self._open = False

    def _write_group(self, *, wait: bool = True) -> None:
        if self._groups is not None:
            self._groups.write(wait=wait)

    def _go_direct(self) -> bool:
        """The open unit writes before its end: write the held units, then begin it on the target.

        False when the current patch turned out applied by another applier (then skipped).
        """
        if self._unit.open:
            return True
        self._write_group()
        if self._chain.skipping or not self._begin_target():
            return False
        prefixes, self._prefixes = self._prefixes, []
        write_prefixes(self.target, self._prefix_batches, prefixes)
        return True

    def _flush_ops(self) -> None:
        """Send the pending rows (see :func:`~patchsync.apply.group.write_rows`)."""
        if self._ops:
            ops, self._ops = self._ops, {}
            self._tally.add(*write_rows(self.target, ops, self._presence))

    def _commit(self, at: Event, *, patch_end: bool) -> None:
        """Commit the open unit (or a record-only step at a patch end) with the checkpoint at ``at``."""
        groups = self._groups
        unit = self._unit
        chain = self._chain
        if groups is not None and not unit.open:
            # Held back: the counts of its rows and its patch record are known when the
            # group is written (GroupWrites). The chain decisions on the units it holds
            # assume the head expected before the first of them.
            base = chain.head
            record = self._record(at) if patch_end and not chain.skipping else None
            held = HeldUnit(self._ops, self._step(at, patch_end), self._open, patch_end, record, chain.decision)
            held.prefixes, self._prefixes = self._prefixes, []
            self._ops = {}
            self._open = False
            groups.hold(held, base)
            return
        tally = self._tally
        if unit.open:
            if self._last_writes is not None:
                self._last_writes.last_writes()
            self._flush_ops()
            tally.unit_committed()
        else:
            # Nothing to write, but the checkpoint (and a patch record) still move forward.
            unit.begin()
            chain.validate()
        records: list[PatchRecord] = []
        if patch_end and not chain.skipping:
            records.append(self._record(at))
            tally.patch_ended()
        unit.commit(self.source, self._step(at, patch_end), records)
        self._open = False
        tally.mark()

    def _record(self, at: Event) -> PatchRecord:
        """The record of the patch ending at ``at``, with the counts of its units applied so far."""
        patch = self._reader.patch
        tally = self._tally
        position, counts = (at.offset, at.frame, at.row), (tally.added, tally.deleted, tally.noop)
        return PatchRecord(
            patch.id,
            patch.prev,
            self.source,
            *position,
            *counts,
            time.time(),
            patch.pairs(),
            self._chain.decision is not None,
        )

    def _step(self, at: Event, patch_end: bool) -> Checkpoint:
        """Move the patch bookkeeping past a unit ending at ``at``; its checkpoint."""
        if patch_end:
            self._patches += 1
            skipping = self._chain.skipping
            if skipping:
                self.result.skipped += 1
            else:
                self.result.patches += 1
            patch_id = self._reader.patch.id
            if patch_id is not None:
                self._last_id = patch_id
                if not skipping:
                    self._chain.head = patch_id
        return Checkpoint(at.offset, at.frame, at.row, self._patches, self._last_id, self.fingerprint, time.time())

    def _abort(self) -> None:
        self._ops = {}
        self._prefixes = []
        if self._unit.open:
            self._unit.rollback()
        if self._open:
            self._open = False
            self.result.aborted += 1
        self._tally.restore()

    # -- driving -------------------------------------------------------------------------

    def apply(self, events: Iterable[Event]) -> ApplyResult:
        """Apply every event; on any error the open unit is rolled back and committed units flushed."""
        try:
            self._run_events(events)
            if self._resume is not None:
                # Everything was applied before; the checkpoint sits at a unit's end.
                self._resumed()
            if self._held is not None:
                self._release_held(None)
            self._write_group()
            if self._reader.in_unit:
                # Unreachable with a decoder that validated the stream; guards hand-made event lists.
                last = self._last
                where = f", byte {last.offset}" if last is not None else ""
                raise ApplyError(f"{self.source}{where}: the events end inside a unit; it was not applied")
            self.target.flush()
        except BaseException as exc:
            self._reraise(exc)
        return self.result

    def feed(self, events: Iterable[Event]) -> None:
        """Apply the next events of a log that is still growing (the tail daemon).

        Complete units are committed as in :meth:`apply`; a unit still open when the
        events run out stays open for the next call. Call :meth:`pause` when the input
        pauses. On an error the open unit is rolled back and the error raised as by
        :meth:`apply`; the applier must not be fed again. A group whose adds were left
        running is finished before the call returns (the caller may use the target next).
        """
        try:
            self._run_events(events)
            if self._groups is not None:
                self._groups.land()
        except BaseException as exc:
            self._reraise(exc)

    def pause(self) -> bool:
        """The input paused: commit a held ``TC`` and, if no unit is open, flush the target.

        Returns whether the target was flushed (every complete unit so far is durable).
        """
        try:
            if self._resume is not None:
                # Still passing over applied events: nothing is open (see apply()).
                self.target.flush()
                return True
            if self._held is not None:
                self._release_held(None)
            self._write_group()  # held units wait for nothing but more input: not now
            if self._reader.in_unit:
                return False
            self.target.flush()
        except BaseException as exc:
            self._reraise(exc)
        return True

    def _reraise(self, exc: BaseException) -> NoReturn:
        self._fail(exc)
        if isinstance(exc, (DecodeError, ChainError, CheckpointError)) or not isinstance(exc, Exception):
            raise exc
        at = self._at
        where = f"{self.source}, byte {at.offset}" if at is not None else self.source
        if isinstance(exc, PatchsyncError):
            if str(exc).startswith(self.source):
                raise exc
            raise ApplyError(f"{where}: {exc}") from exc
        raise ApplyError(f"{where}: the target failed: {exc}") from exc

    def _fail(self, exc: BaseException) -> None:
        # A decode error comes after every complete unit before it: keep those (docs/design.md §2).
        # Cleanup is best effort: a target that failed may fail again, and the original
        # error is the one to report.
        if isinstance(exc, DecodeError) and self._held is not None:
            with contextlib.suppress(Exception):
                self._release_held(None)
        unit = self._unit
        if not unit.open:
            # Held units were committed before the error, as were the target's own pending
            # ones; a failed group write took its units out of the group first.
            with contextlib.suppress(Exception):
                self._write_group()
        if unit.open:
            with contextlib.suppress(Exception):
                unit.rollback()
        with contextlib.suppress(Exception):
            self.target.flush()

    def _release_held(self, mark: Mark | None) -> bool:
        """Commit a held ``TC``; folds a patch end (``mark``) right after it into it. True if folded."""
        held, self._held = self._held, None
        assert held is not None
        if mark in ENDS_PATCH:
            assert self._at is not None
            self._commit(self._at, patch_end=True)
            self._chain.new_patch()
            return True
        self._commit(held, patch_end=False)
        return False

    def _resumed(self) -> None:
        # A checkpoint always sits at the end of a unit, so no unit is open here, even
        # where the replayed rows leave the reader in the implicit unit that a TX ended.
        self._reader.at_checkpoint()

    def _run_events(self, events: Iterable[Event]) -> None:
        reader = self._reader
        read = reader.read
        chain = self._chain
        tally = self._tally
        resume = self._resume
        every = self.progress_every
        count = 0
        for event in events:
            self._at = event
            count += 1
            if self.progress is not None and count % every == 0:
                self.progress(tally.result, event.offset)
            kind = type(event)
            if resume is not None:
                if (event.offset, event.row) <= resume:
                    tally.result.replayed += 1
                    self._replay(event)
                    continue
                resume = self._resume = None
                self._resumed()
            if kind is Add or kind is Delete:
                # A row inside an open unit changes nothing in the reader (units.QUIET): not read.
                if reader.state not in _CHANGE_QUIET:
                    mark = read(event)
                    if self._held is not None:
                        self._release_held(mark)
                    if mark is _FIRST_ROW:
                        self._begin_unit(event)
                if chain.skipping:
                    continue
                ops = self._ops
                quad: Quad = event[:4]  # type: ignore[assignment]
                seq = ops.get(quad)
                if seq is None:
                    ops[quad] = 3 if kind is Add else 2
                else:
                    ops[quad] = (seq << 1) | (kind is Add)
                    if seq >= 1 << 60:
                        self._go_direct()
                        self._flush_ops()  # keep the bit history a machine-sized int
                if len(ops) >= self.batch_rows:
                    self._go_direct()
                    self._flush_ops()
                self._last = event
                continue
            mark = read(event)
            if self._held is not None and self._release_held(mark):
                continue  # the patch end was folded into the held TC's commit
            if mark is _HEADER:
                if self.strict and reader.patch.chain_after_changes:
                    raise ApplyError(
                        f"{self.source}, byte {event.offset}: header {reader.patch.rows[-1].key!r} comes after "
                        "the patch's changes; "
                        "chain headers must precede them"
                    )
            elif mark is _TX or mark is _TX_AFTER_IMPLICIT:
                if mark is _TX_AFTER_IMPLICIT:
                    self._commit(self._last or event, patch_end=False)
                self._begin_unit(event)
                self._last = event
            elif mark is _COMMIT:
                self._last = event
                self._held = event
            elif mark is _ABORT:
                self._abort()
            elif mark in ENDS_PATCH:
                if not self._chain.checked:
                    self._chain.check(event)
                self._commit(event, patch_end=True)
                self._chain.new_patch()
            elif mark is not Mark.OUTSIDE:  # a prefix row
                self._prefix(event, mark)

    def _prefix(self, event: Event, mark: Mark) -> None:
        if mark is _FIRST_ROW:
            self._begin_unit(event)
        if self._chain.skipping:
            return
        self._last = event
        if isinstance(event, PrefixAdd):
            op: PrefixOp = (True, event.g, event.name, event.iri)
        elif isinstance(event, PrefixDelete):
            op = (False, event.g, event.name, None)
        else:
            return
        if not self._unit.open:
            # Held with the unit's rows and written with its group (or when it goes direct).
            self._prefixes.append(op)
        elif op[0]:
            self.target.add_prefix(op[1], op[2], op[3])
        else:
            self.target.delete_prefix(op[1], op[2])

    def _replay(self, event: Event) -> None:
        """Follow units and patches over events already applied (before the checkpoint)."""
        if self._reader.read(event) in ENDS_PATCH:
            self._chain.new_patch()


__all__ = ["CHAIN_POLICIES", "DEFAULT_BATCH_ROWS", "Applier", "ApplyResult"]
