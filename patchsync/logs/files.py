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
from collections.abc import Iterator
from contextlib import contextmanager

from patchsync.errors import READ_ONLY, ErrorRule, ErrorTable, PatchsyncError, UsageError, errno_in

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


__all__ = ["FILE_ERRORS", "PATH_ERRORS", "LogFile", "file_error", "file_errors"]
