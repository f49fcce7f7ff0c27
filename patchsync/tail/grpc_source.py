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

from typing import Any

from patchsync.apply.target import Checkpoint
from patchsync.errors import PatchsyncError
from patchsync.streams.grpc_client import GrpcLog, Subscription, parse_grpc_url
from patchsync.streams.nats_log import MSG_ID
from patchsync.streams.pull import StreamMessage
from patchsync.tail.network_source import NetworkSource, StreamHost, resume_version
from patchsync.tail.stream_source import BATCH


class GrpcSource(NetworkSource):
    """One served topic being tailed: subscription, next version to apply, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        self.url = parse_grpc_url(url)
        super().__init__(host, str(self.url))
        self.log: GrpcLog | None = None
        self.subscription: Subscription | None = None

    def open(self) -> None:
        """Connect, resume after the checkpoint, subscribe."""
        self._lock()
        log = GrpcLog(self.url)
        try:
            info = log.describe()
            applier, stored = self._applier(self.name)
            start = resume_version(log, stored)
            follow = self.host.stream_wait > 0
            subscription = Subscription(log, start - 1, follow=follow)
        except BaseException:
            log.close()
            raise
        self.log, self.subscription = log, subscription
        self.report.lag_messages = max(0, int(info.version) - (start - 1))
        self._resumed(applier, start, stored)

    def _pump(self, now: float) -> bool:
        subscription = self.subscription
        assert subscription is not None
        wait = self.host.stream_wait
        messages = subscription.take(BATCH, wait if wait > 0 else 1.0)
        self._apply(
            StreamMessage(message.version, 0.0, {MSG_ID: message.patch_id}, message.patch)
            for message in messages
            if message.version >= self.next_seq
        )
        progressed = bool(messages)
        if not self._pause(progressed=progressed, backlog=len(messages) >= BATCH and not self.host.stopping):
            return True
        self._update_lag(now, force=subscription.ended)
        if progressed:
            self.host.log("applied", self.report.as_dict())
        if wait <= 0 and subscription.ended and not messages:
            return False
        return progressed or (wait <= 0 and not subscription.ended)

    def _update_lag(self, now: float, *, force: bool) -> None:
        if self.log is None or not self._lag_due(now, force=force):
            return
        applied = self.report.applied_seq or 0
        version = int(self.log.describe().version)
        self.report.lag_messages = max(0, version - applied)
        self.report.size = version
        self.report.applied_end = applied

    def _disconnect(self) -> None:
        subscription, self.subscription = self.subscription, None
        if subscription is not None:
            subscription.close()
        log, self.log = self.log, None
        if log is not None:
            log.close()


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


__all__ = ["GrpcSource", "grpc_lag"]
