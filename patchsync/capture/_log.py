"""Where a recorder's patches go: a log file, a directory of segments, or a stream.

Every writer here follows one rule so that a reader of the log only ever sees committed
patches: the recorder encodes a patch into the writer's encoder, and only
:meth:`LogWriter.commit` hands the encoder's bytes to the file, in a single ``write``
(followed by ``fsync`` when asked). A crash before the write leaves nothing; a crash
during it leaves a partial trailing frame (or text without its ``Z .``), which the next
appender cuts off (:class:`patchsync.logs.patch_logs.LogAppender` for Jelly-Patch, the same rule
here for text).

Segments: a directory target holds files named ``patch-<10-digit sequence>.<ext>``, so
file-name order is log order (docs/design.md §6). A segment is finished when a later one exists,
so a new segment is created only after the previous one is closed, and the chain head
carries over into the new segment's first ``prev``.

Chains: a writer's head is read under the exclusive lock it then holds until it closes
(the log file's, and for a directory the directory's ``.patchsync.lock`` as well, which
spans the moment a segment is closed and the next created), so two writers can never both
continue one head: the second is refused while the first holds the log.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import RdfPatchTextWriter, read_rdfp
from patchsync.errors import PatchsyncError, UsageError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.logs.files import file_errors
from patchsync.logs.patch_logs import LogAppender, format_of, lock_log
from patchsync.options import PatchOptions, StreamType
from patchsync.sources import APPEND, is_address, resolve_source
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.units import Unit, chain_head, read_units

SEGMENT_PATTERN = re.compile(r"patch-(\d{10})\.(jellyp|rdfp)\Z")
#: The lock file of a directory log (not a segment: readers skip it).
DIRECTORY_LOCK = ".patchsync.lock"
_EXTENSIONS = {"jellyp": ".jellyp", "rdfp": ".rdfp"}


class PatchSink(Protocol):
    """The encoder interface the recorder writes one patch into (PatchEncoder's methods)."""

    def header(self, key: str, value: Any) -> None: ...
    def tx_start(self) -> None: ...
    def tx_commit(self) -> None: ...
    def tx_abort(self) -> None: ...
    def add(self, s: Any, p: Any, o: Any, g: Any = None) -> None: ...
    def delete(self, s: Any, p: Any, o: Any, g: Any = None) -> None: ...
    def prefix_add(self, name: str, iri: Any, g: Any = None) -> None: ...
    def prefix_delete(self, name: str, iri: Any = None, g: Any = None) -> None: ...
    def end_patch(self) -> None: ...
    def send(self, event: Event) -> None:
        """Any of the above, as the event that stands for it."""
        ...


@runtime_checkable
class PatchLog(Protocol):
    """Where a recorder commits its patches: a :class:`LogWriter`, a stream's
    :class:`patchsync.nats.StreamWriter`, or a caller's own.

    The recorder writes one patch at a time into :attr:`sink`, naming :attr:`head` as its
    ``prev``, then calls :meth:`commit` with the patch's id; the patch must reach the log
    whole in that call or not at all (raising). :meth:`abandon` drops an unfinished patch
    after a failure, :meth:`close` ends the log.
    """

    options: PatchOptions
    sink: Any
    head: str | None

    def commit(self, patch_id: str | None) -> None: ...
    def abandon(self) -> None: ...
    def close(self) -> None: ...


class _TextSink:
    """RDF Patch text behind the :class:`PatchSink` method interface."""

    def __init__(self) -> None:
        self._writer: RdfPatchTextWriter[Any] = RdfPatchTextWriter(RdflibTerms(), segments=True)
        self._send = self.send = self._writer.send

    def header(self, key: str, value: Any) -> None:
        self._send(Header(key, value))

    def tx_start(self) -> None:
        self._send(TxStart())

    def tx_commit(self) -> None:
        self._send(TxCommit())

    def tx_abort(self) -> None:
        self._send(TxAbort())

    def add(self, s: Any, p: Any, o: Any, g: Any = None) -> None:
        self._send(Add(s, p, o, g))

    def delete(self, s: Any, p: Any, o: Any, g: Any = None) -> None:
        self._send(Delete(s, p, o, g))

    def prefix_add(self, name: str, iri: Any, g: Any = None) -> None:
        self._send(PrefixAdd(name, iri, g))

    def prefix_delete(self, name: str, iri: Any = None, g: Any = None) -> None:
        self._send(PrefixDelete(name, iri, g))

    def end_patch(self) -> None:
        self._send(PatchEnd())

    def take(self) -> bytes:
        return self._writer.take().encode("utf-8")


class LogWriter:
    """A patch log the recorder commits to.

    ``target`` is a ``.jellyp`` or ``.rdfp`` file (created, or appended to under an
    exclusive lock, continuing its options and chain head), a directory (a log of
    segments, see the module docstring; ``fmt`` names the segment format, default
    ``jellyp``; created when a rotation limit is given and the path has no extension), or a binary stream (nothing is read from it; pass ``head`` to continue a
    chain). ``max_segment_bytes`` / ``max_segment_patches`` start a new segment after a
    commit reaches either limit (directory targets only). ``fsync`` syncs every commit.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[bytes],
        options: PatchOptions | None = None,
        *,
        fmt: str | None = None,
        fsync: bool = False,
        head: str | None = None,
        max_segment_bytes: int | None = None,
        max_segment_patches: int | None = None,
    ) -> None:
        self.fsync = fsync
        self.max_segment_bytes = max_segment_bytes
        self.max_segment_patches = max_segment_patches
        self._stream: IO[bytes] | None = None
        self._dir: Path | None = None
        self._dir_lock: IO[bytes] | None = None
        self._appender: LogAppender | None = None
        self._text_file: IO[bytes] | None = None
        self._segment_patches = 0
        self._segment_seq = 0
        self.head: str | None = head
        self.patches = 0
        if options is not None and options.stream_type is StreamType.FLAT:
            raise UsageError("a recorded log needs patch boundaries: use a PUNCTUATED or FRAME stream")
        if isinstance(target, (str, os.PathLike)):
            path = Path(target)
            rotating = max_segment_bytes is not None or max_segment_patches is not None
            if rotating and not path.exists() and not path.suffix:
                with file_errors(path, "create the directory"):
                    path.mkdir(parents=True)  # a new segmented log
            if path.is_dir():
                self._dir = path
                self.fmt = format_of("x", fmt) if fmt else "jellyp"
                self._open_directory(options)
            else:
                if max_segment_bytes is not None or max_segment_patches is not None:
                    raise UsageError(f"{path}: rotation needs a directory target, not a file")
                self.fmt = format_of(path, fmt)
                self._open_file(path, options)
        else:
            if max_segment_bytes is not None or max_segment_patches is not None:
                raise UsageError("rotation needs a directory target, not a stream")
            self._stream = target
            self.fmt = format_of("x", fmt) if fmt else "jellyp"
            self.options = options or PatchOptions()
            self._new_encoder(append=False)

    # -- opening ------------------------------------------------------------------------

    def _new_encoder(self, *, append: bool) -> None:
        if self.fmt == "jellyp":
            self.sink: PatchSink = PatchEncoder(self.options, RdflibTerms(), append=append)
        else:
            self.sink = _TextSink()

    def _open_file(self, path: Path, options: PatchOptions | None) -> None:
        if self.fmt == "jellyp":
            self._appender = LogAppender(path, options, RdflibTerms(), fsync=self.fsync)
            self.options = self._appender.options
            self.sink = self._appender.encoder
            if self._appender.head is not None:
                self.head = self._appender.head
        else:
            self.options = options or PatchOptions()
            self._text_file, head = _open_text_log(path)
            if head is not None:
                self.head = head
            self.sink = _TextSink()
        if self.options.stream_type is StreamType.FLAT:
            self.abandon()
            raise UsageError(f"{path}: the log is a FLAT stream (one patch); a recorder appends patches")

    def _open_directory(self, options: PatchOptions | None) -> None:
        assert self._dir is not None
        # Held for the writer's life: a segment's lock is let go when the next segment
        # starts, and another writer taking the log then would continue the same head.
        self._dir_lock = lock_log(self._dir / DIRECTORY_LOCK)
        try:
            self._open_segments(options)
        except BaseException:
            self._release_directory()
            raise

    def _open_segments(self, options: PatchOptions | None) -> None:
        assert self._dir is not None
        segments = segment_files(self._dir)
        if segments:
            self._segment_seq = int(SEGMENT_PATTERN.fullmatch(segments[-1].name)[1])  # type: ignore[index]
            if segments[-1].suffix != _EXTENSIONS[self.fmt]:
                raise UsageError(f"{self._dir}: the log's segments are {segments[-1].suffix} files, not .{self.fmt}")
            # The newest segment may hold no patch yet; the chain head is then in an older one.
            for i, older in enumerate(reversed(segments)):
                head, count = _segment_info(older)
                if i == 0:
                    self._segment_patches = count  # rotation limits count what is there
                if head is not None:
                    self.head = head
                    break
        else:
            self._segment_seq = 1
        self._open_file(self._segment_path(), options)

    def _segment_path(self) -> Path:
        assert self._dir is not None
        return self._dir / f"patch-{self._segment_seq:010d}{_EXTENSIONS[self.fmt]}"

    # -- committing ---------------------------------------------------------------------

    def commit(self, patch_id: str | None) -> None:
        """Write everything encoded since the last commit (one whole patch) in one write."""
        if self._appender is not None:
            self._appender.flush()  # one write of the whole patch, then fsync if asked
        else:
            data = self.sink.take()  # type: ignore[attr-defined]
            if self._text_file is not None:
                self._text_file.write(data)
                if self.fsync:
                    os.fsync(self._text_file.fileno())
            elif data:
                assert self._stream is not None
                self._stream.write(data)
                self._stream.flush()
        if patch_id is not None:
            self.head = patch_id
        self.patches += 1
        self._segment_patches += 1
        if self._dir is not None and self._segment_full():
            self._close_file()
            self._segment_seq += 1
            self._segment_patches = 0
            self._open_file(self._segment_path(), self.options)

    def _segment_full(self) -> bool:
        if self.max_segment_patches is not None and self._segment_patches >= self.max_segment_patches:
            return True
        if self.max_segment_bytes is not None:
            path = self.path
            return path is not None and path.stat().st_size >= self.max_segment_bytes
        return False

    @property
    def path(self) -> Path | None:
        """The file being written (the current segment of a directory log)."""
        if self._appender is not None:
            return self._appender.path
        if self._text_file is not None:
            return Path(self._text_file.name)
        return None

    def _close_file(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        elif self._text_file is not None:
            self._text_file.close()
            self._text_file = None

    def _release_directory(self) -> None:
        if self._dir_lock is not None:
            self._dir_lock.close()
            self._dir_lock = None

    def abandon(self) -> None:
        """Release the file without writing anything not yet committed (after a failure)."""
        if self._appender is not None:
            self._appender.abandon()
            self._appender = None
        self._close_file()
        self._release_directory()

    def close(self) -> None:
        """Finish the stream and release the file lock (uncommitted rows are an error)."""
        if isinstance(self.sink, PatchEncoder) and self._appender is None:
            self.sink.finish()
            if self._stream is not None:
                self._stream.write(self.sink.take())
                self._stream.flush()
        self._close_file()
        self._release_directory()


def open_patch_log(
    log: PatchLog | str | os.PathLike[str] | IO[bytes],
    options: PatchOptions | None,
    *,
    fmt: str | None = None,
    fsync: bool = False,
    max_segment_bytes: int | None = None,
    max_segment_patches: int | None = None,
) -> PatchLog:
    """The log a recorder writes to: ``log`` itself if it is one, a stream for a
    stream or topic address (``nats://HOST:PORT/STREAM``, ``grpc://HOST:PORT/TOPIC``: the
    source registry's ``writer`` role),
    else a :class:`LogWriter` (the other arguments)."""
    if isinstance(log, PatchLog):
        return log
    if isinstance(log, str) and is_address(log):
        destination = resolve_source(log).require(APPEND, "a recorder")
        if fmt not in (None, "jellyp") or fsync or max_segment_bytes is not None or max_segment_patches is not None:
            raise UsageError(f"{log}: a stream takes no fmt, fsync or segment limits (one message per patch)")
        # The writer's module (the streams package, nats-py when connecting) loads only here.
        return destination.writer()(log, options)
    return LogWriter(
        log,
        options,
        fmt=fmt,
        fsync=fsync,
        max_segment_bytes=max_segment_bytes,
        max_segment_patches=max_segment_patches,
    )


def segment_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The segments of a directory log, in log order."""
    return sorted(p for p in Path(directory).iterdir() if SEGMENT_PATTERN.fullmatch(p.name))


def _segment_info(path: Path) -> tuple[str | None, int]:
    """The chain head of a segment and its number of patches."""
    from patchsync.logs.patch_logs import read_events

    adapter = RdflibTerms()
    return chain_head(read_events(path, adapter=adapter), adapter)


_PATCH_END_LINE = re.compile(rb"^[ \t]*Z[ \t]*\.[^\n]*\n", re.MULTILINE)


def _is_whole_patch(tail: bytes, path: Path) -> bool:
    """Whether ``tail`` (text after the last ``Z .``) is a complete patch: whole lines that
    parse, with every transaction closed and more than headers. A write cut short fails one
    of those (this writer's patches are written whole, headers first)."""
    if not tail.endswith(b"\n"):
        return False
    try:
        items = list(read_units(read_rdfp(tail, RdflibTerms(), source=str(path)), source=str(path)))
    except PatchsyncError:
        return False
    return any(isinstance(item, Unit) for item in items)


def _open_text_log(path: Path) -> tuple[IO[bytes], str | None]:
    """Open an ``.rdfp`` log for appending: lock it, cut a partial last patch, find its head."""
    f = lock_log(path)
    try:
        data = f.read()
        # Every patch this writer produces ends with "Z ."; what follows the last one is
        # either a patch whose write was cut short (cut it) or a whole patch written by
        # another tool that does not end patches with "Z ." (keep it, and close it).
        end = 0
        for m in _PATCH_END_LINE.finditer(data):
            end = m.end()
        adapter = RdflibTerms()
        head, _ = chain_head(read_rdfp(data[:end], adapter, source=str(path)), adapter)
        tail = data[end:]
        if tail.strip() and _is_whole_patch(tail, path):
            head, _ = chain_head(read_rdfp(tail, adapter, source=str(path)), adapter, head=head)
            f.seek(len(data))
            f.write(b"Z .\n")
            f.flush()
            return f, head
        f.truncate(end)
        f.seek(end)
        return f, head
    except BaseException:
        f.close()
        raise
