"""The SQL target: quads, namespaces, checkpoints and patch history in SQLite or PostgreSQL.

Hot path: each run of adds (or deletes) from the applier becomes one ``executemany`` of
``INSERT … ON CONFLICT DO NOTHING`` (or ``DELETE … WHERE qh = ?``), or on PostgreSQL a
``COPY`` into a session-temporary staging table followed by one set-based statement,
which pays from a few hundred rows on. The driver's row count is the number of rows that
changed the table, which is exactly the set-semantics count the applier reports.

Transactions: a unit runs in a savepoint inside a database transaction that may hold
several units (DESIGN §2); the transaction commits when it holds enough rows, units or
seconds, and at the end of an apply. The checkpoint of each source is written into that
same transaction right before it commits, guarded by a version number so two appliers
cannot interleave units of one source (on PostgreSQL an advisory lock per source also
makes the second applier fail up front). SQLite transactions start with
``BEGIN IMMEDIATE`` so writers queue instead of failing at commit.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from hashlib import blake2b
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, select
from sqlalchemy.engine import RootTransaction
from sqlalchemy.engine.base import NestedTransaction
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from ...codec.ntriples import NTriplesTerms
from ...errors import ApplyError, TargetUnavailable, UsageError
from ..target import Checkpoint, PatchRecord, Quad, SourceStatus
from . import schema
from .migrate import current_revision, ensure_schema, head_revision, upgrade

_HASH_CACHE_MAX = 1 << 19
_COPY_MIN_ROWS = 256


def create_sql_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` with the per-dialect settings patchsync relies on.

    SQLite waits up to 30 s for another process's lock; ``?timeout=SECONDS`` in the URL
    (the sqlite3 driver's own parameter) sets another wait.
    """
    try:
        engine = create_engine(url)
    except (ArgumentError, ImportError) as exc:
        raise UsageError(f"cannot open target {url!r}: {exc}") from exc
    except SQLAlchemyError as exc:
        raise ApplyError(f"cannot open target {url!r}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        _sqlite_setup(engine)
    elif engine.dialect.name != "postgresql":
        raise UsageError(f"unsupported database {engine.dialect.name!r}: patchsync supports SQLite and PostgreSQL")
    return engine


def _sqlite_setup(engine: Engine) -> None:
    try:
        busy_ms = int(float(str(engine.url.query.get("timeout", "30"))) * 1000)
    except ValueError:
        raise UsageError(f"{engine.url}: timeout must be a number of seconds") from None

    path = engine.url.database

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE is ours to send.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            # SQLite says "unable to open database file" when WAL cannot create its -shm
            # and -wal files next to the database: name the reason it cannot know.
            raise sqlite3.OperationalError(f"{exc}{_unwritable(path)}") from exc
        # WAL + NORMAL: a committed transaction survives a process crash; only power loss
        # can drop the last commits, and then checkpoint and data go back together.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={max(0, busy_ms)}")
        # The hash indexes take inserts at random pages; a 64 MiB page cache (default 2 MiB)
        # doubles the insert rate once the database outgrows the default.
        cursor.execute("PRAGMA cache_size=-65536")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _unwritable(path: str | None) -> str:
    """Why the directory of a SQLite database cannot be written, as a suffix ("" if it can)."""
    if not path or path == ":memory:":
        return ""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return f" ({directory} is on a read-only file system)"
    except OSError:
        return ""
    if not os.access(directory, os.W_OK):
        return f" ({directory} is not writable)"
    return ""


def upgrade_database(url: str, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the patchsync schema of the database at ``url``; returns (before, after)."""
    engine = create_sql_engine(url)
    try:
        with engine.begin() as conn:
            before = current_revision(conn)
            upgrade(conn, revision)
            after = current_revision(conn)
    except SQLAlchemyError as exc:
        raise ApplyError(f"{_safe_url(engine)}: schema upgrade failed: {exc}") from exc
    finally:
        engine.dispose()
    return before, after or head_revision()


def _safe_url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


class SqlTarget:
    """A SQLite or PostgreSQL database as an apply target (see the module docstring).

    ``url`` is a SQLAlchemy URL or an :class:`~sqlalchemy.Engine`. An empty database gets
    the schema on first use; one at an older revision needs ``patchsync db upgrade``.
    ``group_rows``, ``group_units`` and ``group_seconds`` bound how much one database
    transaction holds before it commits.
    """

    def __init__(
        self,
        url: str | Engine,
        *,
        group_rows: int = 200_000,
        group_units: int = 5_000,
        group_seconds: float = 2.0,
    ) -> None:
        self.adapter = NTriplesTerms()
        self._own_engine = isinstance(url, str)
        self.engine = create_sql_engine(url) if isinstance(url, str) else url
        self.name = _safe_url(self.engine)
        self.dialect = self.engine.dialect.name
        self.group_rows = group_rows
        self.group_units = group_units
        self.group_seconds = group_seconds
        self._tx: RootTransaction | None = None
        self._sp: NestedTransaction | None = None
        self._versions: dict[str, int | None] = {}
        self._pending: dict[str, Checkpoint] = {}
        self._locks: set[str] = set()
        self._hashes: dict[str, int] = {}
        self._group_rows = 0
        self._group_units = 0
        self._group_start = 0.0
        self._staging = False
        pg = self.dialect == "postgresql"
        mark = "%s" if pg else "?"
        self._insert_sql = (
            "INSERT INTO ps_quads (qh, gh, sh, ph, oh, g, s, p, o) VALUES "
            f"({', '.join([mark] * 9)}) ON CONFLICT (qh) DO NOTHING"
        )
        self._delete_sql = f"DELETE FROM ps_quads WHERE qh = {mark}"
        self._ns_upsert = (
            f"INSERT INTO ps_namespaces (g, prefix, iri) VALUES ({mark}, {mark}, {mark}) "
            "ON CONFLICT (g, prefix) DO UPDATE SET iri = excluded.iri"
        )
        self._ns_delete = f"DELETE FROM ps_namespaces WHERE g = {mark} AND prefix = {mark}"
        self._record_sql = (
            "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, noop, "
            f"applied_at, headers) VALUES ({', '.join([mark] * 11)})"
        )
        self._mark = mark
        try:
            self._conn = self.engine.connect()
            with self._conn.begin():
                ensure_schema(self._conn)
        except SQLAlchemyError as exc:
            self._dispose()
            raise ApplyError(f"{self.name}: cannot open the database: {_reason(exc)}") from exc
        except BaseException:
            self._dispose()
            raise

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            # Driver errors come unwrapped from the COPY path (a raw driver cursor).
            if not isinstance(exc, SQLAlchemyError) and not _is_driver_error(exc):
                raise
            kind = TargetUnavailable if is_transient(exc) else ApplyError
            raise kind(f"{self.name}: {what} failed: {_reason(exc)}") from exc

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """The connection, inside the open transaction or a short one of its own."""
        with self._guard("reading"):
            if self._tx is not None:
                yield self._conn
            else:
                with self._conn.begin():
                    yield self._conn

    def _h(self, term: str) -> int:
        h = self._hashes.get(term)
        if h is None:
            if len(self._hashes) >= _HASH_CACHE_MAX:
                self._hashes.clear()
            h = self._hashes[term] = int.from_bytes(
                blake2b(term.encode("utf-8"), digest_size=8).digest(), "big", signed=True
            )
        return h

    def _rows(self, quads: Sequence[Quad]) -> list[tuple[Any, ...]]:
        h = self._h
        out = []
        for s, p, o, g in quads:
            g = g or ""
            qh = blake2b(f"{g}\n{s}\n{p}\n{o}".encode(), digest_size=16).digest()
            out.append((qh, h(g), h(s), h(p), h(o), g, s, p, o))
        return out

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
        p = schema.patches
        with self._reading() as conn:
            value = conn.execute(
                select(p.c.patch_id).where(p.c.patch_id.is_not(None)).order_by(p.c.seq.desc()).limit(1)
            ).scalar()
        return None if value is None else str(value)

    def has_patch(self, patch_id: str) -> bool:
        p = schema.patches
        with self._reading() as conn:
            return conn.execute(select(p.c.seq).where(p.c.patch_id == patch_id).limit(1)).first() is not None

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        q = schema.quads
        with self._reading() as conn:
            result = conn.execution_options(yield_per=10_000).execute(
                select(q.c.s, q.c.p, q.c.o, q.c.g).order_by(q.c.g, q.c.s, q.c.p, q.c.o)
            )
            for row in result:
                yield (row[0], row[1], row[2], row[3])

    def namespaces(self) -> dict[tuple[str, str], str]:
        n = schema.namespaces
        with self._reading() as conn:
            return {(r.g, r.prefix): r.iri for r in conn.execute(select(n))}

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
            )
            for r in rows
        ]

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        with self._guard("starting a unit"):
            if self._tx is None:
                self._tx = self._conn.begin()
                self._group_start = time.monotonic()
            self._sp = self._conn.begin_nested()

    def add(self, quads: Sequence[Quad]) -> int:
        rows = self._rows(quads)
        self._group_rows += len(rows)
        with self._guard("adding quads"):
            if self.dialect == "postgresql" and len(rows) >= _COPY_MIN_ROWS:
                return self._copy_apply(rows, add=True)
            return int(self._conn.exec_driver_sql(self._insert_sql, rows).rowcount)

    def delete(self, quads: Sequence[Quad]) -> int:
        rows = self._rows(quads)
        self._group_rows += len(rows)
        with self._guard("deleting quads"):
            if self.dialect == "postgresql" and len(rows) >= _COPY_MIN_ROWS:
                return self._copy_apply(rows, add=False)
            keys = [(r[0],) for r in rows]
            return int(self._conn.exec_driver_sql(self._delete_sql, keys).rowcount)

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present (one query per 500 quads)."""
        keys = [r[0] for r in self._rows(quads)]
        found: set[bytes] = set()
        with self._guard("looking up quads"):
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                marks = ", ".join([self._mark] * len(chunk))
                result = self._conn.exec_driver_sql(f"SELECT qh FROM ps_quads WHERE qh IN ({marks})", tuple(chunk))
                found.update(bytes(row[0]) for row in result)
        return [k in found for k in keys]

    def _copy_apply(self, rows: list[tuple[Any, ...]], *, add: bool) -> int:
        # COPY into a staging table, then one set-based statement. A row repeated inside
        # the batch is counted once either way, as executemany in log order would.
        cursor = self._conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        if not self._staging:
            cursor.execute(
                "CREATE TEMP TABLE IF NOT EXISTS ps_stage "
                "(qh bytea, gh bigint, sh bigint, ph bigint, oh bigint, g text, s text, p text, o text)"
            )
            self._staging = True
        cursor.execute("TRUNCATE ps_stage")
        if add:
            with cursor.copy("COPY ps_stage (qh, gh, sh, ph, oh, g, s, p, o) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            cursor.execute(
                "INSERT INTO ps_quads (qh, gh, sh, ph, oh, g, s, p, o) "
                "SELECT qh, gh, sh, ph, oh, g, s, p, o FROM ps_stage ON CONFLICT (qh) DO NOTHING"
            )
        else:
            with cursor.copy("COPY ps_stage (qh) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((row[0],))
            cursor.execute("DELETE FROM ps_quads q USING ps_stage st WHERE q.qh = st.qh")
        return int(cursor.rowcount)

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        with self._guard("binding a prefix"):
            self._conn.exec_driver_sql(self._ns_upsert, (graph or "", name, iri))

    def delete_prefix(self, graph: Any, name: str) -> None:
        with self._guard("removing a prefix"):
            self._conn.exec_driver_sql(self._ns_delete, (graph or "", name))

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        with self._guard("committing a unit"):
            if records:
                self._conn.exec_driver_sql(
                    self._record_sql,
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
                        )
                        for r in records
                    ],
                )
            if self._sp is not None:
                self._sp.commit()
                self._sp = None
        self._pending[source] = checkpoint
        self._group_units += 1
        if (
            self._group_rows >= self.group_rows
            or self._group_units >= self.group_units
            or time.monotonic() - self._group_start >= self.group_seconds
        ):
            self.flush()

    def rollback(self) -> None:
        with self._guard("rolling back a unit"):
            if self._sp is not None:
                sp, self._sp = self._sp, None
                sp.rollback()

    def flush(self) -> None:
        """Write the pending checkpoints and commit the database transaction."""
        if self._tx is None:
            return
        tx = self._tx
        try:
            with self._guard("committing"):
                if self._sp is not None:
                    # An open unit never reaches the commit; it would be incomplete.
                    self._sp.rollback()
                    self._sp = None
                for source, cp in self._pending.items():
                    self._write_checkpoint(source, cp)
                tx.commit()
        except BaseException:
            self._abandon()
            raise
        self._tx = None
        self._pending.clear()
        self._group_rows = self._group_units = 0

    def _abandon(self) -> None:
        """Drop the open database transaction and forget what it held."""
        try:
            if self._tx is not None and self._tx.is_active:
                self._tx.rollback()
        except SQLAlchemyError:
            pass
        self._tx = None
        self._sp = None
        self._pending.clear()
        self._group_rows = self._group_units = 0
        # Versions read before may be stale now: re-read on the next checkpoint().
        self._versions.clear()

    def _write_checkpoint(self, source: str, cp: Checkpoint) -> None:
        m = self._mark
        version = self._versions.get(source)
        values = (cp.fingerprint, cp.offset, cp.frame, cp.row, cp.patches, cp.last_id, cp.updated_at or time.time())
        if version is None:
            changed = self._conn.exec_driver_sql(
                "INSERT INTO ps_sources (source, fingerprint, pos_offset, pos_frame, pos_row, patches, last_id, "
                f"updated_at, version) VALUES ({', '.join([m] * 9)}) ON CONFLICT (source) DO NOTHING",
                (source, *values, 1),
            ).rowcount
            new_version = 1
        else:
            changed = self._conn.exec_driver_sql(
                f"UPDATE ps_sources SET fingerprint = {m}, pos_offset = {m}, pos_frame = {m}, pos_row = {m}, "
                f"patches = {m}, last_id = {m}, updated_at = {m}, version = {m} WHERE source = {m} AND version = {m}",
                (*values, version + 1, source, version),
            ).rowcount
            new_version = version + 1
        if changed != 1:
            raise ApplyError(
                f"{self.name}: another applier moved the checkpoint of {source} concurrently; "
                "nothing of this batch was kept, run apply again"
            )
        self._versions[source] = new_version

    def close(self) -> None:
        """Flush committed units, release locks and the connection."""
        try:
            self.flush()
        finally:
            self._dispose()

    def discard(self) -> None:
        """Close without committing anything pending (what a crash leaves behind)."""
        self._abandon()
        self._dispose()

    def _dispose(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            try:
                if self._locks and not conn.closed:
                    with conn.begin():
                        conn.exec_driver_sql("SELECT pg_advisory_unlock_all()")
                conn.close()
            except SQLAlchemyError:
                pass
            self._conn = None  # type: ignore[assignment]
        self._locks.clear()
        if self._own_engine:
            self.engine.dispose()

    def __enter__(self) -> SqlTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.discard()


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    lines = str(orig if orig is not None else exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# SQLSTATEs after which the same work can succeed on a new connection: connection
# exceptions (class 08), the server shutting down or starting (57P01-57P03), too many
# connections, and a transaction the server chose to abort (serialization, deadlock).
_TRANSIENT_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})
# SQLITE_BUSY and SQLITE_LOCKED (primary codes): another connection holds the lock.
_SQLITE_BUSY = frozenset({5, 6})


def _is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("psycopg", "sqlite3")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) means "out of reach, retry later".

    True for a lost or refused PostgreSQL connection, a server shutting down or restarting,
    and a SQLite database locked by another process beyond the busy timeout; False for
    errors that a retry repeats (disk full, read-only files, constraint or schema errors).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TargetUnavailable):
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        orig = getattr(current, "orig", None) if isinstance(current, SQLAlchemyError) else current
        if orig is not None and _is_driver_error(orig):
            module = type(orig).__module__
            if module.startswith("psycopg"):
                import psycopg

                code = getattr(orig, "sqlstate", None)
                if code is None:
                    # No SQLSTATE: the failure happened on the connection itself (refused,
                    # closed by the server), never in a statement.
                    return isinstance(orig, psycopg.OperationalError)
                return str(code).startswith("08") or code in _TRANSIENT_SQLSTATES
            errorcode = getattr(orig, "sqlite_errorcode", None)
            if isinstance(errorcode, int):
                return errorcode & 0xFF in _SQLITE_BUSY
            return "database is locked" in str(orig)
        current = current.__cause__ or current.__context__
    return False
