"""``ingest``: one patch per RDF Message, appended to a destination (docs/design.md §8).

The destination is resolved by the source registry alone: a path is a log file written by
:class:`patchsync.capture.LogWriter` (``.jellyp``, ``.rdfp``, or a directory of segments),
an address is written by its kind's ``writer`` role (``nats://HOST:PORT/STREAM``, and any
kind registered with one). Either is a :class:`patchsync.capture.PatchLog`: each patch is
committed whole or not at all, chained after the destination's head.

Modes: ``add`` adds each message's quads; ``replace-graph`` makes each graph the message
names hold exactly the message's quads in it; ``replace`` makes the whole dataset the
message. The replace modes delete what the current state holds beyond the message, so they
need the state: ``--state TARGET`` (an apply target, which the ingest then keeps: each
patch is applied to it right after the destination took it), or, without it, the
destination's own log files replayed in memory (a stream destination is not read back, so
it needs ``--state``).

Resuming: a patch's id is derived from its source, message number and content
(:func:`patchsync.ingest.patches.message_patch_id`), so a rerun knows every message's id
before writing. The messages up to the last one whose id the destination holds (any patch
of a log file, the head of any other destination) are skipped. A ``--state`` target may
lag the destination (a crash between the two writes): the missing patches are rebuilt from
the state it holds, which gives them again exactly, and applied to it alone. A state that
is ahead of the destination, or at another head, is refused before anything is written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from patchsync.apply.applier import Applier
from patchsync.apply.registry import open_target
from patchsync.apply.target import CAN_DUMP, Target, capabilities_of, discard_target
from patchsync.capture import PatchLog
from patchsync.capture._log import open_patch_log
from patchsync.chains import held_prefix
from patchsync.errors import UsageError
from patchsync.events import Event
from patchsync.ingest.modes import ADD, MODES
from patchsync.ingest.patches import DatasetIndex, IngestMessage, logged_ids, patch_events, read_messages
from patchsync.ingest.terms import TermConverter
from patchsync.logs.convert import FeatureScan
from patchsync.options import Limits, PatchOptions, StatementType
from patchsync.sources import APPEND, Source, resolve_source
from patchsync.terms.rdflib_fast import FastRdflibTerms

__all__ = ["IngestResult", "ingest_messages"]


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What :func:`ingest_messages` did.

    ``appended``: patches the destination took; ``skipped``: messages it already held;
    ``caught_up``: patches applied to the ``--state`` target alone, which lagged behind.
    """

    appended: int
    skipped: int
    caught_up: int = 0


class _State:
    """The ``--state`` target, fed each patch (in its own terms) through one applier."""

    def __init__(self, spec: str, destination: str) -> None:
        self.spec = spec
        self.target: Target = open_target(spec)
        try:
            if CAN_DUMP not in capabilities_of(self.target):
                raise UsageError(f"--state {spec}: the target cannot be read back, so it cannot hold the state")
            self.convert = TermConverter(self.target.adapter)
            # Every run starts its own applier: chains are checked by id, not by position.
            self.applier = Applier(self.target, source=f"ingest {destination}", chain="strict", reset=True)
        except BaseException:
            discard_target(self.target)
            raise

    def index(self) -> DatasetIndex:
        return DatasetIndex().load(self.target.quads())  # type: ignore[attr-defined]

    def feed(self, events: list[Event]) -> None:
        self.applier.feed(self.convert.events(events))

    def close(self, ok: bool) -> None:
        if ok:
            try:
                self.applier.apply(())
            finally:
                self.target.close()
        else:
            discard_target(self.target)


def _send(log: PatchLog, events: list[Event], convert: TermConverter) -> None:
    """Encode one patch into the log's sink (rdflib terms, as a recorder writes them)."""
    send = log.sink.send
    for event in convert.events(events):
        send(event)


def _replay(files: list[Path]) -> DatasetIndex:
    """The dataset the log files leave, applied in memory."""
    from patchsync.apply.api import apply_file

    target = open_target("memory:")
    for path in files:
        if path.is_file() and path.stat().st_size:
            apply_file(path, target, chain="ignore")
    return DatasetIndex().load(target.quads())  # type: ignore[attr-defined]


def ingest_messages(
    dest: str | os.PathLike[str],
    sources: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...],
    *,
    mode: str = ADD,
    state: str | None = None,
    messages: bool = False,
    limits: Limits | None = None,
    fsync: bool = False,
) -> IngestResult:
    """Append one patch per message of ``sources`` (in order) to ``dest``; see the module docstring.

    ``dest`` is a ``.jellyp``/``.rdfp`` path or a destination address; ``mode`` one of
    :data:`patchsync.ingest.modes.MODES`; ``state`` an apply target spec holding the current
    state (kept up to date). Every source is read and validated before anything is written:
    a malformed message raises :class:`DecodeError` and nothing is appended.
    """
    if mode not in MODES:
        raise UsageError(f"--mode {mode}: expected one of {', '.join(MODES)}")
    scan = FeatureScan()
    todo = read_messages([Path(s) for s in sources], messages=messages, limits=limits, scan=scan)
    name = os.fspath(dest)
    destination = resolve_source(name)
    if not destination.is_path:
        destination.require(APPEND, "ingest")
        if mode != ADD and state is None:
            raise UsageError(
                f"{name}: --mode {mode} needs the current state, and a {destination.kind.name} destination "
                "is not read back: name --state TARGET"
            )
    files = destination.log_files()
    existing = any(f.is_file() and f.stat().st_size for f in files)
    created = destination.is_path and not destination.path.exists()
    options = None if existing else scan.options(PatchOptions(statement_type=StatementType.QUADS))
    held = _State(state, name) if state is not None else None
    ok = False
    try:
        log = open_patch_log(name, options, fsync=fsync)
        try:
            result = _ingest(log, destination, files, todo, mode, held, scan)
            ok = True
        finally:
            if ok and result.appended:
                log.close()
            else:
                log.abandon()
    finally:
        if held is not None:
            held.close(ok)
        if created and destination.path.is_file() and destination.path.stat().st_size == 0:
            destination.path.unlink()
    return result


def _ingest(
    log: PatchLog,
    destination: Source,
    files: list[Path],
    todo: list[IngestMessage],
    mode: str,
    held: _State | None,
    scan: FeatureScan,
) -> IngestResult:
    scan.require(log.options, destination.name, "ingested")
    number = {m.patch_id: i for i, m in enumerate(todo, start=1)}
    known = logged_ids(files) if destination.is_path else set()
    # The chain rule of every writer: the messages up to the last one the destination holds.
    done, _rest = held_prefix(lambda: iter(todo), _ids, log.head, known)
    index: DatasetIndex | None = None
    caught_up = 0
    if held is not None:
        if mode != ADD:
            index = held.index()
        caught_up = _catch_up(held, destination, todo, done, number, log.head, index, mode)
    elif mode != ADD:
        index = _replay(files)
    convert = TermConverter(FastRdflibTerms())
    appended = 0
    for message in todo[done:]:
        deletes, adds = index.changes(mode, message.quads) if index is not None else ([], message.quads)
        events = patch_events(message, log.head, deletes, adds)
        _send(log, events, convert)
        log.commit(message.patch_id)
        appended += 1
        if held is not None:
            held.feed(events)
        if index is not None:
            index.apply(deletes, adds)
    return IngestResult(appended, done, caught_up)


def _ids(message: IngestMessage) -> tuple[str | None, str | None]:
    return message.patch_id, None  # its prev is the destination's head when it is written


def _catch_up(
    held: _State,
    destination: Source,
    todo: list[IngestMessage],
    done: int,
    number: dict[str, int],
    head: str | None,
    index: DatasetIndex | None,
    mode: str,
) -> int:
    """Bring the state target to the destination's head: the patches it lacks, rebuilt from
    the state it holds and applied to it alone. Refused when it cannot get there."""
    at = held.target.head()
    have = number.get(at, 0) if at is not None else 0
    after = todo[done - 1].patch_id if done > have else at
    if have > done or after != head:

        def where(patch: str | None) -> str:
            if patch is None:
                return "empty"
            if patch in number:
                m = todo[number[patch] - 1]
                return f"at message {m.number} of {m.source} ({patch})"
            return f"at patch {patch}"

        raise UsageError(
            f"--state {held.spec} is {where(at)} but {destination.name} is {where(head)}: the state "
            "must hold what the destination holds (apply the destination to it first, or use a new target); "
            "nothing was ingested"
        )
    prev = at
    for message in todo[have:done]:
        deletes, adds = index.changes(mode, message.quads) if index is not None else ([], message.quads)
        held.feed(patch_events(message, prev, deletes, adds))
        if index is not None:
            index.apply(deletes, adds)
        prev = message.patch_id
    return done - have
