"""A log (a ``.jellyp`` file or a directory of segments) read through its version index.

:class:`IndexedLog` keeps the log's :class:`~patchsync.logs.version_index.VersionIndex` in
step with the log and answers from it:

- **opening** compares each segment with the index's record of it (name, fingerprint,
  indexed size, the hash of the bytes before the indexed end): a segment that matches and
  has not grown costs a ``stat`` and two short reads; one that grew is indexed on from its
  last checkpoint; the first one that does not match (replaced, cut below its indexed end,
  another log) and every segment after it are indexed again from their start. An index
  that cannot be read at all (not SQLite, rows failing their checksums, another format)
  is deleted and built again, with one warning.
- **reading** a patch starts at the last checkpoint at or before it: a patch that is a
  stream of its own (what ``serve`` appends) is its bytes as they are; a patch inside a
  stream of many (another writer's, a recorder's segment) is decoded from the checkpoint,
  at most :data:`EVERY` patches before it. Decoders stopped after the patch they read are
  kept in one least-recently-used table for the process (:data:`KEPT`), keyed by the log,
  the segment and the version they read next (at most :data:`CURSORS` of them and
  :data:`CURSOR_BYTES` of their lookup tables, whatever the number of logs), so
  reading patches one by one (``GET /t/v``, then ``GET /t/v+1``) decodes each once and
  restores no checkpoint.

Patch ends are the unit reader's (:class:`~patchsync.units.UnitReader`), never decided
here; frames are split by their length prefix only so that a decoder stands between
frames when its state is taken.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from patchsync.codec import wire
from patchsync.codec.decoder_state import DecoderState
from patchsync.codec.framing import read_varint
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import DecodeError, UsageError
from patchsync.events import Event, Options
from patchsync.logs.files import file_errors
from patchsync.logs.fingerprint import FINGERPRINT_BYTES, fingerprint
from patchsync.logs.resume_point import ANCHOR_BYTES, ResumePointError, decode_resume_point, encode_resume_point
from patchsync.logs.version_index import (
    Checkpoint,
    IndexCorrupt,
    PatchRow,
    SegmentRecord,
    VersionIndex,
    open_index,
    remove_index,
)
from patchsync.options import Limits, PatchOptions
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import ENDS_PATCH, UnitReader

log = logging.getLogger("patchsync.index")

#: Patches between two decoder checkpoints inside a stream: a read decodes at most this many
#: (decision 0030: with compact states, 64 costs the index what 128 did, and halves the decoding).
EVERY = 64
#: Patches indexed between two commits while a segment is indexed (bounds the memory used).
FLUSH_EVERY = 8192
#: Bytes read at a time when decoding from a checkpoint.
READ_CHUNK = 64 << 10
#: Most decoders kept after reads in one process (every log's together), each ready for
#: the patch after the one it read.
CURSORS = 32
#: Most bytes of decoders kept that way (by :attr:`_Cursor.cost`; the least recently used
#: goes first): a few megabytes, whatever the logs' lookup tables and however many logs.
CURSOR_BYTES = 16 << 20
#: Rows of the index read at once when a read starts, then :data:`WINDOW` (a fetch of one
#: version reads a few rows, not a window's worth).
FIRST_WINDOW = 16
#: Rows of the index read at once as a read goes on.
WINDOW = 1024
_TERMS = NTriplesTerms()


@dataclass(frozen=True, slots=True)
class StoredPatch:
    """One patch as the log holds it: ``raw``, the bytes of its own stream, or its decoded
    ``events`` with the ``options`` of the stream they come from."""

    version: int
    patch_id: str
    raw: bytes | None
    events: list[Event] | None = None
    options: PatchOptions | None = None


def starts_stream(frame: bytes | bytearray | memoryview, at: int = 0) -> bool:
    """Whether the delimited frame at ``at`` begins with an options row: a stream starts
    there (an appended stream repeats the options row and refers to nothing before it)."""
    end = min(len(frame), at + 24)
    length = read_varint(frame, at, end)
    if length is None or length[1] >= end or frame[length[1]] != 0x0A:  # RdfPatchFrame.rows
        return False
    row = read_varint(frame, length[1] + 1, end)
    return row is not None and bytes(frame[row[1] : row[1] + len(wire.ROW_OPTIONS)]) == wire.ROW_OPTIONS


def _fresh(offset: int, source: str, limits: Limits | None) -> PatchDecoder[str]:
    """A decoder for a stream that starts at ``offset`` of a file (offsets in errors are the file's)."""
    state: DecoderState[str] = DecoderState(offset, 0, 0, False, None, None)
    return PatchDecoder.from_state(state, _TERMS, source=source, limits=limits)


def _restored(cp: Checkpoint, path: Path, limits: Limits | None) -> PatchDecoder[str]:
    source = str(path)
    if cp.state is None:
        return _fresh(cp.offset, source, limits)
    try:
        data = zlib.decompress(cp.state)
        # A state names its segment by file name: the log may be opened by another path.
        decoder = decode_resume_point(data, _TERMS, source=path.name, limits=limits or Limits()).decoder
        decoder.source = source
        return decoder
    except (zlib.error, ResumePointError) as exc:
        raise IndexCorrupt(f"{source}: the checkpoint at version {cp.version} is unusable: {exc}") from None


class _Cursor:
    """A decoder reading one segment's patches in order from a checkpoint."""

    def __init__(self, path: Path, cp: Checkpoint, end: int, limits: Limits | None) -> None:
        self.decoder = _restored(cp, path, limits)
        #: What keeping it costs, roughly: its lookup tables and the terms built from them
        #: grow with the checkpoint's state (~350 KB for the producer's log, ~32 times its
        #: compressed size, decision 0030), plus a read's worth of bytes.
        self.cost = READ_CHUNK + 32 * len(cp.state or b"")
        self.options = self.decoder.options
        self.fd = os.open(path, os.O_RDONLY)
        self.pos, self.end, self.version, self.seq = cp.offset, end, cp.version, cp.seq
        self.reader = UnitReader(_TERMS)

    def next_patch(self) -> list[Event] | None:
        """The events of patch :attr:`version` (then the next one's), or ``None`` at the end."""
        pending: list[Event] = []
        while True:
            for event in self.decoder:
                if type(event) is Options:
                    self.options = event.options
                    continue
                pending.append(event)
                if self.reader.read(event) in ENDS_PATCH:
                    self.version += 1
                    return pending
            if self.pos >= self.end:
                return None
            chunk = os.pread(self.fd, min(READ_CHUNK, self.end - self.pos), self.pos)
            if not chunk:
                return None
            self.pos += len(chunk)
            self.decoder.feed(chunk)

    def close(self) -> None:
        os.close(self.fd)


class _Kept:
    """The decoders kept after reads, for every log of the process: least recently used
    first out, at most :data:`CURSORS` of them and :data:`CURSOR_BYTES` by their cost.
    Keyed by (log, segment, the version the decoder reads next)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cursors: OrderedDict[tuple[int, int, int], _Cursor] = OrderedDict()
        self._bytes = 0

    def take(self, key: tuple[int, int, int]) -> _Cursor | None:
        """The decoder kept under ``key``, no longer kept (``None``: none)."""
        with self._lock:
            cursor = self._cursors.pop(key, None)
            if cursor is not None:
                self._bytes -= cursor.cost
        return cursor

    def keep(self, key: tuple[int, int, int], cursor: _Cursor) -> None:
        """Keep ``cursor`` under ``key``; the least recently used go past the bounds."""
        closing: list[_Cursor] = []
        with self._lock:
            old = self._cursors.pop(key, None)
            if old is not None:
                self._bytes -= old.cost
                closing.append(old)
            self._cursors[key] = cursor
            self._bytes += cursor.cost
            while len(self._cursors) > CURSORS or (self._bytes > CURSOR_BYTES and len(self._cursors) > 1):
                evicted = self._cursors.popitem(last=False)[1]
                self._bytes -= evicted.cost
                closing.append(evicted)
        for each in closing:
            each.close()

    def drop(self, log_id: int) -> None:
        """Close the decoders of one log."""
        with self._lock:
            keys = [k for k in self._cursors if k[0] == log_id]
            cursors = [self._cursors.pop(k) for k in keys]
            self._bytes -= sum(c.cost for c in cursors)
        for cursor in cursors:
            cursor.close()

    def count(self, log_id: int) -> int:
        """How many decoders of one log are kept."""
        with self._lock:
            return sum(1 for k in self._cursors if k[0] == log_id)


#: The decoders kept after reads, every log's.
KEPT = _Kept()
_LOG_IDS = itertools.count(1)


@dataclass
class _Scan:
    """Where the indexing of one segment stands."""

    seq: int
    path: Path
    fingerprint: str
    first_version: int
    version: int  # the last patch indexed
    patches: list[PatchRow]
    checkpoints: list[Checkpoint]


class IndexedLog:
    """The segments ``paths`` of one log (in order), read through the index at ``index_file``
    (``None``: an index in memory only). See the module docstring."""

    def __init__(
        self, paths: list[Path], index_file: Path | None, *, limits: Limits | None = None, every: int = EVERY
    ) -> None:
        self.paths = list(paths)
        self.index_file = index_file
        self.limits = limits
        self.every = every
        #: Stream options in force at the end of the log (``None``: the log is empty).
        self.options: PatchOptions | None = None
        self.index = self._new_index()
        self._records: list[SegmentRecord] = []
        #: This log's key in :data:`KEPT` (never reused in the process).
        self._kept_id = next(_LOG_IDS)

    def _new_index(self) -> VersionIndex:
        index = open_index(self.index_file)
        self.index_file = index.path
        return index

    # -- opening -----------------------------------------------------------------------

    def open(self, *, cut_tail: Callable[[int], None] | None = None) -> None:
        """Bring the index in step with the log (see the module docstring). An unfinished tail
        of the last segment (a partial frame, a patch not ended) is cut with ``cut_tail(size)``."""
        try:
            self._sync(cut_tail)
        except IndexCorrupt as exc:
            self.rebuild(str(exc), cut_tail=cut_tail)

    def rebuild(self, reason: str, *, cut_tail: Callable[[int], None] | None = None) -> None:
        """Throw the index away and build it again from the log."""
        log.warning("%s; building the version index again", reason)
        self.close_cursors()
        self.index.close()
        if self.index_file is not None:
            remove_index(self.index_file)
        self.index = self._new_index()
        self._sync(cut_tail)

    def _sync(self, cut_tail: Callable[[int], None] | None) -> None:
        records = self.index.segments()
        head = self.index.head()
        next_version = 1
        for seq, path in enumerate(self.paths):
            last = seq == len(self.paths) - 1
            with file_errors(path, "read"), open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                fp = fingerprint(f.read(FINGERPRINT_BYTES), "jellyp")
                record = records[seq] if seq < len(records) else None
                if record is not None and _matches(record, path, fp, size, f.fileno()):
                    following = records[seq + 1].first_version if seq + 1 < len(records) else None
                    end_version = following if following is not None else (head.version + 1 if head else 1)
                    next_version = end_version
                    if record.size == size:
                        continue
                    cp = self.index.checkpoint_at(end_version)
                    if cp is None or cp.seq != seq:
                        cp = Checkpoint(record.first_version, seq, 0, None)
                else:
                    cp = Checkpoint(record.first_version if record is not None else next_version, seq, 0, None)
                    if record is not None:
                        log.warning("%s: not the segment the version index knows; indexing it again", path)
                self.index.cut(seq, cp.version)
                records = records[:seq]
                head = None
                first = record.first_version if record is not None else cp.version
                next_version = self._scan(f.fileno(), size, path, fp, cp, first, last=last, cut_tail=cut_tail) + 1
        if len(records) > len(self.paths):  # segments gone from the end of the log
            self.index.cut(len(self.paths), next_version)
        records = self.index.segments()
        self._records = records
        if len(records) != len(self.paths):
            raise IndexCorrupt(f"{self.where}: {len(records)} segments indexed, the log has {len(self.paths)}")
        self.options = self._options_at_end()

    @property
    def where(self) -> str:
        return self.index.where

    def _scan(
        self,
        fd: int,
        size: int,
        path: Path,
        fp: str,
        cp: Checkpoint,
        first_version: int,
        *,
        last: bool,
        cut_tail: Callable[[int], None] | None,
    ) -> int:
        """Index one segment from ``cp`` to its end; the version of its last patch."""
        decoder = _restored(cp, path, self.limits)
        reader = UnitReader(_TERMS)
        scan = _Scan(cp.seq, path, fp, first_version, cp.version - 1, [], [cp])
        since = 0  # patches since the last checkpoint
        open_at: int | None = None  # the first frame of a patch not ended yet
        ended_frame = -1
        pos = cp.offset  # where the next frame starts
        buf = b""
        base = pos
        max_frame = (self.limits or Limits()).max_frame_bytes
        good_end = cp.offset  # past the last patch end seen
        while True:
            at = pos - base
            try:
                length = read_varint(buf, at, len(buf)) if at < len(buf) else None
            except ValueError:
                raise DecodeError("a frame length longer than 10 bytes", source=str(path), offset=pos) from None
            if length is not None and length[0] > max_frame:
                raise DecodeError(f"a frame of {length[0]} bytes, over the limit", source=str(path), offset=pos)
            if length is None or length[1] + length[0] > len(buf):
                more = os.pread(
                    fd, READ_CHUNK if length is None else max(READ_CHUNK, length[1] + length[0] - at), base + len(buf)
                )
                if not more:
                    break
                buf, base = buf[at:] + more, pos
                continue
            frame_end = base + length[1] + length[0]
            if reader.between_patches and starts_stream(buf, at):
                if scan.checkpoints[-1].version != scan.version + 1:
                    scan.checkpoints.append(Checkpoint(scan.version + 1, cp.seq, pos, None))
                since = 0
            decoder.feed(memoryview(buf)[at : length[1] + length[0]])
            for event in decoder:
                if type(event) is Options:
                    continue
                if open_at is None:
                    open_at = pos
                    scan.patches.append(PatchRow(scan.version + 1, "", cp.seq, pos))
                if reader.read(event) in ENDS_PATCH:
                    patch_id = reader.patch.id
                    if patch_id is None:
                        raise UsageError(
                            f"{path}: patch {scan.version + 1} has no 'id' header; a served log needs one per patch"
                        )
                    scan.version += 1
                    scan.patches[-1] = PatchRow(scan.version, patch_id, cp.seq, scan.patches[-1].offset)
                    open_at, ended_frame, good_end = None, pos, frame_end
                    since += 1
            pos = frame_end
            if open_at is None and since >= self.every and decoder.resumable:
                anchor = os.pread(fd, min(pos, ANCHOR_BYTES), pos - min(pos, ANCHOR_BYTES))
                try:
                    state = encode_resume_point(
                        decoder, source=path.name, fingerprint=fp, checkpoint=(scan.version + 1, 0), anchor=anchor
                    )
                    scan.checkpoints.append(Checkpoint(scan.version + 1, cp.seq, pos, zlib.compress(state, 1)))
                except ResumePointError:
                    pass  # a state no checkpoint holds (a lookup value with U+0000): the next one may
                since = 0
                if len(scan.patches) >= FLUSH_EVERY:
                    self._flush(scan, fd, pos)
        end = size
        if last:
            end = good_end if open_at is None else open_at
            if open_at is not None and open_at <= ended_frame:
                raise UsageError(f"{path}: the log ends inside a patch that shares a frame with the one before")
            if end < size:
                if cut_tail is None:
                    raise UsageError(f"{path}: an unfinished patch or frame at byte {end}")
                cut_tail(end)
        if open_at is not None:
            scan.patches.pop()
        # A stream start inside the tail cut off goes with it; a state at the end stays (the next scan starts there).
        scan.checkpoints = [
            c for c in scan.checkpoints if c.offset < end or c.offset == 0 or (c.offset == end and c.state)
        ]
        self._flush(scan, fd, end)
        return scan.version

    def _flush(self, scan: _Scan, fd: int, size: int) -> None:
        record = SegmentRecord(scan.seq, scan.path.name, scan.fingerprint, size, scan.first_version, _anchor(fd, size))
        self.index.add(scan.patches, scan.checkpoints, record)
        scan.patches, scan.checkpoints = [], []

    def _options_at_end(self) -> PatchOptions | None:
        head = self.index.head()
        if head is None:
            return None
        cp = self.index.checkpoint_at(head.version)
        if cp is None:
            raise IndexCorrupt(f"{self.where}: no checkpoint before version {head.version}")
        cursor = self._cursor(cp)
        try:
            if cursor.options is None:
                cursor.next_patch()
            return cursor.options
        finally:
            cursor.close()

    # -- appending ---------------------------------------------------------------------

    def appended(self, places: list[tuple[int, str, int]], size: int, fd: int) -> None:
        """Record patches a writer appended to the last segment, each a stream of its own:
        ``(version, id, offset)``, and the segment's new ``size`` (``fd`` reads it)."""
        seq = len(self.paths) - 1
        record = self._records[seq]
        fp = record.fingerprint
        if record.size == 0:
            fp = fingerprint(os.pread(fd, FINGERPRINT_BYTES, 0), "jellyp")
        rows = [PatchRow(v, i, seq, o) for v, i, o in places]
        cps = [Checkpoint(v, seq, o, None) for v, _, o in places]
        new = SegmentRecord(seq, record.name, fp, size, record.first_version, _anchor(fd, size))
        self.index.add(rows, cps, new)
        self._records[seq] = new

    # -- reading -----------------------------------------------------------------------

    def head(self) -> PatchRow | None:
        """The last patch of the log."""
        return self.index.head()

    def version_of(self, patch_id: str) -> int | None:
        """The version of the patch ``patch_id``, or ``None``."""
        return self.index.version_of(patch_id)

    def read(self, first: int, last: int) -> Iterator[StoredPatch]:
        """Patches ``first`` to ``last``, in order (as far as the index holds them)."""
        cursor: _Cursor | None = None
        fds: dict[int, int] = {}
        try:
            at = first
            while at <= last:
                # One row past the window: it is only read to tell where the window's last
                # patch ends, and is read again as the first of the next window.
                window = min(last, at + (FIRST_WINDOW if at == first else WINDOW) - 1)
                rows = self.index.rows(at, window + 1)
                if not rows or rows[0].version != at:
                    return
                for number, row in enumerate(rows):
                    if row.version > window:
                        break
                    at = row.version + 1
                    following = rows[number + 1] if number + 1 < len(rows) else None
                    # The next row in the same segment, if any (it ends this patch's bytes).
                    same = following if following is not None and following.seq == row.seq else None
                    if row.starts_stream and (same is None or same.starts_stream):
                        # A stream of its own: its bytes are the patch as readers get it.
                        end = same.offset if same is not None else self._records[row.seq].size
                        fd = fds.get(row.seq)
                        if fd is None:
                            fd = fds[row.seq] = os.open(self.paths[row.seq], os.O_RDONLY)
                        yield StoredPatch(row.version, row.patch_id, os.pread(fd, end - row.offset, row.offset))
                        continue
                    if cursor is None or cursor.version != row.version or cursor.seq != row.seq:
                        if cursor is not None:
                            self._keep(cursor)
                        cursor = None  # kept: not to be kept again if the next one fails
                        cursor = self._cursor_at(row)
                    events = cursor.next_patch()
                    if events is None:
                        raise IndexCorrupt(f"{self.where}: version {row.version} is not in {self.paths[row.seq]}")
                    yield StoredPatch(row.version, row.patch_id, None, events, cursor.options)
        finally:
            if cursor is not None:
                self._keep(cursor)
            for fd in fds.values():
                os.close(fd)

    def _cursor_at(self, row: PatchRow) -> _Cursor:
        cursor = KEPT.take((self._kept_id, row.seq, row.version))
        if cursor is not None:
            return cursor
        cp = self.index.checkpoint_at(row.version)
        if cp is None or cp.seq != row.seq:
            raise IndexCorrupt(f"{self.where}: no checkpoint in segment {row.seq} before version {row.version}")
        cursor = self._cursor(cp, self._records[row.seq].size)
        try:
            while cursor.version < row.version:
                if cursor.next_patch() is None:
                    raise IndexCorrupt(f"{self.where}: version {row.version} is not in {self.paths[row.seq]}")
        except BaseException:
            cursor.close()
            raise
        return cursor

    def _cursor(self, cp: Checkpoint, end: int | None = None) -> _Cursor:
        path = self.paths[cp.seq]
        if end is None:
            end = os.stat(path).st_size
        try:
            return _Cursor(path, cp, end, self.limits)
        except (DecodeError, ValueError) as exc:
            raise IndexCorrupt(f"{self.where}: the checkpoint at version {cp.version} does not decode: {exc}") from None

    def _keep(self, cursor: _Cursor) -> None:
        KEPT.keep((self._kept_id, cursor.seq, cursor.version), cursor)

    def close_cursors(self) -> None:
        """Close this log's decoders kept for the next read."""
        KEPT.drop(self._kept_id)

    def close(self) -> None:
        """Close the index and the kept decoders."""
        self.close_cursors()
        self.index.close()


def _anchor(fd: int, size: int) -> str:
    """The hash of the bytes before ``size`` (a log cut and written again differs there)."""
    take = min(size, ANCHOR_BYTES)
    return hashlib.sha256(os.pread(fd, take, size - take)).hexdigest()


def _matches(record: SegmentRecord, path: Path, fp: str, size: int, fd: int) -> bool:
    """Whether the segment ``path`` is the one ``record`` indexed (and was not cut below it)."""
    return (
        record.name == path.name
        and record.fingerprint == fp
        and record.size <= size
        and record.anchor == _anchor(fd, record.size)
    )


__all__ = [
    "CURSORS",
    "CURSOR_BYTES",
    "EVERY",
    "FIRST_WINDOW",
    "WINDOW",
    "FLUSH_EVERY",
    "READ_CHUNK",
    "IndexedLog",
    "StoredPatch",
    "starts_stream",
]
