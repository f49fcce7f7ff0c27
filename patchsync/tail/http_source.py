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

import queue
import threading
from typing import Any

from patchsync.streams.http_client import Feed, HttpLog, parse_http_url
from patchsync.streams.pull import StreamMessage
from patchsync.tail.network_source import NetworkSource, StreamHost, resume_version

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


class HttpSource(NetworkSource):
    """One served log being tailed: connection, next version to apply, applier, lag."""

    def __init__(self, host: StreamHost, url: str) -> None:
        self.url = parse_http_url(url)
        super().__init__(host, str(self.url))
        self.log: HttpLog | None = None
        self._prefetch: Prefetch | None = None

    def open(self) -> None:
        """Connect, resume after the checkpoint."""
        self._lock()
        log = HttpLog(self.url)
        try:
            head, _ = log.head()
            applier, stored = self._applier(self.name)
            start = resume_version(log, stored)
        except BaseException:
            log.close()
            raise
        self.log = log
        self.report.lag_messages = max(0, head - (start - 1))
        self._resumed(applier, start, stored)

    def _pump(self, now: float) -> bool:
        """Apply the next patches of the feed."""
        wait = min(self.host.stream_wait, MAX_WAIT)
        if self._prefetch is None:
            self._prefetch = Prefetch(self.url, self.next_seq - 1, wait)
        feed = self._prefetch.take(max(wait, 0) + 10.0)
        if feed is None:
            return False
        self._apply(StreamMessage(feed.first + i, 0.0, {}, payload) for i, payload in enumerate(feed.payloads))
        progressed = bool(feed.payloads)
        self.report.lag_messages = max(0, feed.head - (self.next_seq - 1))
        backlog = self.next_seq - 1 < feed.head and not self.host.stopping
        if not self._pause(progressed=progressed, backlog=backlog):
            return True
        self.report.size = feed.head
        self.report.applied_end = self.report.applied_seq or 0
        if progressed:
            self.host.log("applied", self.report.as_dict())
        return backlog

    def _disconnect(self) -> None:
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:
            prefetch.close()
        log, self.log = self.log, None
        if log is not None:
            log.close()


__all__ = ["HttpSource"]
