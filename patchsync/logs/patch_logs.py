"""File adapters around the sans-I/O codecs: formats by extension, reading, writing, appending.

This is the only place the codec meets the file system. Readers pull fixed-size chunks
into a decoder and close it at end of file, so memory stays bounded by one chunk plus one
frame. Writers hand each completed frame to a single ``write`` call (docs/design.md §6).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from patchsync import formats
from patchsync.chains import ChainCheck
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import DEFAULT_FRAME_ROWS, PatchEncoder
from patchsync.errors import ChainError, DecodeError, UsageError, param
from patchsync.events import Event, Header, Options, PatchEnd
from patchsync.logs.files import LogFile, file_errors
from patchsync.options import Limits, PatchOptions
from patchsync.terms import TermAdapter
from patchsync.units import patch_ends, patch_headers

CHUNK_SIZE = 1 << 20

#: Patch log formats by file extension (from :mod:`patchsync.formats`).
PATCH_FORMATS = {suffix: f.name for f in formats.with_role(formats.PATCH_LOG) for suffix in f.suffixes}


def format_of(path: str | os.PathLike[str], given: str | None = None) -> str:
    """The patch format named by ``given`` or by the file extension."""
    return formats.require(path, given, formats.PATCH_LOG, "patch").name


def _reader(fmt: str, adapter: TermAdapter[Any] | None, source: str, limits: Limits | None) -> Any:
    if fmt == "jellyp":
        return PatchDecoder(adapter, source=source, limits=limits)
    from patchsync.codec.rdfp import RdfPatchTextReader

    return RdfPatchTextReader(adapter, source=source, limits=limits)


def iter_stream_events(
    stream: IO[bytes],
    fmt: str,
    *,
    adapter: TermAdapter[Any] | None = None,
    source: str = "<stream>",
    limits: Limits | None = None,
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[Event]:
    """Decode a binary stream of format ``fmt`` (``jellyp`` or ``rdfp``) to events."""
    reader = _reader(fmt, adapter, source, limits)
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        reader.feed(chunk)
        yield from reader
    reader.close()
    yield from reader


def read_events(
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    adapter: TermAdapter[Any] | None = None,
    limits: Limits | None = None,
) -> Iterator[Event]:
    """All events of a patch file (``.jellyp`` or ``.rdfp``), decoded lazily."""
    fmt = format_of(path, fmt)
    with LogFile(path) as f:
        yield from iter_stream_events(f, fmt, adapter=adapter, source=str(path), limits=limits)


def write_events(
    events: Iterable[Event],
    stream: IO[bytes],
    fmt: str,
    *,
    options: PatchOptions | None = None,
    adapter: TermAdapter[Any] | None = None,
    max_frame_rows: int | None = None,
) -> int:
    """Encode events to ``stream`` in format ``fmt``; returns the number of patches written.

    For ``rdfp`` output, ``options`` only decides whether patch boundaries are written
    (not in FLAT, which is a single patch).
    """
    if fmt == "jellyp":
        encoder: PatchEncoder[Any] = PatchEncoder(options, adapter, max_frame_rows=max_frame_rows or DEFAULT_FRAME_ROWS)
        for event in events:
            encoder.send(event)
            out = encoder.take()
            if out:
                stream.write(out)
        encoder.finish()
        stream.write(encoder.take())
        return encoder.patches_written
    from patchsync.codec.rdfp import RdfPatchTextWriter
    from patchsync.options import StreamType

    segments = options is None or options.stream_type is not StreamType.FLAT
    writer: RdfPatchTextWriter[Any] = RdfPatchTextWriter(adapter, segments=segments)
    patches = 0
    for event in events:
        writer.send(event)
        if type(event) is PatchEnd:
            patches += 1
            stream.write(writer.take().encode("utf-8"))
    stream.write(writer.take().encode("utf-8"))
    return patches


#: Seconds between two attempts to take a log's lock held by another writer.
LOCK_POLL = 0.02


def exclusive_lock(path: Path, wait: float | None = None) -> int:
    """An open descriptor of ``path`` (created if missing) holding its exclusive ``flock``.

    With ``wait`` ``None`` it waits for the holder as long as it takes; otherwise up to
    ``wait`` seconds, then refuses with :class:`UsageError`. A lock taken on a file no longer
    at ``path`` (a writer that created it and failed removed it, or a user did, while this
    one waited) would exclude nobody, so it is then taken again on the file now there.
    """
    deadline = time.monotonic() + (wait or 0.0)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait is None else fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                locked = False
            if locked and _still_at(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        if not locked:
            if time.monotonic() >= deadline:
                waited = f" (waited {wait:g} s)" if wait else ""
                raise UsageError(f"{path}: another writer holds the log's lock{waited}")
            time.sleep(LOCK_POLL)


def _still_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the one at ``path`` now."""
    st = os.fstat(fd)
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_ino, here.st_dev) == (st.st_ino, st.st_dev)


def lock_log(path: Path, wait: float = 0.0) -> LogFile:
    """``path`` opened for reading and writing (created if missing) under its exclusive
    ``flock`` (:func:`exclusive_lock`, waiting up to ``wait`` seconds for another writer).
    Opening, reads and writes raise patchsync errors naming the path (:mod:`.files`)."""
    with file_errors(path, "open"):
        fd = exclusive_lock(path, wait)
    return LogFile(fd, "r+b", name=path)


class LogAppender:
    """Appends patches to a ``.jellyp`` log, creating it if needed (docs/design.md §6).

    Holds an exclusive ``flock`` on the file while open, so two writers cannot interleave.
    An existing log is read once, under the lock, to learn its options (the appended stream
    must repeat them identically) and its chain head (the ``id`` header of its last patch;
    with ``collect_ids`` also every id it holds, :attr:`ids`). The encoder then starts fresh
    in append mode, so the concatenated file still decodes from the start. ``wait`` is how
    many seconds to wait for another writer's lock before refusing.

    Opening writes nothing (a file that did not exist is created empty) but for cutting off
    a trailing partial frame (a writer that crashed mid-write), which no reader takes for a
    patch and which would corrupt the log if appended after. Closing an appender that was
    given no patch leaves the log as it was: no options row without a patch.

    :meth:`write` follows the chain rule of every writer (:mod:`patchsync.chains`): a patch
    that does not continue :attr:`head` raises :class:`ChainError` (nothing of it written,
    the patches before it are), the head itself given again is skipped (counted in
    :attr:`skipped`); ``chain="ignore"`` writes every patch as given. Either way :attr:`head`
    follows the patches written (the last one with an id).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: PatchOptions | None = None,
        adapter: TermAdapter[Any] | None = None,
        *,
        fsync: bool = False,
        max_frame_rows: int | None = None,
        wait: float = 0.0,
        chain: str = "strict",
        collect_ids: bool = False,
    ) -> None:
        if chain not in ("strict", "ignore"):
            raise UsageError(f"{param('chain', chain)}: expected 'strict' or 'ignore'").naming(("chain", chain))
        self.path = Path(path)
        self.fsync = fsync
        #: Every patch id the log held when opened (with ``collect_ids``; else empty).
        self.ids: set[str] = set()
        #: Patches :meth:`write` skipped as already in the log.
        self.skipped = 0
        self._file = lock_log(self.path, wait)
        try:
            existing, self.head, end = self._scan(adapter, self.ids if collect_ids else None)
            if existing is not None and options is not None and existing != options:
                raise UsageError(
                    f"{self.path}: the log was written with different options ({existing}); "
                    "an appended stream must repeat them identically"
                )
            self.options = existing or options or PatchOptions()
            if os.fstat(self._file.fileno()).st_size != end:
                self._file.truncate(end)
            self._file.seek(end)
            self.encoder: PatchEncoder[Any] = PatchEncoder(
                self.options,
                adapter,
                append=existing is not None,
                max_frame_rows=max_frame_rows or DEFAULT_FRAME_ROWS,
            )
        except BaseException:
            self._file.close()
            raise
        self._written = False
        self._check = ChainCheck(self.head, str(self.path)) if chain == "strict" else None
        # The patch being written: its headers, held until its first other event decides it;
        # then "write" or "skip" until its end.
        self._held: list[Event] = []
        self._mode = "start"

    def _scan(
        self, adapter: TermAdapter[Any] | None, ids: set[str] | None
    ) -> tuple[PatchOptions | None, str | None, int]:
        """Options, last patch id and the offset after the last complete frame."""
        options: PatchOptions | None = None
        decoder: PatchDecoder[Any] = PatchDecoder(adapter, source=str(self.path))
        self._file.seek(0)
        end = 0

        def events() -> Iterator[Event]:
            nonlocal options, end
            while chunk := self._file.read(CHUNK_SIZE):
                decoder.feed(chunk)
                for event in decoder:
                    if type(event) is Options:
                        options = event.options
                    yield event
                end = decoder.offset

        head: str | None = None
        for patch_end in patch_ends(events(), decoder.adapter):
            head = patch_end.patch.id or head
            if ids is not None and head is not None:
                ids.add(head)
        if decoder.in_transaction:
            raise DecodeError(
                "the log ends inside a transaction; refusing to append after an unfinished patch",
                source=str(self.path),
                offset=end,
            )
        return options, head, end

    @property
    def touched(self) -> bool:
        """Whether anything was written to the log since it was opened."""
        return self._written

    @property
    def size(self) -> int:
        """The log's size now (after the cut of a partial frame, and what was written since)."""
        return os.fstat(self._file.fileno()).st_size

    def write(self, events: Iterable[Event]) -> None:
        """Encode events and write every completed frame (one ``write`` per batch).

        A patch's headers are held until its first other event, which decides the patch
        (the chain rule, see the class docstring).
        """
        send = self.encoder.send
        check = self._check
        for event in events:
            kind = type(event)
            if kind is Options:  # the encoder writes its own options row
                send(event)
                continue
            mode = self._mode
            if mode == "start":
                if kind is Header:
                    self._held.append(event)
                    continue
                try:
                    mode = self._decide(check)
                except ChainError:
                    self.flush()  # the patches before it, each whole
                    raise
            if mode == "write":
                send(event)
            if kind is PatchEnd:
                self.skipped += mode == "skip"
                mode = "start"
            self._mode = mode
        self.flush()

    def _decide(self, check: ChainCheck | None) -> str:
        """Write or skip the patch whose headers are held (or raise :class:`ChainError`);
        without a check (``chain="ignore"``) write it, its id the head if it has one."""
        headers = patch_headers(self._held, self.encoder.adapter)
        patch_id, prev = headers.id, headers.prev
        held, self._held = self._held, []
        if check is None:
            self.head = patch_id or self.head
        else:
            if patch_id is not None and patch_id == check.head:
                return "skip"  # the log's last patch already
            check.check(patch_id, prev)
            self.head = check.head
        for header in held:
            self.encoder.send(header)
        return "write"

    def flush(self) -> None:
        """Write the frames completed so far."""
        data = self.encoder.take()
        if data:
            self._written = True
            self._file.write(data)
            if self.fsync:
                self._file.sync()

    def close(self) -> None:
        """Finish the stream, flush and release the lock (the log stays as it was if no
        patch was given)."""
        if self._file.closed:
            return
        try:
            if self._held:
                # Headers alone, with no end: the encoder refuses the unfinished patch.
                for header in self._held:
                    self.encoder.send(header)
                self._held = []
            if self._written or self.encoder.rows_written > 1:
                self.encoder.finish()
                self.flush()
        finally:
            self._file.close()

    def abandon(self) -> None:
        """Release the lock without writing what the encoder still holds (a failed patch)."""
        self._file.close()

    def __enter__(self) -> LogAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
