"""The one interface of a remote patch log: what a NATS stream, a gRPC topic and a log served
over HTTP all are, seen from a reader or a writer.

A remote log holds whole patches, one per message, each at a position (a stream sequence or
a version, from 1, consecutive for a served log) and named by its patch id. Four operations
make it (as httpx's ``BaseTransport.handle_request`` makes a transport):

- :meth:`RemoteLog.head`: the last position, its patch id and (if the server keeps it) when
  it was stored;
- :meth:`RemoteLog.read`: the messages after a position;
- :meth:`RemoteLog.append`: one patch, stored only if its ``prev`` is the head (the chain
  rule, checked by the server: a :class:`~patchsync.errors.ChainError` otherwise), a patch
  the log holds already acknowledged as a duplicate;
- :meth:`RemoteLog.close`.

:meth:`~RemoteLog.patch_id_at`, :meth:`~RemoteLog.position_of` and
:meth:`~RemoteLog.published_at` answer the questions of resuming, of a base's checkpoint and
of lag; :meth:`~RemoteLog.pages` and :meth:`~RemoteLog.append_all` have default forms
written over the four operations, which a client overrides when its protocol streams
(gRPC). The rules written on top of this interface, once for every kind, are in
:mod:`.rules` (resume, lag), :mod:`.publish` (the publish loop), :mod:`.read_ahead` (the
read-ahead thread) and :mod:`.writer` (a recorder's writer). :class:`MemoryLog` is a real
in-memory remote log, the reference the rules are tested against.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Self

from patchsync.errors import ChainError
from patchsync.logs.payloads import MSG_ID, PatchMessage, StreamMessage

#: Messages a page asks for by default.
PAGE = 256


@dataclass(frozen=True, slots=True)
class LogHead:
    """A log's last message: its position (``seq``: 0 when the log is empty), patch id and
    the time it was stored (``None`` when the server keeps no times)."""

    seq: int
    patch_id: str | None
    published: float | None = None


@dataclass(frozen=True, slots=True)
class Appended:
    """The server's answer to one appended patch: its position, and whether the log held it
    already (nothing was stored)."""

    seq: int
    duplicate: bool


@dataclass(frozen=True, slots=True)
class LogLag:
    """How far a reader is behind: messages not yet applied, and the age of the oldest."""

    messages: int
    seconds: float


class RemoteLog(ABC):
    """A connection to one remote patch log (see the module docstring). Use as a context
    manager or call :meth:`close`; one thread at a time."""

    #: The log's address (``str()`` of it is what messages name; it never shows a password).
    url: object

    #: How a replica's ``resume`` record names a position (``from_version``, ``cp_version``).
    position_word = "version"
    #: Messages a page of :meth:`pages` asks for.
    page_size = PAGE

    @property
    def reads_ahead(self) -> bool:
        """Whether :meth:`read` already works ahead of its caller (NATS's pull consumer): such a
        log is read on the caller's thread, the others through :class:`~.read_ahead.ReadAhead`."""
        return False

    @abstractmethod
    def head(self) -> LogHead:
        """The log's last message (``seq`` 0 and no id when it is empty)."""

    @abstractmethod
    def read(self, after: int, limit: int, wait: float) -> list[StreamMessage]:
        """Up to ``limit`` messages after position ``after``, in order; when there are none
        yet, waits up to ``wait`` seconds for the first (an empty list: none came)."""

    @abstractmethod
    def append(self, message: PatchMessage) -> Appended:
        """Store one patch if it follows the head (its ``prev`` is the head's patch id);
        a patch the log holds already is a duplicate. A :class:`~patchsync.errors.ChainError`
        naming the patch and the head otherwise, with nothing stored."""

    @abstractmethod
    def patch_id_at(self, position: int) -> str | None:
        """The id of the patch at ``position``: ``""`` for a message without one, ``None``
        when the log holds nothing there (never did, or removed by retention)."""

    @abstractmethod
    def close(self) -> None:
        """Disconnect (a log whose connection is gone closes without an error)."""

    def position_of(self, patch_id: str) -> int | None:
        """The position of patch ``patch_id`` (``None`` if the log holds no such patch).

        The default reads the log from its start; a server that can look a patch up
        answers itself.
        """
        head = self.head()
        if head.patch_id == patch_id:
            return head.seq
        after = 0
        while after < head.seq:
            messages = self.read(after, PAGE, 0.0)
            if not messages:
                return None
            for message in messages:
                if message.headers.get(MSG_ID) == patch_id:
                    return message.seq
            after = messages[-1].seq
        return None

    def published_at(self, position: int) -> float | None:
        """When the message at ``position`` was stored (``None``: unknown, or no message)."""
        del position
        return None

    def fingerprint(self) -> str:
        """What names this log in a replica's checkpoint (a log made again under the same
        address restarts its positions: a server that can tell says so here)."""
        return str(self.url)

    def writable(self) -> None:
        """Refuse (:class:`~patchsync.errors.UsageError`) a log that cannot be appended to."""
        return None  # a log is writable unless its server says otherwise

    def pages(self, after: int, wait: float) -> Generator[list[StreamMessage]]:
        """The messages after ``after``, a page at a time, following the log when ``wait`` is
        above 0 (an empty page: nothing came within ``wait`` seconds) and ending at the head
        as it is when reached otherwise (``--once``).

        The head is asked for only when the reader gets past the last one known, not before
        every page.
        """
        known = 0
        while True:
            if wait <= 0 and after >= known:
                known = self.head().seq
                if after >= known:
                    return
            messages = self.read(after, self.page_size, wait)
            if messages:
                after = messages[-1].seq
            yield messages

    def append_all(
        self,
        messages: Iterable[PatchMessage],
        on_appended: Callable[[PatchMessage, Appended], None] | None = None,
    ) -> tuple[int, int]:
        """Append each patch in turn (:meth:`append`); how many were stored and how many the
        log held already. ``on_appended`` is called with each answer (a client that streams
        the patches, answered once at the end, does not call it)."""
        stored = duplicates = 0
        for message in messages:
            result = self.append(message)
            if result.duplicate:
                duplicates += 1
            else:
                stored += 1
            if on_appended is not None:
                on_appended(message, result)
        return stored, duplicates

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryLog(RemoteLog):
    """A remote log held in memory: the reference implementation of :class:`RemoteLog`
    (positions from 1, the chain rule and duplicates as a server checks them), for tests
    and for a caller's own experiments. ``keep_times`` records when each patch was stored.
    """

    def __init__(self, name: str = "memory:log", *, keep_times: bool = True) -> None:
        self.url = name
        self.messages: list[StreamMessage] = []
        #: Positions below this are removed (retention): ``drop_before`` moves it.
        self.first = 1
        self.keep_times = keep_times
        self.closed = False

    def _held(self) -> list[StreamMessage]:
        return self.messages[self.first - 1 :]

    def head(self) -> LogHead:
        if not self.messages:
            return LogHead(0, None, None)
        last = self.messages[-1]
        return LogHead(last.seq, last.headers.get(MSG_ID), last.published if self.keep_times else None)

    def read(self, after: int, limit: int, wait: float) -> list[StreamMessage]:
        del wait  # nothing arrives while a single thread waits
        return [m for m in self._held() if m.seq > after][:limit]

    def append(self, message: PatchMessage) -> Appended:
        for held in self.messages:
            if held.headers.get(MSG_ID) == message.patch_id:
                return Appended(held.seq, duplicate=True)
        head = self.head()
        if message.prev != head.patch_id:
            raise ChainError(
                f"{self.url}: patch {message.patch_id} does not follow the head: its prev is "
                f"{message.prev or '(none)'}, the head is {head.patch_id or '(empty)'}"
            )
        seq = len(self.messages) + 1
        self.messages.append(StreamMessage(seq, time.time(), {MSG_ID: message.patch_id}, message.payload))
        return Appended(seq, duplicate=False)

    def patch_id_at(self, position: int) -> str | None:
        if position < self.first or position > len(self.messages):
            return None
        return self.messages[position - 1].headers.get(MSG_ID, "")

    def published_at(self, position: int) -> float | None:
        if not self.keep_times or position < self.first or position > len(self.messages):
            return None
        return self.messages[position - 1].published

    def drop_before(self, position: int) -> None:
        """Remove the messages before ``position``, as a stream's retention does."""
        self.first = max(self.first, position)

    def close(self) -> None:
        self.closed = True


__all__ = ["PAGE", "Appended", "LogHead", "LogLag", "MemoryLog", "RemoteLog"]
