"""A log's version index on disk: version -> frame position, patch id -> version, and
decoder checkpoints, so that a patch anywhere in a log is found without reading what
comes before it (docs/decisions/0023-version-index.md).

The index of a log is one SQLite file (:func:`index_path`: ``.NAME.idx`` beside a
``.jellyp`` file, ``.patchsync.idx`` inside a segment directory). It holds

- ``segments``: each segment's name, fingerprint (its first frame), the bytes indexed,
  its first version and the hash of the bytes just before its indexed end (the *anchor*);
- ``patches``: each patch's version, id, segment and the offset of its first frame;
- ``checkpoints``: where a decoder can start without reading what comes before: every
  stream start (an options row: ``state`` is empty, a fresh decoder starts there) and,
  inside a stream of many patches, every few patches the decoder's state (its lookup
  tables, :mod:`patchsync.logs.resume_point`'s checksummed format, its lookup entries as
  columns, compressed).

Every row carries a CRC-32 of its fields, checked when it is read: a row that does not
match raises :class:`IndexCorrupt`, as does an SQLite file that is not one. The index is
derived data: whoever holds it throws it away and builds it again then
(:mod:`patchsync.logs.indexed_log`), it never answers from it.

Rows are added in transactions, the file in WAL mode: a process killed while writing
leaves the last committed state, which SQLite restores on the next opening, and the
indexed end of each segment is committed with its rows, so what the log holds beyond it
is indexed again from the last checkpoint.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from patchsync.errors import PatchsyncError

#: The index format this code writes and reads; an index of another one is built again.
#: Format 1 held its checkpoints' states as JSON (resume point version 2).
INDEX_FORMAT = "patchsync-version-index 2"
#: The index of a segment directory, inside it.
DIRECTORY_INDEX = ".patchsync.idx"
log = logging.getLogger("patchsync.index")

#: SQLite errors that mean the file is not a usable index (corrupt, foreign, truncated).
_BROKEN = (sqlite3.DatabaseError,)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    seq INTEGER PRIMARY KEY, name TEXT NOT NULL, fingerprint TEXT NOT NULL, size INTEGER NOT NULL,
    first_version INTEGER NOT NULL, anchor TEXT NOT NULL, crc INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS patches (
    version INTEGER PRIMARY KEY, id TEXT NOT NULL, seq INTEGER NOT NULL, offset INTEGER NOT NULL,
    crc INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS patch_ids ON patches (id);
CREATE TABLE IF NOT EXISTS checkpoints (
    version INTEGER PRIMARY KEY, seq INTEGER NOT NULL, offset INTEGER NOT NULL, state BLOB,
    crc INTEGER NOT NULL);
"""


class IndexCorrupt(PatchsyncError):
    """An index file that is not a valid index (its rows fail their checksums, or SQLite
    cannot read it): it is never used, only built again."""


def index_path(log: Path) -> Path:
    """Where the index of ``log`` (a ``.jellyp`` file or a segment directory) lives."""
    if log.is_dir():
        return log / DIRECTORY_INDEX
    return log.with_name(f".{log.name}.idx")


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """What the index knows of one segment (``seq`` counts segments from 0, in log order)."""

    seq: int
    name: str
    fingerprint: str
    size: int
    first_version: int
    anchor: str


@dataclass(frozen=True, slots=True)
class PatchRow:
    """One patch: its version, id, segment and the offset of its first frame."""

    version: int
    patch_id: str
    seq: int
    offset: int
    #: Whether a stream starts at ``offset`` (the patch's bytes need nothing before them).
    starts_stream: bool = False


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A place a decoder can start: the first patch it decodes is ``version``.

    ``state`` is empty at a stream start (a fresh decoder reads the options row there),
    else a compressed decoder snapshot (:func:`patchsync.logs.resume_point.encode_resume_point`).
    """

    version: int
    seq: int
    offset: int
    state: bytes | None


def _crc(*fields: object) -> int:
    data = b"\0".join(f if isinstance(f, bytes) else str(f).encode("utf-8") for f in fields)
    return zlib.crc32(data)


class VersionIndex:
    """The index file of one log (see the module docstring); ``path`` ``None``: in memory.

    Safe to share between threads: every call holds one lock around its statement(s).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        where = ":memory:" if path is None else str(path)
        try:
            self._db = sqlite3.connect(where, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise IndexCorrupt(f"{where}: cannot open the version index: {exc}") from None
        try:
            self._setup()
        except BaseException:
            self._db.close()
            raise

    def _setup(self) -> None:
        with self._broken("open"):
            # WAL: a reader never waits for the writer; NORMAL: a commit survives a killed
            # process (the WAL is written before the commit returns), not a power cut, which
            # the anchors and sizes then find (docs/serving.md).
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is None:
                if self._db.execute("SELECT 1 FROM segments LIMIT 1").fetchone() is not None:
                    raise IndexCorrupt(f"{self.where}: rows without a format record")
                self._db.execute("INSERT INTO meta VALUES ('format', ?)", (INDEX_FORMAT,))
            elif row[0] != INDEX_FORMAT:
                raise IndexCorrupt(f"{self.where}: index format {row[0]!r}, not {INDEX_FORMAT!r}")

    @property
    def where(self) -> str:
        """The index file, as errors name it."""
        return str(self.path) if self.path is not None else "(in-memory version index)"

    @contextmanager
    def _broken(self, doing: str) -> Iterator[None]:
        try:
            yield
        except _BROKEN as exc:
            raise IndexCorrupt(f"{self.where}: cannot {doing}: {exc}") from None

    def close(self) -> None:
        """Close the file (what was committed stays)."""
        with self._lock:
            self._db.close()

    # -- reading -----------------------------------------------------------------------

    def segments(self) -> list[SegmentRecord]:
        """The segments indexed, in log order."""
        with self._lock, self._broken("read segments"):
            rows = self._db.execute(
                "SELECT seq, name, fingerprint, size, first_version, anchor, crc FROM segments ORDER BY seq"
            ).fetchall()
        out = []
        for number, (seq, name, fp, size, first, anchor, crc) in enumerate(rows):
            if seq != number or crc != _crc(seq, name, fp, size, first, anchor):
                raise IndexCorrupt(f"{self.where}: segment record {seq} fails its checksum")
            out.append(SegmentRecord(seq, name, fp, size, first, anchor))
        return out

    def head(self) -> PatchRow | None:
        """The last patch indexed, or ``None``."""
        with self._lock, self._broken("read the head"):
            row = self._db.execute(
                "SELECT version, id, seq, offset, crc FROM patches ORDER BY version DESC LIMIT 1"
            ).fetchone()
        return None if row is None else self._patch(row)

    def version_of(self, patch_id: str) -> int | None:
        """The version of the first patch with id ``patch_id``, or ``None``."""
        with self._lock, self._broken("look up a patch id"):
            row = self._db.execute(
                "SELECT version, id, seq, offset, crc FROM patches WHERE id = ? ORDER BY version LIMIT 1", (patch_id,)
            ).fetchone()
        return None if row is None else self._patch(row).version

    def rows(self, first: int, last: int) -> list[PatchRow]:
        """The patches of versions ``first`` to ``last`` in order, each marked if a stream starts at it."""
        with self._lock, self._broken("read patches"):
            rows = self._db.execute(
                "SELECT p.version, p.id, p.seq, p.offset, p.crc, c.offset FROM patches p "
                "LEFT JOIN checkpoints c ON c.version = p.version AND c.state IS NULL "
                "WHERE p.version BETWEEN ? AND ? ORDER BY p.version",
                (first, last),
            ).fetchall()
        out = []
        for row in rows:
            patch = self._patch(row[:5])
            if row[5] is not None and row[5] == patch.offset:
                patch = PatchRow(patch.version, patch.patch_id, patch.seq, patch.offset, starts_stream=True)
            out.append(patch)
        if out and [r.version for r in (out[0], out[-1])] != [first, first + len(out) - 1]:
            raise IndexCorrupt(f"{self.where}: versions {first} to {last} are not contiguous")
        return out

    def checkpoint_at(self, version: int) -> Checkpoint | None:
        """The last checkpoint at or before ``version`` (``None``: none)."""
        with self._lock, self._broken("read checkpoints"):
            row = self._db.execute(
                "SELECT version, seq, offset, state, crc FROM checkpoints WHERE version <= ? "
                "ORDER BY version DESC LIMIT 1",
                (version,),
            ).fetchone()
        if row is None:
            return None
        version, seq, offset, state, crc = row
        if crc != _crc(version, seq, offset, state or b""):
            raise IndexCorrupt(f"{self.where}: checkpoint at version {version} fails its checksum")
        return Checkpoint(version, seq, offset, state)

    def _patch(self, row: tuple[int, str, int, int, int]) -> PatchRow:
        version, patch_id, seq, offset, crc = row
        if crc != _crc(version, patch_id, seq, offset):
            raise IndexCorrupt(f"{self.where}: the record of version {version} fails its checksum")
        return PatchRow(version, patch_id, seq, offset)

    # -- writing -----------------------------------------------------------------------

    def add(
        self,
        patches: Iterable[PatchRow],
        checkpoints: Iterable[Checkpoint],
        segment: SegmentRecord,
    ) -> None:
        """Record patches and checkpoints, and the segment's new indexed end, in one transaction."""
        with self._lock, self._broken("write"):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO patches VALUES (?, ?, ?, ?, ?)",
                    [
                        (p.version, p.patch_id, p.seq, p.offset, _crc(p.version, p.patch_id, p.seq, p.offset))
                        for p in patches
                    ],
                )
                db.executemany(
                    "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                    [
                        (c.version, c.seq, c.offset, c.state, _crc(c.version, c.seq, c.offset, c.state or b""))
                        for c in checkpoints
                    ],
                )
                self._record(segment)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def forget_before(self, version: int, segment: SegmentRecord) -> None:
        """Forget every patch and checkpoint before ``version`` (the log's start was removed:
        a stream's retention) and record ``segment`` as it now is, in one transaction."""
        with self._lock, self._broken("write"):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM patches WHERE version < ?", (version,))
                db.execute("DELETE FROM checkpoints WHERE version < ?", (version,))
                self._record(segment)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _record(self, s: SegmentRecord) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO segments VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                s.seq,
                s.name,
                s.fingerprint,
                s.size,
                s.first_version,
                s.anchor,
                _crc(s.seq, s.name, s.fingerprint, s.size, s.first_version, s.anchor),
            ),
        )

    def cut(self, seq: int, version: int) -> None:
        """Forget segment ``seq`` and after, and every patch and checkpoint from ``version`` on
        (what is indexed again next)."""
        with self._lock, self._broken("write"):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM segments WHERE seq >= ?", (seq,))
                db.execute("DELETE FROM patches WHERE version >= ?", (version,))
                db.execute("DELETE FROM checkpoints WHERE version >= ?", (version,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise


def remove_index(path: Path) -> None:
    """Delete an index file and its SQLite companions (a broken index is built again)."""
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with suppress(FileNotFoundError):
            os.unlink(name)


def open_index(path: Path | None) -> VersionIndex:
    """The index at ``path`` as every owner opens it: one that cannot be read (not SQLite,
    another format) is deleted and an empty one made in its place, with one warning; where
    the index cannot be written (its directory missing or read-only), or ``path`` is
    ``None``, an index in memory (:attr:`VersionIndex.path` tells which)."""
    if path is not None and not os.access(path.parent, os.W_OK):
        log.warning("%s: cannot write the version index here; keeping it in memory", path)
        path = None
    try:
        return VersionIndex(path)
    except IndexCorrupt as exc:
        if path is None:
            raise
        log.warning("%s; building the version index again", exc)
        remove_index(path)
        return VersionIndex(path)


__all__ = [
    "DIRECTORY_INDEX",
    "INDEX_FORMAT",
    "Checkpoint",
    "IndexCorrupt",
    "PatchRow",
    "SegmentRecord",
    "VersionIndex",
    "index_path",
    "open_index",
    "remove_index",
]
