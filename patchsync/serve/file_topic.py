"""A log topic on this machine: a ``.jellyp`` file, or a directory of ``.jellyp`` segments.

The server is the log's writer for as long as it serves it: it takes the log's exclusive
lock on opening (a directory's ``.patchsync.lock`` and its last segment's own lock, the
locks every patchsync writer takes, docs/design.md §6) and holds it, so the head it keeps
in memory is the log's head, and another writer is refused rather than forking the log.

Opening scans the log once: the version index (each patch's id and ``prev``) and the
*restart points*, the offsets where a stream starts afresh (an options row: a segment's
start, and every patch this server appends, which it writes as a stream of its own in
append mode), from which a reader can decode without reading what comes before. A
trailing partial frame, or the complete frames of a patch a crashed writer did not end,
are cut off then, as every appender does.

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
import bisect
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

from patchsync.codec import wire
from patchsync.codec.framing import read_varint
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.events import Event, Options, PatchEnd
from patchsync.logs.convert import FeatureScan
from patchsync.logs.patch_logs import CHUNK_SIZE, exclusive_lock
from patchsync.logs.payloads import NT_TERMS, encode_patch, message_options
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.serve.incoming import Incoming, checked_patch, decode_patch, statement_patch
from patchsync.serve.topics import BATCH_BYTES, Appended, Entry, LogTopic, TopicOptions, stored_entries
from patchsync.sources import LOG_SUFFIX, directory_logs
from patchsync.units import ENDS_PATCH, UnitReader

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
        self._ids: list[str] = []
        self._versions: dict[str, int] = {}
        #: Restart points: the first version decoded from each, and where it is.
        self._restart_versions: list[int] = []
        self._restart_at: list[tuple[int, int]] = []
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
            for index, segment in enumerate(self._segments):
                self._scan(index, segment, last=index == len(self._segments) - 1)
        except BaseException:
            self._release()
            raise
        if self.options is not None and self.options.stream_type is StreamType.FLAT:
            self._release()
            raise UsageError(f"{where}: a FLAT log is one patch; nothing can be appended to it")

    @staticmethod
    def _lock_file(path: Path, where: str) -> int:
        try:
            return exclusive_lock(path, wait=0.0)
        except UsageError:
            raise UsageError(
                f"{where}: another writer holds {path}; a served log has the server as its one writer"
            ) from None

    def _scan(self, index: int, path: Path, *, last: bool) -> None:
        """Index the patches of one segment; cut an unfinished tail off the last one."""
        decoder: PatchDecoder[str] = PatchDecoder(NT_TERMS, source=str(path), limits=self.limits)
        reader = UnitReader(NT_TERMS)  # patch ends and their chain ids
        ended_frame = -1  # the frame offset of the last PatchEnd
        open_at: int | None = None  # the first frame of a patch not ended yet
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK_SIZE):
                decoder.feed(chunk)
                for event in decoder:
                    offset = event[-3]
                    if type(event) is Options:
                        self.options = event.options
                        self._restart_versions.append(self.version + 1)
                        self._restart_at.append((index, offset))
                        continue
                    if open_at is None:
                        open_at = offset
                        if _starts_a_stream(f.fileno(), offset) and (
                            not self._restart_at or self._restart_at[-1] != (index, offset)
                        ):
                            # An appended stream (a repeated options row, which decodes to
                            # no event): a restart point of its own.
                            self._restart_versions.append(self.version + 1)
                            self._restart_at.append((index, offset))
                    if reader.read(event) in ENDS_PATCH:
                        self._index(reader.patch.id, reader.patch.prev, path)
                        open_at = None
                        ended_frame = offset
            size = f.tell()
        if not last:
            return
        end = decoder.offset  # past the last whole frame: a partial one is cut
        if open_at is not None:
            # A patch a crashed writer did not end: its frames go, and only they.
            if open_at <= ended_frame:
                raise UsageError(f"{path}: the log ends inside a patch that shares a frame with the one before")
            end = open_at
        while self._restart_at and self._restart_at[-1][0] == index and self._restart_at[-1][1] >= end > 0:
            self._restart_at.pop()
            self._restart_versions.pop()
        self._size = size
        if end < size:
            assert self._fd is not None
            os.ftruncate(self._fd, end)
            self._size = end
        if end == 0:
            self._restart_at = [p for p in self._restart_at if p[0] != index]
            self._restart_versions = self._restart_versions[: len(self._restart_at)]

    def _index(self, patch_id: str | None, prev: str | None, path: Path) -> None:
        if patch_id is None:
            raise UsageError(f"{path}: patch {self.version + 1} has no 'id' header; a served log needs one per patch")
        self._ids.append(patch_id)
        self._versions.setdefault(patch_id, len(self._ids))
        self.head = patch_id
        self.version = len(self._ids)

    def _release(self) -> None:
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
        return self._versions.get(patch_id)

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
                known = self._versions.get(incoming.patch_id) or staged.get(incoming.patch_id)
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
            segment = len(self._segments) - 1
            for version, patch_id, offset in places:
                self._restart_versions.append(version)
                self._restart_at.append((segment, offset))
                self._ids.append(patch_id)
                self._versions[patch_id] = version
            self.head = places[-1][1]
            self.version = places[-1][0]

    # -- reading -----------------------------------------------------------------------

    def _stored(self, first: int, last: int, max_bytes: int = BATCH_BYTES) -> AsyncIterator[list[Entry]]:
        return stored_entries(lambda: self._entries(first, last), max_bytes)

    def _entries(self, first: int, last: int) -> Iterator[Entry]:
        """Versions ``first`` to ``last``, from the restart point at or before ``first``.

        A restart point holding one patch is read as it is; one holding several (another
        writer's stream) is decoded and each of its patches encoded as a message.
        """
        with self._io:
            point = bisect.bisect_right(self._restart_versions, first) - 1
            versions = self._restart_versions[point:]
            places = self._restart_at[point:]
            segments = list(self._segments)
            size = self._size
            total = self.version
        versions.append(total + 1)
        fd = -1
        opened = -1
        try:
            for number, (segment, offset) in enumerate(places):
                begin, end_version = versions[number], versions[number + 1]
                if begin > last:
                    return
                if end_version <= first:
                    continue
                following = places[number + 1] if number + 1 < len(places) else None
                end = following[1] if following is not None and following[0] == segment else None
                if end is None and segment == len(segments) - 1:
                    end = size
                if end_version == begin + 1 and end is not None:
                    if opened != segment:
                        if fd >= 0:
                            os.close(fd)
                        fd = os.open(segments[segment], os.O_RDONLY)
                        opened = segment
                    yield Entry(begin, self._ids[begin - 1], os.pread(fd, end - offset, offset))
                    continue
                version = begin - 1
                for events, options in _patches(segments[segment], offset, end, self.limits):
                    version += 1
                    if version >= end_version or version > last:
                        break
                    if version >= first:
                        yield Entry(version, self._ids[version - 1], encode_patch(events, message_options(options)))
        finally:
            if fd >= 0:
                os.close(fd)


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


#: The start of a frame whose first row is an options row: ``RdfPatchFrame.rows`` (field 1).
_ROWS_TAG = 0x0A


def _starts_a_stream(fd: int, offset: int) -> bool:
    """Whether the delimited frame at ``offset`` begins with an options row: a stream starts
    there (an appended stream repeats the options row and refers to nothing before it)."""
    head = os.pread(fd, 24, offset)
    frame = read_varint(head, 0, len(head))
    if frame is None or frame[1] >= len(head) or head[frame[1]] != _ROWS_TAG:
        return False
    row = read_varint(head, frame[1] + 1, len(head))
    return row is not None and head[row[1] : row[1] + len(wire.ROW_OPTIONS)] == wire.ROW_OPTIONS


def _encode(events: list[Event], options: PatchOptions, *, append: bool) -> bytes:
    """The bytes appended for one patch: a stream of its own (options row first)."""
    encoder: PatchEncoder[str] = PatchEncoder(options, NT_TERMS, append=append)
    for event in events:
        encoder.send(event)
    encoder.finish()
    return encoder.take()


def _patches(
    path: Path, start: int, end: int | None, limits: Limits | None
) -> Iterator[tuple[list[Event], PatchOptions]]:
    """The patches of ``path`` from the restart point ``start`` up to byte ``end``, with the options in force."""
    decoder: PatchDecoder[str] = PatchDecoder(NT_TERMS, source=str(path), limits=limits)
    options = PatchOptions()
    pending: list[Event] = []
    with open(path, "rb") as f:
        f.seek(start)
        remaining = None if end is None else end - start
        while remaining is None or remaining > 0:
            chunk = f.read(CHUNK_SIZE if remaining is None else min(CHUNK_SIZE, remaining))
            if not chunk:
                break
            if remaining is not None:
                remaining -= len(chunk)
            decoder.feed(chunk)
            for event in decoder:
                if type(event) is Options:
                    options = event.options
                    continue
                pending.append(event)
                if type(event) is PatchEnd:
                    yield pending, options
                    pending = []


__all__ = ["DIRECTORY_LOCK", "FIRST_SEGMENT", "NEW_LOG_OPTIONS", "FileLogTopic", "file_topic"]
