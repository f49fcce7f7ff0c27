"""Reading a remote log ahead of the applier: the one read-ahead thread.

A replica's loop alternates reading the log and writing the target. A thread that reads the
next pages (:meth:`~.interface.RemoteLog.pages`) into a small bounded queue while the applier
works on the last ones makes the server's reading and the target's writing overlap instead
of taking turns. It reads through a connection of its own (``connect()``), so closing it ends
a long poll or a stream the thread is blocked in. A log that reads ahead by itself
(``reads_ahead``: NATS's pull consumer asks for the next messages while the caller applies)
is read on the caller's thread instead (:class:`DirectPages`): a second thread would only add
a hop.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator
from typing import Protocol

from patchsync.logs.payloads import StreamMessage
from patchsync.remote.interface import RemoteLog

#: Pages held ahead of the applier.
AHEAD = 4


class Pages(Protocol):
    """The pages of a log after a position, as a replica's loop takes them."""

    #: The pages ended (``--once``: the head was reached); nothing more will come.
    ended: bool
    #: The server answered once (a page, empty or not, or the end), not only an error.
    answered: bool

    def take(self, limit: int, wait: float) -> list[StreamMessage]:
        """The messages of the next pages (at least ``limit`` if that many are ready),
        waiting up to ``wait`` seconds for the first page."""

    def close(self) -> None:
        """Stop reading."""


class DirectPages:
    """The pages of a log read on the caller's thread, one page per :meth:`take`."""

    def __init__(self, log: RemoteLog, after: int, wait: float) -> None:
        self._pages = log.pages(after, wait)
        self.ended = False
        self.answered = False

    def take(self, limit: int, wait: float) -> list[StreamMessage]:
        del limit, wait  # a page is the log's own; its wait was given on opening
        if self.ended:
            return []
        page = next(self._pages, None)
        self.answered = True
        if page is None:
            self.ended = True
            return []
        return page

    def close(self) -> None:
        self._pages.close()


class ReadAhead:
    """The pages of a log read by a background thread into a bounded queue (``AHEAD``)."""

    _END = object()

    def __init__(self, connect: Callable[[], RemoteLog], after: int, wait: float, *, name: str = "") -> None:
        self._log = connect()
        self._pages: Generator[list[StreamMessage]] = self._log.pages(after, wait)
        self._queue: queue.Queue[object] = queue.Queue(AHEAD)
        self._closed = False
        self.ended = False
        self.answered = False
        self._thread = threading.Thread(target=self._run, name=f"read ahead {name or self._log.url}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for page in self._pages:
                if not self._put(page):
                    return
        except BaseException as exc:  # handed to the reader
            if self._closed:
                return
            self._put(exc)
            return
        self._put(self._END)

    def _put(self, item: object) -> bool:
        # A timeout, so that a full queue nobody takes from any more cannot hold the thread.
        while not self._closed:
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def take(self, limit: int, wait: float) -> list[StreamMessage]:
        out: list[StreamMessage] = []
        if self.ended:
            return out  # nothing follows the end: no wait
        try:
            item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
        except queue.Empty:
            return out
        while True:
            self.answered |= not isinstance(item, BaseException)
            if item is self._END:
                self.ended = True
                return out
            if isinstance(item, BaseException):
                if out:  # the messages before it first; the error comes with the next take
                    self._requeue(item)
                    return out
                raise item
            assert isinstance(item, list)
            out.extend(item)
            if len(out) >= limit:
                return out
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return out

    def _requeue(self, item: object) -> None:
        # Only the thread adds to the queue, and it stopped after this item: there is room.
        self._queue.put_nowait(item)

    def close(self) -> None:
        """Stop the thread: its connection is closed, which ends what it waits for."""
        self._closed = True
        self._log.close()


def open_pages(log: RemoteLog, connect: Callable[[], RemoteLog], after: int, wait: float) -> Pages:
    """The pages of ``log`` after ``after``: read ahead on a thread of their own (through a
    connection ``connect()`` makes), unless the log reads ahead itself."""
    if log.reads_ahead:
        return DirectPages(log, after, wait)
    return ReadAhead(connect, after, wait, name=str(log.url))


__all__ = ["AHEAD", "DirectPages", "Pages", "ReadAhead", "open_pages"]
