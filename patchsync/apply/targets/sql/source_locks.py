"""The locks that keep a second applier off a source of a SQL target while the first applies it
(docs/design.md §3): taken when an applier first reads the source's checkpoint, held until the
target closes, so appliers of one source take turns whole runs at a time.

PostgreSQL has session-level advisory locks (:mod:`.dialects.postgres`). SQLite has none, so
each source is a byte of a lock file beside the database (``DB-sources.lock``, at an offset
made from a hash of the source's name), locked with an open file description lock (Linux's
``F_OFD_SETLK``): it goes when the target closes it or its process dies, and it belongs to the
open file, so two targets in one process exclude each other as two PostgreSQL sessions do.
Never the database file itself: closing another descriptor of it would drop SQLite's own
locks. The checkpoint's version check (:mod:`.ledger`) still guards any writer that takes no
lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
from typing import IO

from sqlalchemy import Connection

from patchsync.errors import ApplyError

#: Linux's open file description locks (absent elsewhere: the version check guards alone).
_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
#: ``struct flock`` (type, whence, start, length, pid) as Linux lays it out.
_FLOCK = "hhqqi4x"


class SourceLocks:
    """One target's source locks: none (the version check guards alone)."""

    def take(self, source: str) -> bool:
        """Take the lock of ``source`` (kept until :meth:`release`); whether it was free."""
        return True

    def release(self, conn: Connection | None) -> None:
        """Let go of every lock taken (on ``conn``, the target's connection, where they live
        in its session; ``None`` once the connection is gone)."""


class FileSourceLocks(SourceLocks):
    """A byte per source of the lock file ``path``, locked for this object's life."""

    def __init__(self, path: str, name: str) -> None:
        self.path = path
        self.name = name
        # A file object, not a bare descriptor: a target dropped without closing still
        # lets its locks go when the object is collected.
        self._file: IO[bytes] | None = None

    def take(self, source: str) -> bool:
        if _SETLK is None:
            return True
        if self._file is None:
            try:
                self._file = open(self.path, "ab")  # noqa: SIM115 - held until release()
            except OSError as exc:
                raise ApplyError(f"{self.name}: cannot open the lock file {self.path}: {exc.strerror or exc}") from None
        offset = int.from_bytes(hashlib.blake2b(source.encode(), digest_size=8).digest()) >> 2
        try:
            fcntl.fcntl(self._file.fileno(), _SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
        except (BlockingIOError, PermissionError):
            return False
        return True

    def release(self, conn: Connection | None) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()  # every lock of the open file goes with it


__all__ = ["FileSourceLocks", "SourceLocks"]
