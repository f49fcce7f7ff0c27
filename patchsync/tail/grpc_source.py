"""One served topic being tailed (``grpc://HOST:PORT/TOPIC``): its subscription and applier.

The counterpart of :class:`~patchsync.tail.stream_source.StreamSource` for a topic of
``patchsync serve``: each message is one whole patch with its version, decoded and checked
whole before any of it reaches the applier, and the version is the position the applier
checkpoints in the target's transaction (``offset`` = version). A restart resumes after
the checkpoint's version when its patch was applied whole (the checkpoint's ``last_id`` is
that patch's id), and at that version otherwise, as a stream replica does.

A lost server (:class:`~patchsync.streams.errors.StreamUnavailable`) goes through the
daemon's reconnect path with its backoff; ``--once`` subscribes up to the head and stops.
"""

from __future__ import annotations

import os
import time
from typing import Any

from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.target import Checkpoint
from patchsync.errors import DecodeError, PatchsyncError
from patchsync.streams.grpc_client import GrpcLog, Subscription, parse_grpc_url
from patchsync.streams.nats_log import MSG_ID
from patchsync.streams.payloads import MessageDecoder
from patchsync.streams.pull import StreamMessage
from patchsync.tail.source import SourceReport
from patchsync.tail.state import lock_source
from patchsync.tail.stream_source import BATCH, LAG_SECONDS, PAUSE_SECONDS, StreamHost

#: A frame and row past any of a message's events.
PAST = 1 << 62


class GrpcSource:
    """One served topic being tailed: subscription, next version to apply, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        self.host = host
        self.options = host.options
        self.url = parse_grpc_url(url)
        self.name = str(self.url)
        self.report = SourceReport(self.name, result=ApplyResult(source=self.name), applied_seq=0, lag_messages=0)
        self.log: GrpcLog | None = None
        self.subscription: Subscription | None = None
        self.applier: Applier | None = None
        self.decoder: MessageDecoder | None = None
        self.next_version = 1
        self.finished = False
        self.failed = False
        self.last_snapshot = 0.0
        self.lock_fd: int | None = None
        self._lag_at = -1e9
        self._paused_at = -1e9

    def open(self) -> None:
        """Connect, resume after the checkpoint, subscribe."""
        if self.options.state_dir is not None and self.lock_fd is None:
            self.lock_fd = lock_source(self.options.state_dir, self.name)
        target = self.host.target
        log = GrpcLog(self.url)
        try:
            info = log.describe()
            applier = Applier(
                target, source=self.name, fingerprint=self.name, chain=self.options.chain, reset=self.options.reset
            )
            stored = None if self.options.reset else target.checkpoint(self.name)
            start = 1
            if stored is not None:
                start = stored.offset + 1
                if stored.last_id is not None and stored.offset >= 1:
                    first = next(iter(log.subscribe(stored.offset - 1, follow=False)), None)
                    if first is not None and first.patch_id != stored.last_id:
                        start = stored.offset  # that patch was not applied whole: read it again
            follow = self.host.stream_wait > 0
            subscription = Subscription(log, start - 1, follow=follow)
        except BaseException:
            log.close()
            raise
        applier.result = self.report.result
        self.log, self.applier, self.subscription, self.next_version = log, applier, subscription, start
        self.decoder = MessageDecoder(self.name, adapter=target.adapter, limits=self.options.limits)
        self.report.applied_seq = start - 1
        self.report.lag_messages = max(0, int(info.version) - (start - 1))
        self.report.state = "live"
        self.report.resumed_from = start
        fields: dict[str, Any] = {"source": self.name, "from_version": start}
        if stored is not None:
            fields |= {"cp_version": stored.offset, "cp_row": stored.row, "cp_patches": stored.patches}
        self.host.log("resume", fields)

    def pump(self, now: float) -> bool:
        """Apply the next messages; returns whether more may be waiting."""
        if self.failed:
            return False
        if self.applier is None:
            self.open()
        applier, decoder, subscription = self.applier, self.decoder, self.subscription
        assert applier is not None and decoder is not None and subscription is not None
        wait = self.host.stream_wait
        messages = subscription.take(BATCH, wait if wait > 0 else 1.0)
        for message in messages:
            if self.host.stopping:
                break
            if message.version < self.next_version:
                continue
            stream_message = StreamMessage(message.version, 0.0, {MSG_ID: message.patch_id}, message.patch)
            try:
                events = decoder.decode(stream_message)
            except DecodeError:
                applier.pause()
                self.report.applied_seq = self.next_version - 1
                raise
            applier.feed(events)
            self.next_version = message.version + 1
        progressed = bool(messages)
        backlog = len(messages) >= BATCH and not self.host.stopping
        if backlog and time.monotonic() - self._paused_at < PAUSE_SECONDS:
            return True
        self._paused_at = time.monotonic()
        if applier.pause():
            self.report.applied_seq = self.next_version - 1
            if progressed:
                self.host.target_progressed()
        self._update_lag(now, force=subscription.ended)
        if progressed:
            self.host.log("applied", self.report.as_dict())
        if wait <= 0 and subscription.ended and not messages:
            return False
        return progressed or (wait <= 0 and not subscription.ended)

    def _update_lag(self, now: float, *, force: bool) -> None:
        if self.log is None or (not force and now - self._lag_at < LAG_SECONDS):
            return
        self._lag_at = now
        applied = self.report.applied_seq or 0
        version = int(self.log.describe().version)
        self.report.lag_messages = max(0, version - applied)
        self.report.size = version
        self.report.applied_end = applied

    def save_snapshot(self, now: float) -> None:
        """Nothing to save: a message decodes on its own, the checkpoint is the position."""
        self.last_snapshot = now

    def reset(self) -> None:
        """Drop the connection and applier (target or server lost); the next pass reconnects."""
        if self.failed:
            return
        self._disconnect()
        self.applier = None
        self.report.state = "starting"

    def fail(self, exc: BaseException) -> None:
        self.failed = True
        self.report.state = "failed"
        self.report.error = str(exc)
        self.close()

    def _disconnect(self) -> None:
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.close()
        log, self.log = self.log, None
        if log is not None:
            log.close()

    def close(self) -> None:
        self._disconnect()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def checkpoint_after(source: str, patch_id: str) -> Checkpoint | None:
    """The checkpoint of a replica that holds the topic's patches up to ``patch_id`` (a base's
    head): the tail resumes at the next version. ``None`` when the topic holds no such patch."""
    url = parse_grpc_url(source)
    with GrpcLog(url) as log:
        version = log.version_of(patch_id)
    if version is None:
        return None
    # Every event of that version counts as applied: resuming starts at the next one.
    return Checkpoint(version, PAST, PAST, version, patch_id, str(url), time.time())


def grpc_lag(source: str, checkpoint: Checkpoint) -> dict[str, Any]:
    """How many patches a replica at ``checkpoint`` is behind the topic, for ``patchsync status``.

    ``{"lag_messages": N, "lag_seconds": 0.0}`` (the server keeps no append times), or
    ``{"lag_error": "..."}`` when the server cannot be asked.
    """
    try:
        with GrpcLog(source, timeout=2.0) as log:
            version = int(log.describe().version)
    except PatchsyncError as exc:
        return {"lag_error": str(exc)}
    return {"lag_messages": max(0, version - checkpoint.offset), "lag_seconds": 0.0}


__all__ = ["GrpcSource", "checkpoint_after", "grpc_lag"]
