"""One patch stream being tailed (``nats://HOST:PORT/STREAM``): its reader and applier.

The stream counterpart of :class:`~patchsync.tail.file_follower.FileFollower`, driven by the same
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

from typing import Any

from patchsync.apply.target import Checkpoint
from patchsync.streams.nats_log import MSG_ID, NatsLog
from patchsync.streams.url import StreamURL, parse_stream_url
from patchsync.tail.network_source import NetworkSource, StreamHost

#: Messages fetched per request.
BATCH = 256
#: Per-request deadline of the daemon's connection: a lost server is noticed within it.
REQUEST_TIMEOUT = 2.0


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


class StreamSource(NetworkSource):
    """One stream being tailed: connection, next sequence to read, applier, lag."""

    position_word = "seq"

    def __init__(self, host: StreamHost, url: str) -> None:
        self.url = parse_stream_url(url)
        super().__init__(host, str(self.url))
        self.log: NatsLog | None = None
        #: The stream's last sequence when last asked (``--once``): asked again only when
        #: the replica gets past it, not before every fetch (a request each).
        self._known_last = 0

    def open(self) -> None:
        """Connect, check the stream is the one the checkpoint was taken on, and resume."""
        self._lock()
        log = open_stream(self.url)
        try:
            # Name and creation time: a stream deleted and made again is another log,
            # refused by the applier's fingerprint check (or started over with reset).
            applier, stored = self._applier(log.fingerprint())
            start = applied_seq(log, stored) + 1
        except BaseException:
            log.close()
            raise
        self.log = log
        self._resumed(applier, start, stored)

    def _pump(self, now: float) -> bool:
        log = self.log
        assert log is not None
        wait = self.host.stream_wait
        if wait <= 0 and self.next_seq > self._known_last:
            self._known_last = log.last_seq()
            if self.next_seq > self._known_last:
                # --once: caught up with the stream as it is now.
                self._update_lag(now, force=True)
                return False
        messages = log.fetch(self.next_seq, BATCH, timeout=wait if wait > 0 else REQUEST_TIMEOUT)
        self._apply(messages)
        progressed = bool(messages)
        # A backlog: a full batch, or (--once) messages known to follow those applied.
        backlog = len(messages) == BATCH or self.next_seq <= self._known_last
        if not self._pause(progressed=progressed, backlog=backlog and not self.host.stopping):
            return True
        # At most once a second: asking costs requests that a busy replica needs for fetching.
        self._update_lag(now, force=False)
        if progressed:
            self.host.log("applied", self.report.as_dict())
        return progressed

    def _update_lag(self, now: float, *, force: bool) -> None:
        """Ask the server how far behind the replica is, at most every ``LAG_SECONDS``."""
        if self.log is None or not self._lag_due(now, force=force):
            return
        applied = self.report.applied_seq or 0
        lag = self.log.lag(applied)
        self.report.lag_messages = lag.messages
        self.report.lag_seconds = lag.seconds
        self.report.size = applied + lag.messages
        self.report.applied_end = applied

    def _disconnect(self) -> None:
        log, self.log = self.log, None
        if log is not None:
            log.close()


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


def check_stream(source: str) -> None:
    """Refuse a stream ``source`` that does not exist (:class:`StreamNotFound`), before a replica
    of it is created; a server out of reach tells nothing yet (the daemon waits for it)."""
    from patchsync.streams.errors import StreamUnavailable

    try:
        with NatsLog(source, connect_timeout=1.0, request_timeout=2.0, reconnect_attempts=1) as log:
            log.ensure_stream(create=False)
    except StreamUnavailable:
        return


__all__ = ["BATCH", "StreamHost", "StreamSource", "applied_seq", "check_stream", "open_stream", "stream_lag"]
