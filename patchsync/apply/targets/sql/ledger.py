"""Checkpoints and patch records of the SQL target (docs/design.md §3, §4).

``head`` and ``has_patch`` read inside the target's open write transaction see every
applier's committed patches and nothing can change them until it ends (the write lock,
see :mod:`.target`); the head is then read once per transaction.

Each source's checkpoint is written into the same database transaction as the units it
covers, right before it commits, guarded by a version number so two appliers cannot
interleave units of one source. Before that, the first read of a source's checkpoint takes
the source's lock (:mod:`.source_locks`), held until the target closes: a second applier of
the source gets :class:`SourceBusy` up front, with the source's version as the other
applier left it (its progress, which a caller waiting for its turn watches).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from patchsync.apply.target import Checkpoint, PatchRecord, SourceStatus
from patchsync.apply.targets.sql import schema
from patchsync.apply.targets.sql.dialects.base import Dialect, Reading
from patchsync.apply.targets.sql.link import Link
from patchsync.errors import ApplyError, SourceBusy

#: No head was read in the open transaction yet.
UNREAD = object()


class Ledger:
    """Checkpoint and patch-history reads and writes of one ``SqlTarget``, a part it holds.

    Patch records and checkpoints of the units committed in the open transaction are held
    here until :meth:`write` sends them with its commit. ``reading`` is the target's way of
    reading (inside its open transaction, or a short one of its own).
    """

    def __init__(self, link: Link, dialect: Dialect, reading: Reading) -> None:
        self.link = link
        self.dialect = dialect
        self.sql = dialect.statements
        self._reading = reading
        # Patch records of the committed units of the open transaction, written at its commit.
        self._records: list[tuple[Any, ...]] = []
        self._record_ids: set[str] = set()
        # Per source: the checkpoint version this applier's next write expects to replace.
        self._versions: dict[str, int | None] = {}
        self._pending: dict[str, Checkpoint] = {}
        self._locks: set[str] = set()
        self._source_locks = dialect.source_locks(link, reading)
        self._in_tx = False
        # The target's head read in the open transaction, which holds the write lock: only
        # this target's own records can move it until the transaction ends.
        self._tx_head: str | object | None = UNREAD

    # -- reads -------------------------------------------------------------------------

    def checkpoint(self, source: str) -> Checkpoint | None:
        self._lock(source)
        with self._reading() as conn:
            row = conn.execute(select(schema.sources).where(schema.sources.c.source == source)).first()
        # The version read here is what this applier's next checkpoint write expects to replace.
        if row is None:
            self._versions[source] = None
            return None
        self._versions[source] = row.version
        return Checkpoint(
            row.pos_offset, row.pos_frame, row.pos_row, row.patches, row.last_id, row.fingerprint, row.updated_at
        )

    def _lock(self, source: str) -> None:
        if source in self._locks:
            return
        if not self._source_locks.take(source):
            with self._reading() as conn:
                row = conn.execute(select(schema.sources).where(schema.sources.c.source == source)).first()
            at = f" (at patch {row.patches})" if row is not None else ""
            raise SourceBusy(
                f"{self.link.name}: another applier is applying {source} to this database{at}",
                progress=None if row is None else row.version,
            )
        self._locks.add(source)

    def head(self) -> str | None:
        for record in reversed(self._records):  # not written yet, but committed units
            if record[0] is not None:
                return str(record[0])
        if self._in_tx and self._tx_head is not UNREAD:
            # Read under the transaction's write lock: no other applier moved it since.
            return self._tx_head  # type: ignore[return-value]
        p = schema.patches
        with self._reading() as conn:
            value = conn.execute(
                select(p.c.patch_id).where(p.c.patch_id.is_not(None)).order_by(p.c.seq.desc()).limit(1)
            ).scalar()
        value = None if value is None else str(value)
        if self._in_tx:
            self._tx_head = value
        return value

    def has_patch(self, patch_id: str) -> bool:
        if patch_id in self._record_ids:
            return True
        with self._reading():
            return self.link.cur.execute(self.sql.has_patch, (patch_id,)).fetchone() is not None

    def sources(self) -> list[SourceStatus]:
        s = schema.sources
        with self._reading() as conn:
            rows = conn.execute(select(s).order_by(s.c.source)).all()
        return [
            SourceStatus(
                r.source,
                Checkpoint(r.pos_offset, r.pos_frame, r.pos_row, r.patches, r.last_id, r.fingerprint, r.updated_at),
            )
            for r in rows
        ]

    def history(self, source: str | None = None) -> list[PatchRecord]:
        """Applied patches in order, of one source or all."""
        p = schema.patches
        stmt = select(p).order_by(p.c.seq)
        if source is not None:
            stmt = stmt.where(p.c.source == source)
        with self._reading() as conn:
            rows = conn.execute(stmt).all()
        return [
            PatchRecord(
                r.patch_id,
                r.prev,
                r.source,
                r.pos_offset,
                r.pos_frame,
                r.pos_row,
                r.added,
                r.deleted,
                r.noop,
                r.applied_at,
                tuple((k, v) for k, v in json.loads(r.headers)),
                bool(r.chained),
            )
            for r in rows
        ]

    # -- the open transaction ----------------------------------------------------------

    def transaction_started(self) -> None:
        """A write transaction began: the head is read again, once, inside it."""
        self._in_tx = True
        self._tx_head = UNREAD

    def note(self, records: Sequence[PatchRecord]) -> None:
        """Patch records of a committed unit, written with the transaction's commit."""
        self._records.extend(
            [
                (
                    r.patch_id,
                    r.prev,
                    r.source,
                    r.offset,
                    r.frame,
                    r.row,
                    r.added,
                    r.deleted,
                    r.noop,
                    r.applied_at,
                    json.dumps([list(h) for h in r.headers], ensure_ascii=False),
                    r.chained,
                )
                for r in records
            ],
        )
        self._record_ids.update(r.patch_id for r in records if r.patch_id is not None)

    def stage(self, source: str, checkpoint: Checkpoint) -> None:
        """The checkpoint of ``source`` after a committed unit, written with the transaction's commit."""
        self._pending[source] = checkpoint

    def write(self, conn: Connection) -> None:
        """Send the held records and checkpoints, in the transaction about to commit."""
        if self._records:
            self.dialect.write_records(self.link.cur, self._records)
        for source, cp in self._pending.items():
            self._write_checkpoint(conn, source, cp)

    def committed(self) -> None:
        """The transaction committed with what :meth:`write` sent."""
        self._in_tx = False
        self._records.clear()
        self._record_ids.clear()
        self._pending.clear()

    def abandoned(self) -> None:
        """The transaction was dropped with whatever it held."""
        self.committed()
        # Versions read before may be stale now: re-read on the next checkpoint().
        self._versions.clear()

    def release_locks(self, conn: Connection | None) -> None:
        """Release the source locks (on ``conn``; ``None``: they went with the session)."""
        self._locks = set()
        self._source_locks.release(conn)

    def _write_checkpoint(self, conn: Connection, source: str, cp: Checkpoint) -> None:
        version = self._versions.get(source)
        values = (cp.fingerprint, cp.offset, cp.frame, cp.row, cp.patches, cp.last_id, cp.updated_at or time.time())
        if version is None:
            changed = conn.exec_driver_sql(
                self.sql.checkpoint_insert,
                (source, *values, 1),
            ).rowcount
            new_version = 1
        else:
            changed = conn.exec_driver_sql(
                self.sql.checkpoint_update,
                (*values, version + 1, source, version),
            ).rowcount
            new_version = version + 1
        if changed != 1:
            raise ApplyError(
                f"{self.link.name}: another applier moved the checkpoint of {source} concurrently; "
                "nothing of this batch was kept, run apply again"
            )
        self._versions[source] = new_version


__all__ = ["UNREAD", "Ledger"]
