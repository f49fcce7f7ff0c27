"""One served log being tailed over HTTP (``http(s)://HOST:PORT/NAME``): its change feed and applier.

The counterpart of :class:`~patchsync.tail.grpc_source.GrpcSource` for the HTTP door: the
daemon long-polls the change feed (``GET /NAME/changes?after=V&limit=N&wait=S``, binary
form), each patch a whole one-patch Jelly-Patch stream, decoded and checked whole before
any of it reaches the applier. The version is the position the applier checkpoints in the
target's transaction (``offset`` = version). A restart resumes after the checkpoint's
version when its patch was applied whole (the checkpoint's ``last_id`` is that patch's
id), and at that version otherwise, as a stream replica does.

A lost server (:class:`~patchsync.streams.errors.StreamUnavailable`) goes through the
daemon's reconnect path with its backoff; ``--once`` reads up to the head and stops.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from typing import Any

from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.target import Checkpoint
from patchsync.errors import DecodeError
from patchsync.streams.http_client import Feed, HttpLog, parse_http_url
from patchsync.streams.payloads import MessageDecoder
from patchsync.streams.pull import StreamMessage
from patchsync.tail.source import SourceReport
from patchsync.tail.state import lock_source
from patchsync.tail.stream_source import PAUSE_SECONDS, StreamHost

#: Patches asked for per request.
BATCH = 1000
#: Longest long poll of the change feed (the door's limit is higher).
MAX_WAIT = 30.0
#: Feed pages fetched ahead of the applier.
AHEAD = 2


class Prefetch:
    """Fetches the change feed's next pages on a thread while the applier works on the last
    one, so the server's reading and the target's writing overlap instead of taking turns.

    Pages are consecutive: each asks for the versions after the last one fetched. In
    ``--once`` mode (``wait`` 0) it stops after the first empty page (caught up).
    """

    def __init__(self, url: Any, after: int, wait: float) -> None:
        self._log = HttpLog(url)
        self._after = after
        self._wait = wait
        self._pages: queue.Queue[Feed | BaseException] = queue.Queue(AHEAD)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"feed {url}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._closed:
                page = self._log.feed(self._after, BATCH, self._wait)
                self._after += len(page.payloads)
                self._put(page)
                if not page.payloads and self._wait <= 0:
                    return
        except BaseException as exc:  # handed to the reader
            self._put(exc)

    def _put(self, item: Feed | BaseException) -> None:
        while not self._closed:
            try:
                self._pages.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def take(self, timeout: float) -> Feed | None:
        """The next page (``None`` when none came within ``timeout``)."""
        try:
            item = self._pages.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._closed = True
        self._log.close()


class HttpSource:
    """One served log being tailed: connection, next version to apply, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        self.host = host
        self.options = host.options
        self.url = parse_http_url(url)
        self.name = str(self.url)
        self.report = SourceReport(self.name, result=ApplyResult(source=self.name), applied_seq=0, lag_messages=0)
        self.log: HttpLog | None = None
        self.applier: Applier | None = None
        self.decoder: MessageDecoder | None = None
        self.next_version = 1
        self.finished = False
        self.failed = False
        self.last_snapshot = 0.0
        self.lock_fd: int | None = None
        self._paused_at = -1e9
        self._prefetch: Prefetch | None = None

    def open(self) -> None:
        """Connect, resume after the checkpoint."""
        if self.options.state_dir is not None and self.lock_fd is None:
            self.lock_fd = lock_source(self.options.state_dir, self.name)
        target = self.host.target
        log = HttpLog(self.url)
        try:
            head, _ = log.head()
            applier = Applier(
                target, source=self.name, fingerprint=self.name, chain=self.options.chain, reset=self.options.reset
            )
            stored = None if self.options.reset else target.checkpoint(self.name)
            start = 1
            if stored is not None:
                start = stored.offset + 1
                if (
                    stored.last_id is not None
                    and stored.offset >= 1
                    and log.patch_id_at(stored.offset) != stored.last_id
                ):
                    start = stored.offset  # that patch was not applied whole: read it again
        except BaseException:
            log.close()
            raise
        applier.result = self.report.result
        self.log, self.applier, self.next_version = log, applier, start
        self.decoder = MessageDecoder(self.name, adapter=target.adapter, limits=self.options.limits)
        self.report.applied_seq = start - 1
        self.report.lag_messages = max(0, head - (start - 1))
        self.report.state = "live"
        self.report.resumed_from = start
        fields: dict[str, Any] = {"source": self.name, "from_version": start}
        if stored is not None:
            fields |= {"cp_version": stored.offset, "cp_row": stored.row, "cp_patches": stored.patches}
        self.host.log("resume", fields)

    def pump(self, now: float) -> bool:
        """Apply the next patches of the feed; returns whether more may be waiting."""
        if self.failed:
            return False
        if self.applier is None:
            self.open()
        log, applier, decoder = self.log, self.applier, self.decoder
        assert log is not None and applier is not None and decoder is not None
        wait = min(self.host.stream_wait, MAX_WAIT)
        if self._prefetch is None:
            self._prefetch = Prefetch(self.url, self.next_version - 1, wait)
        feed = self._prefetch.take(max(wait, 0) + 10.0)
        if feed is None:
            return False
        version = feed.first
        for payload in feed.payloads:
            if self.host.stopping:
                break
            try:
                events = decoder.decode(StreamMessage(version, 0.0, {}, payload))
            except DecodeError:
                applier.pause()
                self.report.applied_seq = self.next_version - 1
                raise
            applier.feed(events)
            self.next_version = version + 1
            version += 1
        progressed = bool(feed.payloads)
        self.report.lag_messages = max(0, feed.head - (self.next_version - 1))
        backlog = self.next_version - 1 < feed.head and not self.host.stopping
        if backlog and time.monotonic() - self._paused_at < PAUSE_SECONDS:
            return True
        self._paused_at = time.monotonic()
        if applier.pause():
            self.report.applied_seq = self.next_version - 1
            if progressed:
                self.host.target_progressed()
        self.report.size = feed.head
        self.report.applied_end = self.report.applied_seq or 0
        if progressed:
            self.host.log("applied", self.report.as_dict())
        return backlog

    def save_snapshot(self, now: float) -> None:
        """Nothing to save: a patch decodes on its own, the checkpoint is the position."""
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
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            prefetch.close()
        log, self.log = self.log, None
        if log is not None:
            log.close()

    def close(self) -> None:
        self._disconnect()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def checkpoint_after(address: str, head: str) -> Checkpoint | None:
    """A replica's checkpoint of the served log ``address`` just past patch ``head`` (the
    version the log holds it at), or ``None`` when the log does not hold it (``--base`` of a
    snapshot taken elsewhere, :func:`patchsync.apply.base.address_checkpoints`)."""
    with HttpLog(address) as log:
        version = log.version_of(head)
    return None if version is None else Checkpoint(version, 0, 0, version, head, None)


__all__ = ["HttpSource", "checkpoint_after"]
