"""Topics: the named logs and targets a serve process offers, and the operations on them.

Every front door calls only these operations (docs/decisions/0001-serve-and-topics.md):
:meth:`Topic.describe`, :meth:`LogTopic.read`, :meth:`LogTopic.append` and
:meth:`TargetTopic.snapshot`. ``--topic NAME=SPEC`` binds a name to

- a **log topic**: a source of the source registry that can append and follow, a
  ``.jellyp`` file, a directory of segments (created when missing) or ``nats://…``
  (:mod:`patchsync.serve.file_topic`, :mod:`patchsync.serve.nats_topic`);
- a **target topic**: a target of the target registry, served read-only as snapshots
  (:mod:`patchsync.serve.target_topic`).

Versions count a log's patches from 1 in log order (RDF Delta's numbering; 0 is "nothing",
the bootstrap snapshot). A reader starts after a version, after a patch id, at the
beginning or at the head ("now"); it first reads what the log holds, then follows live:
every append through this process is handed to each subscriber's bounded queue, and a
subscriber whose queue overflowed goes back to reading the log from its last version, so
a slow reader costs the server no more than its queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple, TypeVar

from patchsync.errors import UsageError
from patchsync.events import Event
from patchsync.streams.payloads import encode_patch, text_options

#: RDF Delta's rule for a log's short name.
NAME_RULE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*\Z")

LOG = "log"
TARGET = "target"

T = TypeVar("T")


class Entry(NamedTuple):
    """One patch of a log topic as readers get it: a self-contained one-patch Jelly-Patch stream."""

    version: int
    patch_id: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class Appended:
    """The answer to an append: the patch's version and id; ``duplicate``: it was there already."""

    version: int
    patch_id: str
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What :meth:`Topic.describe` tells: kind (``log`` or ``target``), head id and latest version."""

    name: str
    kind: str
    head: str | None
    version: int
    spec: str


class StartKind(Enum):
    BEGINNING = "beginning"
    NOW = "now"
    AFTER_VERSION = "after_version"
    AFTER_PATCH = "after_patch"


@dataclass(frozen=True, slots=True)
class Start:
    """Where a reader starts: it gets the patches after this point."""

    kind: StartKind
    version: int = 0
    patch_id: str | None = None

    @classmethod
    def beginning(cls) -> Start:
        """Every patch of the log."""
        return cls(StartKind.BEGINNING)

    @classmethod
    def now(cls) -> Start:
        """Only patches appended from now on."""
        return cls(StartKind.NOW)

    @classmethod
    def after_version(cls, version: int) -> Start:
        """The patches after ``version`` (0: every patch)."""
        if version < 0:
            raise UsageError(f"version {version}: versions count from 0")
        return cls(StartKind.AFTER_VERSION, version=version)

    @classmethod
    def after_patch(cls, patch_id: str) -> Start:
        """The patches after the one with id ``patch_id`` (unknown ids are refused)."""
        return cls(StartKind.AFTER_PATCH, patch_id=patch_id)


class Topic:
    """A named topic: a log or a target. See the module docstring."""

    kind: str = ""

    def __init__(self, name: str, spec: str) -> None:
        self.name = name
        self.spec = spec

    async def open(self) -> None:
        """Open the log or target (the first scan of a log builds its version index)."""

    async def close(self) -> None:
        """Release the log or target; subscribers end."""

    def describe(self) -> TopicInfo:
        """Kind, head id and latest version."""
        raise NotImplementedError


class _Subscriber:
    """One live reader: a bounded queue of entries, and whether some were dropped."""

    __slots__ = ("overflowed", "queue")

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[Entry | None] = asyncio.Queue(size)
        self.overflowed = False


class Hub:
    """Hands each appended entry to every subscriber of one topic, on the event loop."""

    def __init__(self) -> None:
        self._subscribers: set[_Subscriber] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._subscribers)

    def add(self, size: int) -> _Subscriber:
        sub = _Subscriber(size)
        self._subscribers.add(sub)
        return sub

    def remove(self, sub: _Subscriber) -> None:
        self._subscribers.discard(sub)

    def publish(self, entry: Entry) -> None:
        """Queue ``entry`` for every subscriber; a full queue is marked, not grown."""
        for sub in self._subscribers:
            if sub.overflowed:
                continue
            try:
                sub.queue.put_nowait(entry)
            except asyncio.QueueFull:
                sub.overflowed = True

    def close(self) -> None:
        """End every subscription: each gets an end marker after what it has queued."""
        self.closed = True
        for sub in self._subscribers:
            if sub.queue.full():
                sub.queue.get_nowait()
                sub.overflowed = True
            sub.queue.put_nowait(None)


class LogTopic(Topic):
    """A log topic: versions, an append that keeps the chain, and reads that follow live.

    Subclasses provide :attr:`head`, :attr:`version`, :meth:`version_of`, :meth:`_stored`
    (entries already in the log) and :meth:`append`; they call :meth:`_appended` on the
    event loop for every patch that reached the log.
    """

    kind = LOG

    def __init__(self, name: str, spec: str, *, subscriber_buffer: int = 1024) -> None:
        super().__init__(name, spec)
        self.hub = Hub()
        self.subscriber_buffer = subscriber_buffer
        self.head: str | None = None
        self.version = 0
        #: Called on the loop after every appended or newly seen patch (metrics).
        self.on_append: Callable[[Entry], None] | None = None

    def describe(self) -> TopicInfo:
        return TopicInfo(self.name, self.kind, self.head, self.version, self.spec)

    def version_of(self, patch_id: str) -> int | None:
        """The version of the patch ``patch_id`` in this log, or ``None``."""
        raise NotImplementedError

    async def append(self, payload: bytes, *, where: str = "") -> Appended:
        """Append one patch (a one-patch Jelly-Patch stream) if it follows the head.

        A patch whose id is in the log already is acknowledged with its version and not
        appended again; one whose ``prev`` is not the head raises :class:`ChainError`
        naming both ids; nothing of a refused patch is written. ``where`` names the request
        in decode errors.
        """
        raise NotImplementedError

    async def append_events(self, events: list[Event], *, where: str = "") -> Appended:
        """Append one patch given as its events (N-Triples terms: RDF Patch text as parsed),
        as :meth:`append` appends a payload. This encodes them and appends the payload; a
        topic that would decode it again to check it takes the events as they are."""
        payload = await asyncio.to_thread(lambda: encode_patch(events, text_options(events)))
        return await self.append(payload, where=where)

    async def append_many(self, payloads: Sequence[tuple[bytes, str]]) -> list[Appended]:
        """Append ``(payload, where)`` patches in order, each as :meth:`append` does.

        The first refused patch raises its error; the patches before it are appended (each
        whole), it and the rest are not. A log may write the group at once.
        """
        return [await self.append(payload, where=where) for payload, where in payloads]

    async def append_statements(self, quads: list[tuple[str, str, str, str]], *, where: str = "") -> Appended:
        """Append one patch adding ``quads`` (N-Triples terms, ``""`` for the default graph),
        with a new id and ``prev`` = the head at the moment it is appended."""
        raise NotImplementedError

    def _stored(self, first: int, last: int) -> AsyncIterator[list[Entry]]:
        """The entries of versions ``first`` to ``last`` as the log holds them, some at a time."""
        raise NotImplementedError

    def _appended(self, entry: Entry) -> None:
        self.hub.publish(entry)
        if self.on_append is not None:
            self.on_append(entry)

    def _start_version(self, start: Start) -> int:
        if start.kind is StartKind.BEGINNING:
            return 0
        if start.kind is StartKind.NOW:
            return self.version
        if start.kind is StartKind.AFTER_VERSION:
            if start.version > self.version:
                raise UsageError(
                    f"topic {self.name}: version {start.version} is beyond the head (version {self.version})"
                )
            return start.version
        assert start.patch_id is not None
        version = self.version_of(start.patch_id)
        if version is None:
            raise UsageError(f"topic {self.name}: no patch {start.patch_id} in the log")
        return version

    async def read(self, start: Start, *, follow: bool = True) -> AsyncGenerator[Entry, None]:
        """The entries after ``start``: what the log holds, then (``follow``) live appends.

        Ends when the topic closes (server stopping) or, without ``follow``, at the head
        as it was when the catch-up reached it.
        """
        # Closed here, so a reader that stops leaves the hub at once.
        async with contextlib.aclosing(self.read_batches(start, follow=follow, limit=1)) as batches:
            async for batch in batches:
                for entry in batch:
                    yield entry

    async def read_batches(
        self, start: Start, *, follow: bool = True, limit: int = 256, max_bytes: int = 4 << 20
    ) -> AsyncGenerator[list[Entry], None]:
        """:meth:`read`, a list of entries at a time: what is ready, at least one entry, at
        most ``limit`` entries and (unless one entry is larger) ``max_bytes`` of payload."""
        sub = self.hub.add(self.subscriber_buffer)
        pending: list[Entry] = []
        size = 0

        def take(entry: Entry) -> bool:
            """Add ``entry``; whether the batch is full."""
            nonlocal size
            pending.append(entry)
            size += len(entry.payload)
            return len(pending) >= limit or size >= max_bytes

        def flush() -> list[Entry]:
            nonlocal pending, size
            batch, pending, size = pending, [], 0
            return batch

        try:
            last = self._start_version(start)
            while True:
                # What is queued now is read from the log below; from here on the queue
                # holds what comes after, unless it overflows again.
                while not sub.queue.empty():
                    if sub.queue.get_nowait() is None:
                        return
                sub.overflowed = False
                head = self.version
                if last < head:
                    async for stored in self._stored(last + 1, head):
                        for entry in stored:
                            if entry.version <= last:
                                continue
                            last = entry.version
                            if take(entry):
                                yield flush()
                    if pending:
                        yield flush()
                    continue  # the head may have moved while the catch-up ran
                if not follow or self.hub.closed:
                    return
                while not sub.overflowed:
                    queued = await sub.queue.get()
                    while True:
                        if queued is None:
                            if pending:
                                yield flush()
                            return
                        if queued.version == last + 1:
                            last = queued.version
                            if take(queued):
                                break
                        elif queued.version > last + 1:
                            break  # a gap: read it from the log
                        if sub.queue.empty():
                            break
                        queued = sub.queue.get_nowait()
                    if pending:
                        yield flush()
                    if queued is not None and queued.version > last + 1:
                        break
        finally:
            self.hub.remove(sub)

    async def close(self) -> None:
        self.hub.close()


class TargetTopic(Topic):
    """A target served read-only: its state as a snapshot (see :mod:`patchsync.serve.target_topic`)."""

    kind = TARGET


async def thread_batches(source: Callable[[], Iterator[T]], batch: int = 256) -> AsyncIterator[list[T]]:
    """Run the blocking iterator ``source()`` in a worker thread, ``batch`` items at a time."""
    iterator = await asyncio.to_thread(source)

    def take() -> list[T]:
        items: list[T] = []
        for item in iterator:
            items.append(item)
            if len(items) >= batch:
                break
        return items

    try:
        while True:
            items = await asyncio.to_thread(take)
            if not items:
                return
            yield items
            if len(items) < batch:
                return
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


async def flatten(batches: AsyncIterator[list[T]]) -> AsyncIterator[T]:
    """The items of ``batches``, one at a time."""
    async for batch in batches:
        for item in batch:
            yield item


def check_name(name: str) -> str:
    """``name`` if it follows the topic name rule, else one error line."""
    if not NAME_RULE.match(name):
        raise UsageError(f"topic name {name!r}: use letters, digits, '_', '.', '-' (not first: '.', '-')")
    return name


__all__ = [
    "LOG",
    "NAME_RULE",
    "TARGET",
    "Appended",
    "Entry",
    "Hub",
    "LogTopic",
    "Start",
    "StartKind",
    "TargetTopic",
    "Topic",
    "TopicInfo",
    "check_name",
    "flatten",
    "thread_batches",
]
