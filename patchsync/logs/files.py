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
    """A file opened for reading (unbuffered) whose opening and reads raise patchsync errors
    naming it instead of ``OSError``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            super().__init__(path, "rb")
        except OSError as exc:
            raise file_error(exc, path, "open") from None

    def read(self, size: int | None = -1, /) -> bytes:
        try:
            return super().read(size) or b""
        except OSError as exc:
            raise file_error(exc, self.path, "read") from None

    def readall(self) -> bytes:
        try:
            return super().readall()
        except OSError as exc:
            raise file_error(exc, self.path, "read") from None

    def readinto(self, buffer: bytearray | memoryview, /) -> int:  # type: ignore[override]
        try:
            return super().readinto(buffer) or 0
        except OSError as exc:
            raise file_error(exc, self.path, "read") from None


__all__ = ["FILE_ERRORS", "PATH_ERRORS", "LogFile", "file_error", "file_errors"]
