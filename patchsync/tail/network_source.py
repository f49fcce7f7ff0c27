"""What the network follow sources share: a log of whole-patch messages, read by position.

A NATS stream (:mod:`~patchsync.tail.stream_source`), a gRPC topic
(:mod:`~patchsync.tail.grpc_source`) and a log served over HTTP
(:mod:`~patchsync.tail.http_source`) all hand the daemon one whole patch per message at a
position (stream sequence or version) that the applier checkpoints in the target's
transaction (``offset`` = position). :class:`NetworkSource` holds what follows from that
alike for the three: the resume bookkeeping, decoding each message whole before any of it
reaches the applier, pausing the applier (committing) at most every ``PAUSE_SECONDS`` while
a backlog is worked through, and losing, failing and closing. A subclass says how it
connects and resumes (``open``), reads (``_pump``), reports lag and disconnects.

A served log (gRPC or HTTP door) numbers its patches by version, one patch each, and never
removes one. What follows from that is written once here for both clients
(:class:`ServedLog`): where a replica resumes (:func:`resume_version`) and the checkpoint of
a replica that holds the log up to a patch (:func:`checkpoint_at`, :func:`checkpoint_after`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import closing
from typing import Any, Protocol

from patchsync.apply.applier import Applier
from patchsync.apply.target import PAST, Checkpoint
from patchsync.errors import DecodeError
from patchsync.events import Event
from patchsync.sources import resolve_source
from patchsync.streams.payloads import MessageDecoder
from patchsync.streams.pull import StreamMessage
from patchsync.tail.follower import Follower, FollowerHost

#: Seconds a replica working through a backlog (full batches) may go without a pause of the
#: applier (its units commit in groups meanwhile; a pause also commits the last of them).
PAUSE_SECONDS = 1.0
#: Events of consecutive messages fed to the applier at a time, at most (a message's own
#: events go together whatever their number).
FEED_EVENTS = 8192
#: Seconds between two lag queries to the server (each is one or two requests).
LAG_SECONDS = 1.0


class ServedLog(Protocol):
    """What the daemon asks of a served log's client (``GrpcLog``, ``HttpLog``: the
    ``client`` role of their source kinds), beyond reading and appending."""

    def patch_id_at(self, version: int) -> str | None:
        """The id of the patch at ``version`` (``None`` if there is none)."""

    def version_of(self, patch_id: str) -> int | None:
        """The version of patch ``patch_id`` (``None`` if the log holds no such patch)."""

    def close(self) -> None:
        """Disconnect."""


def checkpoint_at(name: str, version: int, patch_id: str | None) -> Checkpoint:
    """The checkpoint of a replica of the served log ``name`` that applied every patch up to
    ``version`` whole, the last one ``patch_id``: the same whether the replica applied them
    or loaded a base holding them. Its fingerprint is the log's name, as the replica's own
    checkpoints have it."""
    return Checkpoint(version, PAST, PAST, version, patch_id, name, time.time())


def resume_version(log: ServedLog, stored: Checkpoint | None) -> int:
    """The version a replica at ``stored`` goes on from: the one after the checkpoint's when
    its patch was applied whole (the checkpoint's ``last_id`` is that patch's id), else the
    checkpoint's own (the applier passes over the units of it already applied)."""
    if stored is None:
        return 1
    if stored.last_id is not None and stored.offset >= 1 and log.patch_id_at(stored.offset) != stored.last_id:
        return stored.offset
    return stored.offset + 1


def checkpoint_after(source: str, patch_id: str) -> Checkpoint | None:
    """The checkpoint of a replica of the served log ``source`` that holds its patches up to
    ``patch_id`` (a base's head), so that it resumes at the next version; ``None`` when the
    log holds no such patch (the ``checkpoint_after`` role,
    :func:`patchsync.apply.base.address_checkpoints`)."""
    resolved = resolve_source(source)
    log: ServedLog = resolved.role("client")(resolved.address)
    with closing(log):
        version = log.version_of(patch_id)
    return None if version is None else checkpoint_at(str(resolved.address), version, patch_id)


class StreamHost(FollowerHost, Protocol):
    """What a stream source needs from the daemon running it: a file source's host, plus
    how long a fetch may wait."""

    @property
    def stream_wait(self) -> float:
        """Seconds a fetch may wait for new messages (0: caught up means done, ``--once``)."""


class NetworkSource(Follower):
    """One network log being tailed: next position to apply, applier, decoder, lag."""

    #: How the ``resume`` record names a position: ``from_seq``/``cp_seq`` for a stream.
    position_word = "version"

    def __init__(self, host: StreamHost, name: str) -> None:
        super().__init__(host, name)
        self.host: StreamHost = host
        self.report.applied_seq = 0
        self.report.lag_messages = 0
        self.applier: Applier | None = None
        self.decoder: MessageDecoder | None = None
        #: The position (stream sequence or version) of the next message to apply.
        self.next_seq = 1
        self._lag_at = -1e9
        self._paused_at = -1e9

    # -- opening and resuming ----------------------------------------------------------

    def open(self) -> None:
        """Connect and resume after the target's checkpoint."""
        raise NotImplementedError

    def _applier(self, fingerprint: str) -> tuple[Applier, Checkpoint | None]:
        """An applier of this source into the target, and the checkpoint to resume from."""
        target = self.host.target
        applier = Applier(
            target, source=self.name, fingerprint=fingerprint, chain=self.options.chain, reset=self.options.reset
        )
        stored = None if self.options.reset else target.checkpoint(self.name)
        return applier, stored

    def _resumed(self, applier: Applier, start: int, stored: Checkpoint | None) -> None:
        """Start applying at position ``start`` (connected) and log where from."""
        applier.result = self.report.result
        self.applier, self.next_seq = applier, start
        self.decoder = MessageDecoder(self.name, adapter=self.host.target.adapter, limits=self.options.limits)
        self.report.applied_seq = start - 1
        self.report.state = "live"
        self.report.resumed_from = start
        # A backlog's first commit comes a pause interval after the start, like the next ones.
        self._paused_at = time.monotonic()
        word = self.position_word
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
        raise NotImplementedError

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
    "FEED_EVENTS",
    "LAG_SECONDS",
    "PAUSE_SECONDS",
    "NetworkSource",
    "ServedLog",
    "StreamHost",
    "checkpoint_after",
    "checkpoint_at",
    "resume_version",
]
