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
import functools
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from patchsync.errors import UsageError
from patchsync.events import Event
from patchsync.logs.payloads import encode_patch, payload_text, text_options
from patchsync.serve.reader_threads import READER_THREADS, flatten, in_reader, thread_batches

if TYPE_CHECKING:
    from patchsync.apply.snapshot_file import SnapshotPosition

#: The longest topic name: a name is a directory under ``--log-root``, and a removed one
#: is moved aside under it with a suffix, within a file system's 255 bytes a name.
MAX_NAME = 200
#: RDF Delta's rule for a log's short name, and our bound on its length.
NAME_RULE = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}\Z")

LOG = "log"
TARGET = "target"

T = TypeVar("T")


class Entry(NamedTuple):
    """One patch of a log topic as readers get it: a self-contained one-patch Jelly-Patch stream."""

    version: int
    patch_id: str
    payload: bytes


#: Text bodies up to this size are parsed on the event loop, and fetched patches up to this
#: size written as text there: for a small patch that costs less than handing it to a
#: worker thread and waiting for the interpreter lock back.
INLINE_BYTES = 16 << 10
#: Most bytes of entries a reader takes at a time (by :func:`entry_cost`): one batch of a
#: subscriber, one read of stored patches, one answer of the change feed. 4 MiB is the
#: largest message a stock gRPC client takes.
BATCH_BYTES = 4 << 20
#: Bytes a patch adds to a ``PatchMessage`` batch besides its payload and id: its version,
#: the field tags and lengths, its place in the batch (an upper bound).
ENTRY_OVERHEAD = 32


def entry_cost(entry: Entry) -> int:
    """What ``entry`` adds to a batch of patches as a message carries it (an upper bound)."""
    return len(entry.payload) + len(entry.patch_id.encode("utf-8")) + ENTRY_OVERHEAD


class Batch:
    """Entries gathered for one message or answer: at most ``limit`` of them and at most
    ``max_bytes`` by ``cost``, except that one entry larger than ``max_bytes`` goes alone.

    The rule of every batch the server sends, as a pure object: :meth:`fits` says whether
    an entry may join (flush first when it may not), :meth:`add` whether the batch is full.
    """

    __slots__ = ("cost", "entries", "limit", "max_bytes", "sent", "size")

    def __init__(self, limit: int, max_bytes: int, cost: Callable[[Entry], int] = entry_cost) -> None:
        self.limit, self.max_bytes, self.cost = limit, max_bytes, cost
        self.entries: list[Entry] = []
        self.size = self.sent = 0

    def __bool__(self) -> bool:
        return bool(self.entries)

    def fits(self, entry: Entry) -> bool:
        """Whether ``entry`` may join the batch (always, when the batch is empty)."""
        return not self.sent or self.size + self.cost(entry) <= self.max_bytes

    def add(self, entry: Entry) -> bool:
        """Add ``entry`` (which :meth:`fits`); whether the batch is now full."""
        self.entries.append(entry)
        return self.count(entry)

    def count(self, entry: Entry) -> bool:
        """Count ``entry`` (which :meth:`fits`) as sent without keeping it (an answer that
        streams its entries holds none); whether the batch is now full."""
        self.sent += 1
        self.size += self.cost(entry)
        return self.sent >= self.limit or self.size >= self.max_bytes

    def flush(self) -> list[Entry]:
        """The entries gathered; the batch starts empty again."""
        entries, self.entries, self.size, self.sent = self.entries, [], 0, 0
        return entries


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


@dataclass(frozen=True, slots=True)
class TopicOptions:
    """How the log topics of one process are run (from the serve settings)."""

    #: Patches queued for one live subscriber before it reads the log again instead.
    subscriber_buffer: int = 1024
    #: Bytes of patches queued for one live subscriber before it reads the log again instead.
    subscriber_bytes: int = 8 << 20
    #: Whether a log on this machine is synced after every append.
    fsync: bool = False
    #: Where the id indexes of NATS stream topics are kept (``None``: in memory, rebuilt
    #: from the stream at every start).
    index_dir: Path | None = None


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
        #: Why the topic cannot be served now (its server out of reach), or ``None``.
        self.error: str | None = None

    async def open(self) -> None:
        """Open the log or target (the first scan of a log builds its version index)."""

    async def close(self) -> None:
        """Release the log or target; subscribers end."""

    def describe(self) -> TopicInfo:
        """Kind, head id and latest version."""
        raise NotImplementedError


class _Subscriber:
    """One live reader: a queue of entries bounded in count and bytes, and whether some
    were dropped (the reader then reads them from the log)."""

    __slots__ = ("bytes", "max_bytes", "overflowed", "queue")

    def __init__(self, size: int, max_bytes: int) -> None:
        self.queue: asyncio.Queue[Entry | None] = asyncio.Queue(size)
        self.bytes = 0
        self.max_bytes = max_bytes
        self.overflowed = False

    def offer(self, entry: Entry) -> None:
        """Queue ``entry`` unless the queue is full (in patches or bytes): then mark it."""
        if self.overflowed:
            return
        size = len(entry.payload)
        if self.bytes + size > self.max_bytes and not self.queue.empty():
            self.overflowed = True
            return
        try:
            self.queue.put_nowait(entry)
        except asyncio.QueueFull:
            self.overflowed = True
            return
        self.bytes += size

    def end(self) -> None:
        """Queue the end marker after what is queued (dropping one entry if it is full)."""
        if self.queue.full():
            self._taken(self.queue.get_nowait())
            self.overflowed = True
        self.queue.put_nowait(None)

    def _taken(self, entry: Entry | None) -> Entry | None:
        if entry is not None:
            self.bytes -= len(entry.payload)
        return entry

    def take_nowait(self) -> Entry | None:
        return self._taken(self.queue.get_nowait())

    async def take(self) -> Entry | None:
        return self._taken(await self.queue.get())


class Hub:
    """Hands each appended entry to every subscriber of one topic, on the event loop."""

    def __init__(self) -> None:
        self._subscribers: set[_Subscriber] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._subscribers)

    def add(self, size: int, max_bytes: int = 8 << 20) -> _Subscriber:
        sub = _Subscriber(size, max_bytes)
        self._subscribers.add(sub)
        return sub

    def remove(self, sub: _Subscriber) -> None:
        self._subscribers.discard(sub)

    def publish(self, entry: Entry) -> None:
        """Queue ``entry`` for every subscriber; a full queue is marked, not grown."""
        for sub in self._subscribers:
            sub.offer(entry)

    def close(self) -> None:
        """End every subscription: each gets an end marker after what it has queued."""
        self.closed = True
        for sub in self._subscribers:
            sub.end()


class LogTopic(Topic):
    """A log topic: versions, an append that keeps the chain, and reads that follow live.

    Subclasses provide :attr:`head`, :attr:`version`, :meth:`version_of`, :meth:`_stored`
    (entries already in the log) and :meth:`append`; they call :meth:`_appended` on the
    event loop for every patch that reached the log.
    """

    kind = LOG

    def __init__(self, name: str, spec: str, *, subscriber_buffer: int = 1024, subscriber_bytes: int = 8 << 20) -> None:
        super().__init__(name, spec)
        self.hub = Hub()
        self.subscriber_buffer = subscriber_buffer
        self.subscriber_bytes = subscriber_bytes
        self.head: str | None = None
        self.version = 0
        #: Called on the loop after every appended or newly seen patch (metrics).
        self.on_append: Callable[[Entry], None] | None = None
        self._writer: ThreadPoolExecutor | None = None

    async def in_writer(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on this topic's own writer thread: an append never waits in the
        shared worker pool behind readers' work (their reads, their conversions)."""
        if self._writer is None:
            if self.hub.closed:
                raise UsageError(f"topic {self.name}: closed")
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"patchsync-write-{self.name}")
        return await asyncio.get_running_loop().run_in_executor(self._writer, functools.partial(fn, *args))

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
        payload = await self.in_writer(lambda: encode_patch(events, text_options(events)))
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

    def _stored(self, first: int, last: int, max_bytes: int = BATCH_BYTES) -> AsyncIterator[list[Entry]]:
        """The entries of versions ``first`` to ``last`` as the log holds them, some at a
        time (about ``max_bytes`` of them: what a reader holds ahead of what it sends)."""
        raise NotImplementedError

    async def fetch(self, version: int) -> Entry | None:
        """The entry of ``version``, or ``None`` when the log has no such version."""
        if not 1 <= version <= self.version:
            return None
        reader = self.read(Start.after_version(version - 1), follow=False, until=version)
        async with contextlib.aclosing(reader):
            return await anext(reader, None)

    async def fetch_text(self, version: int) -> str | None:
        """The RDF Patch text of ``version`` (:func:`~patchsync.logs.payloads.events_text`),
        or ``None`` when the log has no such version. A log that holds decoded patches
        makes the text from them (:class:`~patchsync.serve.file_topic.FileLogTopic`)."""
        entry = await self.fetch(version)
        if entry is None:
            return None
        if len(entry.payload) <= INLINE_BYTES:
            return payload_text(entry.payload)
        return await in_reader(payload_text, entry.payload)

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

    async def read(self, start: Start, *, follow: bool = True, until: int | None = None) -> AsyncGenerator[Entry, None]:
        """The entries after ``start``: what the log holds, then (``follow``) live appends.

        Ends when the topic closes (server stopping), after version ``until`` if given, or,
        without ``follow``, at the head as it was when the catch-up reached it.
        """
        # Closed here, so a reader that stops leaves the hub at once.
        async with contextlib.aclosing(self.read_batches(start, follow=follow, limit=1, until=until)) as batches:
            async for batch in batches:
                for entry in batch:
                    yield entry

    async def read_batches(
        self,
        start: Start,
        *,
        follow: bool = True,
        limit: int = 256,
        max_bytes: int = BATCH_BYTES,
        cost: Callable[[Entry], int] = entry_cost,
        until: int | None = None,
        first_alone: bool = False,
    ) -> AsyncGenerator[list[Entry], None]:
        """:meth:`read`, a list of entries at a time: what is ready, at least one entry, at
        most ``limit`` entries and at most ``max_bytes`` by ``cost`` (an entry larger than
        that alone goes alone, never with another). With ``first_alone``, the first list
        goes as soon as the log's first read step is done (one entry,
        :func:`stored_entries`), not once full: a streamed answer's first patch never waits
        for the patches after it (a message that must be whole, gRPC's, is not cut short)."""
        sub = self.hub.add(self.subscriber_buffer, self.subscriber_bytes)
        batch = Batch(limit, max_bytes, cost)
        first = first_alone
        try:
            last = self._start_version(start)
            while until is None or last < until:
                # What is queued now is read from the log below; from here on the queue
                # holds what comes after, unless it overflows again.
                while not sub.queue.empty():
                    if sub.take_nowait() is None:
                        return
                sub.overflowed = False
                head = self.version if until is None else min(self.version, until)
                if last < head:
                    async for stored in self._stored(last + 1, head, max_bytes):
                        # Taken off the list as they go, and no name kept on one across a
                        # yield: what a reader waits to send is not held here as well.
                        stored.reverse()
                        while stored:
                            entry = stored.pop()
                            if entry.version <= last:
                                continue
                            if not batch.fits(entry):
                                stored.append(entry)
                                del entry
                                yield batch.flush()
                                continue
                            last = entry.version
                            full = batch.add(entry)
                            del entry
                            if full:
                                yield batch.flush()
                        if first:
                            first = False
                            if batch:
                                yield batch.flush()
                    if batch:
                        yield batch.flush()
                    continue  # the head may have moved while the catch-up ran
                if not follow or self.hub.closed:
                    return
                while not sub.overflowed:
                    queued = await sub.take()
                    gap = False
                    while queued is not None:
                        if queued.version > last + 1:
                            gap = True  # read it from the log
                            break
                        if queued.version == last + 1 and (until is None or queued.version <= until):
                            if not batch.fits(queued):
                                yield batch.flush()
                            last = queued.version
                            if batch.add(queued) or sub.queue.empty():
                                break
                        elif sub.queue.empty():
                            break
                        queued = sub.take_nowait()
                    if batch:
                        yield batch.flush()
                    if queued is None or (until is not None and last >= until):
                        return
                    if gap:
                        break
        finally:
            self.hub.remove(sub)

    async def close(self) -> None:
        self.hub.close()
        writer, self._writer = self._writer, None
        if writer is not None:
            await asyncio.to_thread(writer.shutdown)


@dataclass
class Snapshot:
    """A target's state: its position, and its Jelly-RDF frames (serialized ``RdfStreamFrame``s)."""

    position: SnapshotPosition
    quads: int
    frames: AsyncGenerator[bytes, None]


class TargetTopic(Topic):
    """A target served read-only: its state as a snapshot (see :mod:`patchsync.serve.target_topic`)."""

    kind = TARGET

    async def snapshot(self) -> Snapshot:
        """The target's committed state now, with its position."""
        raise NotImplementedError


def stored_entries(source: Callable[[], Iterator[Entry]], max_bytes: int = BATCH_BYTES) -> AsyncIterator[list[Entry]]:
    """The entries of a log read in a worker thread, about ``max_bytes`` at a time: a
    reader of large patches holds a few megabytes of them, not hundreds of patches. The
    first step reads one entry (then 16, then 256): a fetch of one version decodes one."""
    return thread_batches(source, max_bytes=max_bytes, size=entry_cost, first=1)


def check_name(name: str) -> str:
    """``name`` if it follows the topic name rule, else one error line."""
    if not NAME_RULE.match(name):
        shown = name if len(name) <= 80 else name[:80] + "…"
        raise UsageError(
            f"topic name {shown!r}: use letters, digits, '_', '.', '-' (not first: '.', '-'), "
            f"at most {MAX_NAME} characters"
        )
    return name


__all__ = [
    "BATCH_BYTES",
    "ENTRY_OVERHEAD",
    "INLINE_BYTES",
    "LOG",
    "MAX_NAME",
    "NAME_RULE",
    "READER_THREADS",
    "TARGET",
    "Appended",
    "Batch",
    "Entry",
    "Hub",
    "LogTopic",
    "Snapshot",
    "Start",
    "StartKind",
    "TargetTopic",
    "Topic",
    "TopicInfo",
    "TopicOptions",
    "check_name",
    "entry_cost",
    "flatten",
    "in_reader",
    "stored_entries",
    "thread_batches",
]
