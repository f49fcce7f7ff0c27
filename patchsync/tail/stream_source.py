"""One patch stream being tailed (``nats://HOST:PORT/STREAM``): its reader and applier.

The stream counterpart of :class:`~patchsync.tail.source.Source`, driven by the same
:class:`~patchsync.tail.tailer.Tailer` loop. Each message is one whole patch
(:mod:`patchsync.streams.payloads`), decoded and checked whole (as by
:func:`~patchsync.streams.decode_message`) before any of it reaches the applier, so a
malformed message stops the replica exactly before it, with nothing of it applied.

Position: the events of message ``N`` carry ``offset = N`` and ``row`` = their index in the
message, so the checkpoint the applier writes in the same target transaction as each unit
is the stream sequence. A restart resumes from ``checkpoint + 1`` when the checkpoint's
message was applied whole (the checkpoint's ``last_id`` is that message's id), and
re-reads the checkpoint's own message otherwise (a patch of several transactions
interrupted between two of them: the applier passes over the units already applied).

No decoder snapshots: every message decodes on its own, so resuming costs one fetch
whatever the stream's length. The server being out of reach (:class:`StreamUnavailable`,
a :class:`~patchsync.errors.TargetUnavailable`) goes through the daemon's reconnect path
with its backoff, like a lost target; a gap (retention removed messages this replica
still needs) is fatal, with one line.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.target import Checkpoint
from patchsync.errors import DecodeError
from patchsync.streams.nats_log import MSG_ID, NatsLog
from patchsync.streams.payloads import MessageDecoder
from patchsync.streams.url import StreamURL, parse_stream_url
from patchsync.tail.source import SourceHost, SourceReport
from patchsync.tail.state import lock_source

#: Messages fetched per request.
BATCH = 256
#: Seconds a replica working through a backlog (full batches) may go without a pause of the
#: applier (its units commit in groups meanwhile; a pause also commits the last of them).
PAUSE_SECONDS = 1.0
#: Seconds between two lag queries to the server (each is one or two requests).
LAG_SECONDS = 1.0
#: Per-request deadline of the daemon's connection: a lost server is noticed within it.
REQUEST_TIMEOUT = 2.0


class StreamHost(SourceHost, Protocol):
    """What a stream source needs from the daemon running it: a file source's host, plus
    how long a fetch may wait."""

    @property
    def stream_wait(self) -> float:
        """Seconds a fetch may wait for new messages (0: caught up means done, ``--once``)."""


def open_stream(url: StreamURL | str) -> NatsLog:
    """The daemon's connection to a stream: short deadlines, a few reconnect attempts.

    Beyond those the daemon's own backoff takes over (it reopens the connection).
    """
    return NatsLog(url, connect_timeout=2.0, request_timeout=REQUEST_TIMEOUT, reconnect_attempts=3, read_ahead=True)


def applied_seq(log: NatsLog, checkpoint: Checkpoint | None) -> int:
    """The last sequence whose message a replica at ``checkpoint`` applied whole (0: none).

    The checkpoint's message was applied whole when its id is the checkpoint's
    ``last_id`` (the id of the last patch passed). A message removed since (retention)
    counts as applied: the applier's chain check refuses whatever does not follow.
    """
    if checkpoint is None:
        return 0
    seq = checkpoint.offset
    message = log.message(seq)
    if message is None:
        return seq
    if checkpoint.last_id is not None and message.headers.get(MSG_ID) == checkpoint.last_id:
        return seq
    return seq - 1


class StreamSource:
    """One stream being tailed: connection, next sequence to read, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        self.host = host
        self.options = host.options
        self.url = parse_stream_url(url)
        self.name = str(self.url)
        self.report = SourceReport(self.name, result=ApplyResult(source=self.name), applied_seq=0, lag_messages=0)
        self.log: NatsLog | None = None
        self.applier: Applier | None = None
        self.decoder: MessageDecoder | None = None
        self.next_seq = 1
        self.finished = False  # a stream never finishes; the Tailer reads the flag of files
        self.failed = False
        self.last_snapshot = 0.0
        self.lock_fd: int | None = None
        self._lag_at = -1e9
        self._paused_at = -1e9

    # -- opening and resuming ----------------------------------------------------------

    def open(self) -> None:
        """Connect, check the stream is the one the checkpoint was taken on, and resume."""
        if self.options.state_dir is not None and self.lock_fd is None:
            self.lock_fd = lock_source(self.options.state_dir, self.name)
        target = self.host.target
        log = open_stream(self.url)
        try:
            # Name and creation time: a stream deleted and made again is another log,
            # refused by the applier's fingerprint check (or started over with reset).
            fingerprint = log.fingerprint()
            applier = Applier(
                target, source=self.name, fingerprint=fingerprint, chain=self.options.chain, reset=self.options.reset
            )
            stored = None if self.options.reset else target.checkpoint(self.name)
            start = applied_seq(log, stored) + 1
        except BaseException:
            log.close()
            raise
        applier.result = self.report.result
        self.log, self.applier, self.next_seq = log, applier, start
        self.decoder = MessageDecoder(self.name, adapter=target.adapter, limits=self.options.limits)
        self.report.applied_seq = start - 1
        self.report.state = "live"
        self.report.resumed_from = start
        fields: dict[str, Any] = {"source": self.name, "from_seq": start}
        if stored is not None:
            fields |= {"cp_seq": stored.offset, "cp_row": stored.row, "cp_patches": stored.patches}
        self.host.log("resume", fields)

    # -- one pass ----------------------------------------------------------------------

    def pump(self, now: float) -> bool:
        """Fetch, check and apply the next messages; returns whether more may be waiting."""
        if self.failed:
            return False
        if self.applier is None:
            self.open()
        log, applier, decoder = self.log, self.applier, self.decoder
        assert log is not None and applier is not None and decoder is not None
        wait = self.host.stream_wait
        if wait <= 0 and self.next_seq > log.last_seq():
            # --once: caught up with the stream as it is now.
            self._update_lag(now, force=True)
            return False
        messages = log.fetch(self.next_seq, BATCH, timeout=wait if wait > 0 else REQUEST_TIMEOUT)
        for message in messages:
            if self.host.stopping:
                break
            try:
                events = decoder.decode(message)
            except DecodeError:
                # Every message before it is applied and durable; nothing of this one is.
                applier.pause()
                self.report.applied_seq = self.next_seq - 1
                raise
            applier.feed(events)
            self.next_seq = message.seq + 1
        progressed = bool(messages)
        backlog = len(messages) == BATCH and not self.host.stopping
        if backlog and time.monotonic() - self._paused_at < PAUSE_SECONDS:
            # More is waiting: the units read so far join those of the next batch in the
            # applier's commit groups instead of a commit per fetch.
            return True
        self._paused_at = time.monotonic()
        if applier.pause():
            self.report.applied_seq = self.next_seq - 1
            if progressed:
                self.host.target_progressed()
        # At most once a second: asking costs requests that a busy replica needs for fetching.
        self._update_lag(now, force=False)
        if progressed:
            self.host.log("applied", self.report.as_dict())
        return progressed

    def _update_lag(self, now: float, *, force: bool) -> None:
        """Ask the server how far behind the replica is, at most every ``LAG_SECONDS``."""
        if self.log is None or (not force and now - self._lag_at < LAG_SECONDS):
            return
        self._lag_at = now
        applied = self.report.applied_seq or 0
        lag = self.log.lag(applied)
        self.report.lag_messages = lag.messages
        self.report.lag_seconds = lag.seconds
        self.report.size = applied + lag.messages
        self.report.applied_end = applied

    def save_snapshot(self, now: float) -> None:
        """Nothing to save: a message decodes on its own, the checkpoint is the position."""
        self.last_snapshot = now

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

    def fail(self, exc: BaseException) -> None:
        """Stop this source for good with ``exc`` as its error."""
        self.failed = True
        self.report.state = "failed"
        self.report.error = str(exc)
        self.close()

    def _disconnect(self) -> None:
        log, self.log = self.log, None
        if log is not None:
            log.close()

    def close(self) -> None:
        """Disconnect and release the lock."""
        self._disconnect()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def stream_lag(source: str, checkpoint: Checkpoint) -> dict[str, Any]:
    """How far a replica at ``checkpoint`` is behind the stream ``source``, for ``patchsync status``.

    ``{"lag_messages": N, "lag_seconds": S}``, or ``{"lag_error": "..."}`` when the server
    cannot be asked (it is out of reach, or the stream is gone): status must still answer.
    """
    from patchsync.errors import PatchsyncError

    try:
        with NatsLog(source, connect_timeout=1.0, request_timeout=2.0, reconnect_attempts=1) as log:
            lag = log.lag(applied_seq(log, checkpoint))
    except PatchsyncError as exc:
        return {"lag_error": str(exc)}
    return {"lag_messages": lag.messages, "lag_seconds": round(lag.seconds, 3)}


__all__ = ["BATCH", "StreamHost", "StreamSource", "applied_seq", "open_stream", "stream_lag"]
