"""What wakes the daemon: a self-pipe (signals, other threads) and watchdog's file observer.

The main loop sleeps in ``select`` on the pipe with a timeout, so an idle daemon costs
nothing; the file observer's thread and the signal handlers write a byte to it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any


class Waker:
    """A self-pipe: :meth:`wake` from any thread or a signal handler ends a :meth:`wait`."""

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def wake(self) -> None:
        """End the current or next :meth:`wait` (safe from a signal handler)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._w, b"\0")

    def wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout`` seconds pass."""
        with contextlib.suppress(InterruptedError):
            select.select([self._r], [], [], timeout)
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._r, 4096):
                pass

    def close(self) -> None:
        for fd in (self._r, self._w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._r = self._w = -1


class DirectoryWatch:
    """Calls ``on_change`` from watchdog's thread whenever something changes in ``dirs``.

    ``poll`` uses the polling observer (network mounts); inotify failing to start (its
    limits, a file system without notifications) falls back to it. Without watchdog
    installed nothing is watched and the daemon wakes every poll interval instead.
    """

    def __init__(self, dirs: Iterable[str], on_change: Callable[[], None], *, poll: bool, interval: float) -> None:
        self.dirs = sorted(set(dirs))
        self.on_change = on_change
        self.poll = poll
        self.interval = interval
        self._observer: Any = None
        self._handler: Any = None

    @property
    def kind(self) -> str:
        """The observer's class name, ``"none"`` when nothing is watched."""
        return type(self._observer).__name__ if self._observer is not None else "none"

    def start(self) -> None:
        try:
            from watchdog.events import FileSystemEvent, FileSystemEventHandler
            from watchdog.observers import Observer
            from watchdog.observers.polling import PollingObserver
        except ImportError:
            return
        on_change = self.on_change

        class _Wake(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                on_change()

        # A directory that does not exist yet is watched once it appears (add).
        existing = [d for d in self.dirs if os.path.isdir(d)]
        handler = self._handler = _Wake()
        observer: Any = PollingObserver(timeout=self.interval) if self.poll else Observer()
        try:
            for d in existing:
                observer.schedule(handler, d, recursive=False)
            observer.start()
        except OSError:
            observer = PollingObserver(timeout=self.interval)
            for d in existing:
                observer.schedule(handler, d, recursive=False)
            observer.start()
        self._observer = observer

    def add(self, directory: str) -> None:
        """Watch ``directory`` too (one that appeared after the start); once is enough."""
        if directory in self.dirs:
            return
        self.dirs.append(directory)
        if self._observer is not None:
            with contextlib.suppress(OSError):  # gone again: the poll interval still wakes the loop
                self._observer.schedule(self._handler, directory, recursive=False)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None


@contextlib.contextmanager
def stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` takes SIGTERM and SIGINT for as long as this lasts (in the main thread only,
    where Python delivers signals), then the handlers before it are put back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


__all__ = ["DirectoryWatch", "Waker", "stop_signals"]
