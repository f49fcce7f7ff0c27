"""Checkpoints and patch records of the SQL target (docs/design.md §3, §4).

``head`` and ``has_patch`` read inside the target's open write transaction see every
applier's committed patches and nothing can change them until it ends (the write lock,
see :mod:`.target`); the head is then read once per transaction.

Each source's checkpoint is written into the same database transaction as the units it
covers, right before it commits, guarded by a version number so two appliers cannot
interleave units of one source; on PostgreSQL an advisory lock per source also makes the
second applier fail up front.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, select

from patchsync.apply.target import Checkpoint, PatchRecord, SourceStatus
from patchsync.apply.targets.sql import schema
from patchsync.apply.targets.sql.statements import Statements
from patchsync.errors import ApplyError

#: No head was read in the open transaction yet.
UNREAD = object()


class Ledger:
    """Checkpoint and patch-history reads and writes for ``SqlTarget`` (a mixin)."""

    name: str
    dialect: str
    _conn: Connection
    _cur: Any
    _mark: str
    sql: Statements
    _records: list[tuple[Any, ...]]
    _record_ids: set[str]
    _versions: dict[str, int | None]
    _locks: set[str]
    _tx: Any
    _tx_head: str | object | None

    def _reading(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

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
        if self.dialect != "postgresql" or source in self._locks:
            return
        with self._reading() as conn:
            got = conn.exec_driver_sql(
                "SELECT pg_try_advisory_lock(hashtextextended('patchsync:' || current_schema() || ':' || %s, 0))",
                (source,),
            ).scalar()
        if not got:
            raise ApplyError(f"{self.name}: another applier is applying {source} to this database")
        self._locks.add(source)

    def head(self) -> str | None:
        for record in reversed(self._records):  # not written yet, but committed units
            if record[0] is not None:
                return str(record[0])
        if self._tx is not None and self._tx_head is not UNREAD:
            # Read under the transaction's write lock: no other applier moved it since.
            return self._tx_head  # type: ignore[return-value]
        p = schema.patches
        with self._reading() as conn:
            value = conn.execute(
                select(p.c.patch_id).where(p.c.patch_id.is_not(None)).order_by(p.c.seq.desc()).limit(1)
            ).scalar()
        value = None if value is None else str(value)
        if self._tx is not None:
            self._tx_head = value
        return value

    def has_patch(self, patch_id: str) -> bool:
        if patch_id in self._record_ids:
            return True
        with self._reading():
            return self._cur.execute(self.sql.has_patch, (patch_id,)).fetchone() is not None

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

    def _write_checkpoint(self, source: str, cp: Checkpoint) -> None:
        version = self._versions.get(source)
        values = (cp.fingerprint, cp.offset, cp.frame, cp.row, cp.patches, cp.last_id, cp.updated_at or time.time())
        if version is None:
            changed = self._conn.exec_driver_sql(
                self.sql.checkpoint_insert,
                (source, *values, 1),
            ).rowcount
            new_version = 1
        else:
            changed = self._conn.exec_driver_sql(
                self.sql.checkpoint_update,
                (*values, version + 1, source, version),
            ).rowcount
            new_version = version + 1
        if changed != 1:
            raise ApplyError(
                f"{self.name}: another applier moved the checkpoint of {source} concurrently; "
                "nothing of this batch was kept, run apply again"
            )
        self._versions[source] = new_version


__all__ = ["Ledger"]
