"""One remote log being tailed (``nats://``, ``grpc://``, ``http(s)://``): its reader and applier.

Every kind of remote log hands the daemon one whole patch per message at a position (stream
sequence or version) that the applier checkpoints in the target's transaction (``offset`` =
position), through one interface (:class:`~patchsync.remote.interface.RemoteLog`, opened by the
kind's ``connect`` role). :class:`NetworkFollower` is the one follower of them all: it resumes
(:func:`patchsync.remote.rules.resume_position`), reads pages (ahead of the applier on a thread
of their own, :mod:`patchsync.remote.read_ahead`, unless the log reads ahead itself), decodes
each message whole before any of it reaches the applier (a malformed message stops the replica
exactly before it, with nothing of it applied), pauses the applier (committing) at most every
``PAUSE_SECONDS`` while a backlog is worked through, reports lag
(:func:`patchsync.remote.rules.lag`) and loses, fails and closes alike for every kind.

No decoder snapshots: every message decodes on its own, so resuming costs one request
whatever the log's length. The server being out of reach
(:class:`~patchsync.remote.errors.StreamUnavailable`, a
:class:`~patchsync.errors.TargetUnavailable`) goes through the daemon's reconnect path with
its backoff, like a lost target; a gap (retention removed messages this replica still needs)
is fatal, with one line. ``--once`` reads up to the head as it is when reached and stops.

:func:`status_lag` (``patchsync status``) and :func:`checkpoint_after` (a base's head, for
``--base``) are the same rules asked once, outside the daemon.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import closing
from typing import Any, Protocol

from patchsync.apply.applier import Applier
from patchsync.apply.target import PAST, Checkpoint
from patchsync.errors import DecodeError, PatchsyncError
from patchsync.events import Event
from patchsync.logs.payloads import MessageDecoder, StreamMessage
from patchsync.remote.interface import RemoteLog
from patchsync.remote.read_ahead import Pages, open_pages
from patchsync.remote.rules import lag, resume_position
from patchsync.sources import resolve_source
from patchsync.tail.follower import Follower, FollowerHost

#: Seconds a replica working through a backlog (see ``BATCH``) may go without a pause of the
#: applier (its units commit in groups meanwhile; a pause also commits the last of them).
PAUSE_SECONDS = 1.0
#: Events of consecutive messages fed to the applier at a time, at most (a message's own
#: events go together whatever their number).
FEED_EVENTS = 8192
#: Seconds between two lag queries to the server (each is one or two requests).
LAG_SECONDS = 1.0
#: Messages taken per pass (a full batch, or one ending before the head last asked, is a backlog).
BATCH = 256
#: Seconds a pass waits for a page in ``--once`` mode before looking again.
ONCE_WAIT = 1.0


def checkpoint_at(name: str, version: int, patch_id: str | None) -> Checkpoint:
    """The checkpoint of a replica of the log ``name`` that applied every patch up to
    ``version`` whole, the last one ``patch_id``: the same whether the replica applied them
    or loaded a base holding them. Its fingerprint is the log's name, as the replica's own
    checkpoints have it."""
    return Checkpoint(version, PAST, PAST, version, patch_id, name, time.time())


def checkpoint_after(source: str, patch_id: str) -> Checkpoint | None:
    """The checkpoint of a replica of the remote log ``source`` that holds its patches up to
    ``patch_id`` (a base's head), so that it resumes at the next position; ``None`` when the
    log holds no such patch (the ``checkpoint_after`` role,
    :func:`patchsync.apply.base.address_checkpoints`)."""
    resolved = resolve_source(source)
    with closing(resolved.connect()(resolved.address)) as log:
        position = log.position_of(patch_id)
        fingerprint = log.fingerprint()
    return None if position is None else checkpoint_at(fingerprint, position, patch_id)


def status_lag(source: str, checkpoint: Checkpoint) -> dict[str, Any]:
    """How far a replica at ``checkpoint`` is behind the remote log ``source``, for ``patchsync
    status``: ``{"lag_messages": N, "lag_seconds": S}`` (seconds 0 when the server keeps no
    times), or ``{"lag_error": "..."}`` when the server cannot be asked (it is out of reach,
    or the log is gone): status must still answer."""
    resolved = resolve_source(source)
    try:
        with closing(resolved.connect()(resolved.address, timeout=2.0)) as log:
            behind = lag(log, resume_position(log, checkpoint) - 1)
    except PatchsyncError as exc:
        return {"lag_error": str(exc)}
    return {"lag_messages": behind.messages, "lag_seconds": round(behind.seconds, 3)}


class StreamHost(FollowerHost, Protocol):
    """What a stream source needs from the daemon running it: a file source's host, plus
    how long a fetch may wait."""

    @property
    def stream_wait(self) -> float:
        """Seconds a fetch may wait for new messages (0: caught up means done, ``--once``)."""


class NetworkFollower(Follower):
    """One remote log being followed: connection, pages, next position to apply, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        resolved = resolve_source(url)
        self.address = resolved.address
        self._connect = resolved.connect()
        super().__init__(host, str(resolved.address))
        self.host: StreamHost = host
        self.log: RemoteLog | None = None
        self.pages: Pages | None = None
        self.report.applied_seq = 0
        self.report.lag_messages = 0
        self.applier: Applier | None = None
        self.decoder: MessageDecoder | None = None
        #: The position (stream sequence or version) of the next message to apply.
        self.next_seq = 1
        self._lag_at = -1e9
        self._paused_at = -1e9
        #: The log's last position as last asked (with the lag): a page ending before it is
        #: part of a backlog whatever its size (a server's pages may be short: bounded in bytes).
        self._head = 0

    # -- opening and resuming ----------------------------------------------------------

    def open(self) -> None:
        """Connect, resume after the target's checkpoint (on the log it was taken on: a stream
        deleted and made again is another log, refused by the applier's fingerprint check or
        started over with reset), and start reading pages."""
        self._lock()
        log = self._connect(self.address, follow=True)
        try:
            applier, stored = self._applier(log.fingerprint())
            start = resume_position(log, stored)
            wait = self.host.stream_wait
            pages = open_pages(log, lambda: self._connect(self.address, follow=True), start - 1, wait)
        except BaseException:
            log.close()
            raise
        self.log, self.pages = log, pages
        self._resumed(applier, start, stored, log.position_word)
        self._update_lag(time.monotonic(), force=True)

    def _applier(self, fingerprint: str) -> tuple[Applier, Checkpoint | None]:
        """An applier of this source into the target, and the checkpoint to resume from."""
        target = self.host.target
        applier = Applier(
            target, source=self.name, fingerprint=fingerprint, chain=self.options.chain, reset=self.options.reset
        )
        stored = None if self.options.reset else target.checkpoint(self.name)
        return applier, stored

    def _resumed(self, applier: Applier, start: int, stored: Checkpoint | None, word: str) -> None:
        """Start applying at position ``start`` (connected) and log where from."""
        applier.result = self.report.result
        self.applier, self.next_seq = applier, start
        self.decoder = MessageDecoder(self.name, adapter=self.host.target.adapter, limits=self.options.limits)
        self.report.applied_seq = start - 1
        self.report.state = "live"
        self.report.resumed_from = start
        # A backlog's first commit comes a pause interval after the start, like the next ones.
        self._paused_at = time.monotonic()
        fields: dict[str, Any] = {"source": self.name, f"from_{word}": start}
        if stored is not None:
            fields |= {f"cp_{word}": stored.offset, "cp_patches": stored.patches}
            if stored.row_at is not None:  # inside a message; else the whole message was applied
                fields["cp_row"] = stored.row_at
        self.host.log("resume", fields)

    # -- one pass ----------------------------------------------------------------------

    def pump(self, now: float) -> bool:
        """Read, check and apply the next messages; returns whether more may be waiting."""
        if self.failed:
            return False
        if self.applier is None:
            self.open()
        return self._pump(now)

    def _pump(self, now: float) -> bool:
        """One pass of a connected source (see :meth:`pump`)."""
        pages = self.pages
        assert pages is not None
        wait = self.host.stream_wait
        messages = pages.take(BATCH, wait if wait > 0 else ONCE_WAIT)
        self.reached |= pages.answered
        # A page may start before the next position (a gRPC subscription resumed after a
        # version): what was applied is passed over.
        self._apply(m for m in messages if m.seq >= self.next_seq)
        progressed = bool(messages)
        behind = progressed and (len(messages) >= BATCH or messages[-1].seq < self._head)
        backlog = behind and not self.host.stopping
        if not self._pause(progressed=progressed, backlog=backlog):
            return True
        # At most once a second: asking costs requests that a busy replica needs for reading.
        self._update_lag(now, force=pages.ended)
        if progressed:
            self.host.log("applied", self.report.as_dict())
        if pages.ended and not messages:
            return False  # --once: caught up with the log as it was when reached
        return progressed or wait <= 0

    def _update_lag(self, now: float, *, force: bool) -> None:
        """Ask the server how far behind the replica is, at most every ``LAG_SECONDS``."""
        if self.log is None or not self._lag_due(now, force=force):
            return
        applied = self.report.applied_seq or 0
        behind = lag(self.log, applied)
        self.report.lag_messages = behind.messages
        self.report.lag_seconds = behind.seconds
        self.report.size = self._head = applied + behind.messages
        self.report.applied_end = applied

    def _disconnect(self) -> None:
        pages, self.pages = self.pages, None
        if pages is not None:
            pages.close()
        log, self.log = self.log, None
        if log is not None:
            log.close()

    def _apply(self, messages: Iterable[StreamMessage]) -> None:
        """Decode each message whole and feed its events to the applier, until stopping.

        The events of consecutive messages reach the applier together (up to
        ``FEED_EVENTS`` at a time): each message is still decoded and checked whole before
        any of it is fed, and a message that fails is preceded by every message before it.
        """
        applier, decoder = self.applier, self.decoder
        assert applier is not None and decoder is not None
        events: list[Event] = []
        decoded = self.next_seq  # the position after the last message decoded
        for message in messages:
            if self.host.stopping:
                break
            try:
                events += decoder.decode(message)
            except DecodeError:
                # Every message before it is applied and durable; nothing of this one is.
                self._feed(applier, events, decoded)
                applier.pause()
                self.report.applied_seq = self.next_seq - 1
                raise
            decoded = message.seq + 1
            if len(events) >= FEED_EVENTS:
                self._feed(applier, events, decoded)
                events = []
        self._feed(applier, events, decoded)

    def _feed(self, applier: Applier, events: list[Event], decoded: int) -> None:
        if events:
            applier.feed(events)
        self.next_seq = decoded

    def _pause(self, *, progressed: bool, backlog: bool) -> bool:
        """Pause the applier, committing what it holds; ``False`` when put off.

        While a backlog is being worked through, the units read so far join those of the
        next batch in the applier's commit groups instead of a commit per fetch, up to
        ``PAUSE_SECONDS`` since the last pause.
        """
        assert self.applier is not None
        if backlog and time.monotonic() - self._paused_at < PAUSE_SECONDS:
            return False
        self._paused_at = time.monotonic()
        if self.applier.pause():
            self.report.applied_seq = self.next_seq - 1
            if progressed:
                self.host.target_progressed()
        return True

    def _lag_due(self, now: float, *, force: bool) -> bool:
        """Whether to ask the server for the lag now (at most every ``LAG_SECONDS``)."""
        if not force and now - self._lag_at < LAG_SECONDS:
            return False
        self._lag_at = now
        return True

    # -- losing the target, failing, closing -------------------------------------------

    def reset(self) -> None:
        """Drop the connection and applier (the target or the server was lost); keep the lock.

        The next pass connects again and resumes from the reopened target's checkpoint.
        """
        if self.failed:
            return
        self._disconnect()
        self.applier = None
        self.report.state = "starting"


__all__ = [
    "BATCH",
    "FEED_EVENTS",
    "LAG_SECONDS",
    "PAUSE_SECONDS",
    "NetworkFollower",
    "StreamHost",
    "checkpoint_after",
    "checkpoint_at",
    "status_lag",
]
