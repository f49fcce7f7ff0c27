"""A log topic on this machine: a ``.jellyp`` file, or a directory of ``.jellyp`` segments.

The server is the log's writer for as long as it serves it: it takes the log's exclusive
lock on opening (a directory's ``.patchsync.lock`` and its last segment's own lock, the
locks every patchsync writer takes, docs/design.md §6) and holds it, so the head it keeps
in memory is the log's head, and another writer is refused rather than forking the log.

Opening brings the log's version index on disk up to date (:mod:`patchsync.logs.indexed_log`:
``.NAME.idx`` beside a file, ``.patchsync.idx`` in a directory): a log the index knows
costs a few reads, whatever its length; what was written since the index was last
updated is indexed then, and a log the index does not match is indexed again. The index
holds each patch's version, id and place, and decoder checkpoints, so a read anywhere in
the log decodes at most a few dozen patches; the server keeps no entry per patch in memory.
A trailing partial frame, or the complete frames of a patch a crashed writer did not end,
are cut off on opening, as every appender does.

Each append is one ``write`` of the whole patch (of a group of patches that arrived
together, one ``write`` of them all), made only after each patch was decoded and checked
whole and its chain checked against the head; a failed write is cut back.

A patch this server appended is a restart point of its own, so its bytes in the log are a
self-contained one-patch stream: they are what readers get, live and when catching up
(read back as they are, not decoded and encoded again). Only patches written by another
writer (a recorder's segment, several patches per stream) are decoded and encoded again,
one message each.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Generator, Sequence
from pathlib import Path

from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.events import Event, PatchEnd
from patchsync.logs.convert import FeatureScan
from patchsync.logs.indexed_log import IndexedLog, StoredPatch
from patchsync.logs.patch_logs import exclusive_lock
from patchsync.logs.payloads import NT_TERMS, MessageEncoder, events_text, message_options, payload_text
from patchsync.logs.version_index import IndexCorrupt, index_path
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.serve.incoming import Incoming, checked_patch, decode_patch, statement_patch
from patchsync.serve.topics import BATCH_BYTES, Appended, Entry, LogTopic, TopicOptions, in_reader, stored_entries
from patchsync.sources import LOG_SUFFIX, directory_logs

#: The lock file of a directory log (the recorder's, so the two exclude each other).
DIRECTORY_LOCK = ".patchsync.lock"
#: The first segment of a new directory log (the recorder's naming: file-name order is log order).
FIRST_SEGMENT = "patch-0000000001.jellyp"
#: Options of a log the server creates: every feature declared, so any patch can be appended.
NEW_LOG_OPTIONS = PatchOptions(rdf_star=True, generalized_statements=True)


class FileLogTopic(LogTopic):
    """A ``.jellyp`` file or segment directory served as a log topic (see the module docstring)."""

    def __init__(
        self,
        name: str,
        spec: str,
        path: Path,
        *,
        subscriber_buffer: int = 1024,
        subscriber_bytes: int = 8 << 20,
        fsync: bool = False,
        limits: Limits | None = None,
    ) -> None:
        super().__init__(name, spec, subscriber_buffer=subscriber_buffer, subscriber_bytes=subscriber_bytes)
        self.path = path
        self.fsync = fsync
        self.limits = limits
        self.directory = path.is_dir() or (not path.exists() and not path.name.lower().endswith(LOG_SUFFIX))
        self.options: PatchOptions | None = None
        self._segments: list[Path] = []
        self._log: IndexedLog | None = None
        self._fd: int | None = None
        self._dir_fd: int | None = None
        self._size = 0
        self._lock = asyncio.Lock()
        self._io = threading.Lock()

    # -- opening -----------------------------------------------------------------------

    async def open(self) -> None:
        await asyncio.to_thread(self._open)

    def _open(self) -> None:
        where = f"topic {self.name} ({self.path})"
        if self.directory:
            self.path.mkdir(parents=True, exist_ok=True)
            self._dir_fd = self._lock_file(self.path / DIRECTORY_LOCK, where)
            self._segments = directory_logs(self.path) or [self.path / FIRST_SEGMENT]
        else:
            if self.path.suffix.lower() != LOG_SUFFIX:
                raise UsageError(f"{where}: a log topic is a .jellyp file or a directory of them")
            self._segments = [self.path]
        try:
            self._fd = self._lock_file(self._segments[-1], where)
            self._log = IndexedLog(self._segments, index_path(self.path), limits=self.limits)
            self._log.open(cut_tail=self._cut_tail)
            self.options = self._log.options
            self._size = os.fstat(self._fd).st_size
            head = self._log.head()
            if head is not None:
                self.head, self.version = head.patch_id, head.version
        except BaseException:
            self._release()
            raise
        if self.options is not None and self.options.stream_type is StreamType.FLAT:
            self._release()
            raise UsageError(f"{where}: a FLAT log is one patch; nothing can be appended to it")

    def _cut_tail(self, size: int) -> None:
        """Cut an unfinished tail (a crashed writer's) off the last segment."""
        assert self._fd is not None
        os.ftruncate(self._fd, size)

    @staticmethod
    def _lock_file(path: Path, where: str) -> int:
        try:
            return exclusive_lock(path, wait=0.0)
        except UsageError:
            raise UsageError(
                f"{where}: another writer holds {path}; a served log has the server as its one writer"
            ) from None

    def _release(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        for fd in (self._fd, self._dir_fd):
            if fd is not None:
                os.close(fd)
        self._fd = self._dir_fd = None

    async def close(self) -> None:
        await super().close()
        async with self._lock:
            self._release()

    # -- appending ---------------------------------------------------------------------

    def version_of(self, patch_id: str) -> int | None:
        if self._log is None:
            return None
        return self._log.version_of(patch_id)

    async def append(self, payload: bytes, *, where: str = "") -> Appended:
        return (await self.append_many([(payload, where)]))[0]

    async def append_many(self, payloads: Sequence[tuple[bytes, str]]) -> list[Appended]:
        # Decoded and written in one hop to a worker thread, the group in one write: an
        # append's cost is mostly the hop and the write, not the patch.
        makes = [self._decoder(payload, where or f"topic {self.name}") for payload, where in payloads]
        return await self._append(makes)

    def _decoder(self, payload: bytes, where: str) -> Callable[[], Incoming]:
        return lambda: decode_patch(payload, where, self.limits)

    async def append_events(self, events: list[Event], *, where: str = "") -> Appended:
        # Checked as they are: encoding them only to decode the payload again was waste.
        # Text that never ends its patch is one patch, as its payload would be.
        if not any(type(e) is PatchEnd for e in events):
            events = [*events, PatchEnd()]
        incoming = checked_patch(events, where or f"topic {self.name}")
        return (await self._append([lambda: incoming]))[0]

    async def append_statements(self, quads: list[tuple[str, str, str, str]], *, where: str = "") -> Appended:
        return (await self._append([lambda: statement_patch(quads, self.head)]))[0]

    async def _append(self, makes: list[Callable[[], Incoming]]) -> list[Appended]:
        async with self._lock:
            if self._fd is None:
                raise UsageError(f"topic {self.name}: closed")
            written, error = await self.in_writer(self._write, makes)
            for appended, payload in written:
                if not appended.duplicate:
                    self._appended(Entry(appended.version, appended.patch_id, payload))
            if error is not None:
                raise error
            return [appended for appended, _ in written]

    def _write(self, makes: list[Callable[[], Incoming]]) -> tuple[list[tuple[Appended, bytes]], Exception | None]:
        """Check and write patches under the log's lock (held since opening), in one write.

        Each is decoded, checked against the head as the patches before it leave it, and
        encoded; the first refused one ends the group: the ones before it are written
        (each whole), it and the rest are not, and its error is returned.
        """
        options = self.options or NEW_LOG_OPTIONS
        head, version, size = self.head, self.version, self._size
        staged: dict[str, int] = {}
        out: list[tuple[Appended, bytes]] = []
        chunks: list[bytes] = []
        places: list[tuple[int, str, int]] = []  # (version, id, offset) of each new patch
        error: Exception | None = None
        for make in makes:
            try:
                incoming = make()
                known = staged.get(incoming.patch_id) or self.version_of(incoming.patch_id)
                if known is not None:
                    out.append((Appended(known, incoming.patch_id, duplicate=True), b""))
                    continue
                if incoming.prev != head:
                    raise ChainError(
                        f"topic {self.name}: patch {incoming.patch_id} has prev {incoming.prev or '(none)'} "
                        f"but the head is {head or '(none: the log is empty)'}; nothing was appended"
                    )
                scan = FeatureScan()
                for event in incoming.events:
                    scan.see(event, f"topic {self.name} patch {incoming.patch_id}")
                scan.require(options, f"topic {self.name}", "appended")
                # A stream of its own (options row first, no reference to earlier lookups):
                # the same bytes are the readers' message.
                data = _encode(incoming.events, options, append=size > 0)
            except PatchsyncError as exc:
                error = exc
                break
            version += 1
            staged[incoming.patch_id] = version
            places.append((version, incoming.patch_id, size))
            chunks.append(data)
            out.append((Appended(version, incoming.patch_id), data))
            head, size = incoming.patch_id, size + len(data)
        if chunks:
            self._commit(b"".join(chunks), options, places)
        return out, error

    def _commit(self, data: bytes, options: PatchOptions, places: list[tuple[int, str, int]]) -> None:
        fd = self._fd
        assert fd is not None
        start = self._size
        with self._io:
            try:
                view = memoryview(data)
                while view:
                    written = os.pwrite(fd, view, start + len(data) - len(view))
                    view = view[written:]
                if self.fsync:
                    os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, start)
                raise
            self._size = start + len(data)
            self.options = options
            assert self._log is not None
            # Indexed before the head moves: a reader asked for the new versions finds them.
            self._log.appended(places, self._size, fd)
            self.head = places[-1][1]
            self.version = places[-1][0]

    # -- reading -----------------------------------------------------------------------

    def _stored(self, first: int, last: int, max_bytes: int = BATCH_BYTES) -> AsyncIterator[list[Entry]]:
        return stored_entries(lambda: self._entries(first, last), max_bytes)

    async def fetch(self, version: int) -> Entry | None:
        # One step in a reader thread (the log read and closed there): a fetch by version
        # is an RDF Delta client's sync, one request a patch, where each thread hop counts.
        if not 1 <= version <= self.version:
            return None
        return await in_reader(self._one, version)

    def _one(self, version: int) -> Entry | None:
        with contextlib.closing(self._entries(version, version)) as entries:
            return next(entries, None)

    async def fetch_text(self, version: int) -> str | None:
        # Also one reader-thread step: the text is made from the patch as the log holds it
        # (its bytes, or the events decoded from a checkpoint), never encoded as Jelly first.
        if not 1 <= version <= self.version:
            return None
        return await in_reader(self._one_text, version)

    def _one_text(self, version: int) -> str | None:
        with contextlib.closing(self._read(version, version)) as patches:
            stored = next(patches, None)
        if stored is None:
            return None
        if stored.raw is not None:
            return payload_text(stored.raw)
        assert stored.events is not None
        return events_text(stored.events)

    def _entries(self, first: int, last: int) -> Generator[Entry, None, None]:
        """Versions ``first`` to ``last`` as readers get them: a patch that is a stream of
        its own as it is; one of another writer's streams encoded as a message of its own."""
        encoder = MessageEncoder()  # one for the read: restarted per patch, not built again
        with contextlib.closing(self._read(first, last)) as patches:
            for stored in patches:
                payload = stored.raw
                if payload is None:
                    assert stored.events is not None
                    payload = encoder.encode(stored.events, message_options(stored.options))
                yield Entry(stored.version, stored.patch_id, payload)

    def _read(self, first: int, last: int) -> Generator[StoredPatch, None, None]:
        """Versions ``first`` to ``last`` through the index: a patch that is a stream of its
        own is its bytes; one of another writer's streams is decoded (from the checkpoint
        before it). An index found broken is built again, and the read goes on."""
        log = self._log
        if log is None:
            raise UsageError(f"topic {self.name}: closed")
        at = first
        for attempt in (1, 2):
            try:
                for stored in log.read(at, last):
                    yield stored
                    at = stored.version + 1
                return
            except IndexCorrupt as exc:
                if attempt == 2:
                    raise
                with self._io:
                    log.rebuild(str(exc))


def file_topic(name: str, spec: str, path: Path, options: TopicOptions) -> FileLogTopic:
    """The log topic of a ``.jellyp`` file or a segment directory (the source registry's
    ``topic`` role of files and directories)."""
    return FileLogTopic(
        name,
        spec,
        Path(path),
        subscriber_buffer=options.subscriber_buffer,
        subscriber_bytes=options.subscriber_bytes,
        fsync=options.fsync,
    )


def _encode(events: list[Event], options: PatchOptions, *, append: bool) -> bytes:
    """The bytes appended for one patch: a stream of its own (options row first)."""
    encoder: PatchEncoder[str] = PatchEncoder(options, NT_TERMS, append=append)
    for event in events:
        encoder.send(event)
    encoder.finish()
    return encoder.take()


__all__ = ["DIRECTORY_LOCK", "FIRST_SEGMENT", "NEW_LOG_OPTIONS", "FileLogTopic", "file_topic"]
