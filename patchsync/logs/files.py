"""Log files opened for reading and writing: where the file system's errors become patchsync
errors (one table, :data:`FILE_ERRORS`), so that no ``OSError`` reaches a caller of the log
layer.

A path that names nothing, a directory, or a file this process may not read or write is the
caller's to fix: :class:`UsageError`. Any other failure of the file system (an I/O error, a
full disk) is a :class:`PatchsyncError` naming the file and what failed. Both name the path
and what was being done (``x.jellyp: cannot open: No such file or directory``).
"""

from __future__ import annotations

import errno
import io
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from patchsync.errors import READ_ONLY, ErrorRule, ErrorTable, PatchsyncError, UsageError, cannot_write, errno_in

#: errno values of a path the caller named that cannot be used as asked.
PATH_ERRORS = READ_ONLY | frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.ENXIO, errno.EEXIST}
)

#: How the file system's errors translate, most specific first.
FILE_ERRORS = ErrorTable(
    (ErrorRule("not there, not a file, or not allowed", (OSError,), UsageError, errno_in(PATH_ERRORS)),),
    chain=False,
    default=PatchsyncError,
    reason=lambda exc: getattr(exc, "strerror", None) or str(exc),
)


def file_error(exc: BaseException, path: str | os.PathLike[str], doing: str) -> PatchsyncError:
    """``exc`` (an ``OSError``) from ``doing`` (``open``, ``read``, ``write``) on ``path``."""
    return FILE_ERRORS.translate(exc, f"{os.fspath(path)}: cannot {doing}")


@contextmanager
def file_errors(path: str | os.PathLike[str], doing: str) -> Iterator[None]:
    """Translate any ``OSError`` raised in the block (:func:`file_error`)."""
    try:
        yield
    except OSError as exc:
        raise file_error(exc, path, doing) from None


class LogFile(io.FileIO):
    """A log file, unbuffered, whose opening, reads and writes raise patchsync errors naming
    it instead of ``OSError``.

    ``file`` is a path, or a descriptor already open (its path given as ``name``), which the
    object then owns.
    """

    def __init__(
        self, file: str | os.PathLike[str] | int, mode: str = "rb", *, name: str | os.PathLike[str] | None = None
    ) -> None:
        where = name if name is not None else file
        self.path = str(where) if isinstance(where, int) else os.fspath(where)
        try:
            super().__init__(file, mode)
        except OSError as exc:
            raise file_error(exc, self.path, "open") from None
        self.name = self.path

    def read(self, size: int | None = -1, /) -> bytes:
        with file_errors(self.path, "read"):
            return super().read(size) or b""

    def readall(self) -> bytes:
        with file_errors(self.path, "read"):
            return super().readall()

    def readinto(self, buffer: bytearray | memoryview, /) -> int:  # type: ignore[override]
        with file_errors(self.path, "read"):
            return super().readinto(buffer) or 0

    def pread(self, size: int, offset: int) -> bytes:
        """``size`` bytes at ``offset``, the file position unchanged."""
        with file_errors(self.path, "read"):
            return os.pread(self.fileno(), size, offset)

    def write(self, data: bytes | bytearray | memoryview, /) -> int:  # type: ignore[override]
        with file_errors(self.path, "write"):
            return super().write(data) or 0

    def truncate(self, size: int | None = None, /) -> int:
        with file_errors(self.path, "write"):
            return super().truncate(size)

    def sync(self) -> None:
        """``fsync`` what was written."""
        with file_errors(self.path, "write"):
            os.fsync(self.fileno())


@contextmanager
def replaced_whole(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A file for the new content of ``path``, which replaces ``path`` only when the block ends
    without an error: readers of ``path`` see the old file or the whole new one, never a part.

    The content goes to a hidden file beside ``path`` (same directory, so the rename is
    atomic), synced, then renamed over it; if the block raises, the hidden file is removed and
    ``path`` is untouched. The new file gets the mode ``open(path, "w")`` would leave: that of
    the file it replaces, else 0666 less the umask. A failure to write it is the error of
    ``path`` as the caller named it (:func:`~patchsync.errors.cannot_write`): the hidden
    file's name is no business of the user's.
    """
    target = Path(path)
    try:
        fd, tmp = _hidden_beside(target)
    except OSError as exc:
        raise cannot_write(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        os.unlink(tmp)
        # Writes to the hidden file carry no file name; an error naming another file is
        # the block's own (an input it read) and goes up as it is.
        if exc.filename is None or os.fspath(exc.filename) in (tmp, os.fspath(target)):
            raise cannot_write(exc, path) from None
        raise
    except BaseException:
        os.unlink(tmp)
        raise


def _hidden_beside(target: Path) -> tuple[int, str]:
    """A new file ``.NAME.XXXXXXXX.tmp`` beside ``target``, open for writing, and its path."""
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    while True:
        tmp = os.path.join(target.parent, f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            # 0666 is masked by the umask, as for open(path, "w").
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                os.unlink(tmp)
                raise
        return fd, tmp


__all__ = ["FILE_ERRORS", "PATH_ERRORS", "LogFile", "file_error", "file_errors", "replaced_whole"]
