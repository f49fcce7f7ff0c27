"""The SQL target: quads, namespaces, checkpoints and patch history in SQLite or PostgreSQL.

Hot path: quads are stored as four term ids (see :mod:`.schema`). Term ids are cached in
memory; terms missing from the cache are looked up by hash in one query per few hundred
and new ones inserted in bulk. On SQLite, which has one writer at a time, the cache knows
when it holds every term in the database (nothing else wrote terms since it last looked)
and then skips the lookups. Each run of adds (or deletes) from the applier becomes one
``executemany`` of ``INSERT … ON CONFLICT DO NOTHING`` (``DELETE … WHERE`` the key) on
SQLite, or one set-based statement over arrays (``unnest``) on PostgreSQL. The driver's row
count is the number of rows that changed the table, which is exactly the set-semantics
count the applier reports.

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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, select
from sqlalchemy.engine import RootTransaction
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

from patchsync.apply.target import Checkpoint, PatchRecord, Quad, SourceStatus
from patchsync.apply.targets.sql import schema
from patchsync.apply.targets.sql.migrate import current_revision, ensure_schema, head_revision, upgrade
from patchsync.apply.targets.sql.schema import term_hash
from patchsync.errors import ApplyError, TargetUnavailable, UsageError
from patchsync.terms.ntriples import NTriplesTerms

# Term ids kept in memory by default (~100 MB of a daemon's memory at most on typical data);
# beyond this the cache starts again (and is no longer complete).
TERM_CACHE_SIZE = 1 << 19
_LOOKUP_CHUNK = 500


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
        # Inserts land all over the term and quad indexes; a 64 MiB page cache (default 2 MiB)
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
    transaction holds before it commits. ``term_cache`` bounds how many term ids are kept
    in memory (the main part of a long-running applier's memory).
    """

    def __init__(
        self,
        url: str | Engine,
        *,
        group_rows: int = 200_000,
        group_units: int = 5_000,
        group_seconds: float = 2.0,
        term_cache: int = TERM_CACHE_SIZE,
    ) -> None:
        self.adapter = NTriplesTerms()
        self._own_engine = isinstance(url, str)
        self.engine = create_sql_engine(url) if isinstance(url, str) else url
        self.name = _safe_url(self.engine)
        self.dialect = self.engine.dialect.name
        self._dbapi_error: type[Exception] = self.engine.dialect.loaded_dbapi.Error
        self.group_rows = group_rows
        self.group_units = group_units
        self.group_seconds = group_seconds
        self.term_cache = term_cache
        self._tx: RootTransaction | None = None
        self._in_unit = False  # a SAVEPOINT for the open unit is set
        self._term_conn: Any = None
        self._failed = False  # a database error was seen: the connection may be dead
        # Patch records of the committed units of the open transaction, written at flush.
        self._records: list[tuple[Any, ...]] = []
        self._record_ids: set[str] = set()
        self._term_cur: Any = None
        self._versions: dict[str, int | None] = {}
        self._pending: dict[str, Checkpoint] = {}
        self._locks: set[str] = set()
        # Term text -> id. Entries first stored by the open unit / transaction are listed so
        # a rollback can forget them; ids read from the database stay valid (never deleted).
        self._ids: dict[str, int] = {}
        self._unit_terms: list[str] = []
        self._tx_terms: list[str] = []
        # SQLite only: whether the cache holds every term of the database, the largest id
        # when that was last checked, and the next id to hand out (we hold the write lock).
        self._complete = False
        self._known_max: int | None = None
        self._next_id = 1
        self._group_rows = 0
        self._group_units = 0
        self._group_start = 0.0
        pg = self.dialect == "postgresql"
        mark = "%s" if pg else "?"
        if pg:
            arrays = "unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
            self._insert_sql = f"INSERT INTO ps_quads (s, p, o, g) SELECT * FROM {arrays} ON CONFLICT DO NOTHING"
            self._delete_sql = (
                f"DELETE FROM ps_quads q USING {arrays} AS d(s, p, o, g) "
                "WHERE q.s = d.s AND q.p = d.p AND q.o = d.o AND q.g = d.g"
            )
        else:
            self._insert_sql = "INSERT INTO ps_quads (s, p, o, g) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
            self._delete_sql = "DELETE FROM ps_quads WHERE s = ? AND p = ? AND o = ? AND g = ?"
        self._has_patch_sql = f"SELECT 1 FROM ps_patches WHERE patch_id = {mark} LIMIT 1"
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
            # The hot path (units, terms, quads, records) talks to the driver's own cursor:
            # SQLAlchemy's per-statement bookkeeping cost more than SQLite's own work on
            # small patches. Transactions still begin and end through SQLAlchemy.
            self._cur: Any = self._conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
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
        except (SQLAlchemyError, self._dbapi_error) as exc:
            # Driver errors come unwrapped from the hot path (the driver's own cursor).
            self._failed = True
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

    def _keys(self, quads: Sequence[Quad], *, create: bool) -> list[tuple[int, int, int, int] | None]:
        """Each quad as (s, p, o, g) term ids, in order; with ``create`` unknown terms are
        stored, without it a quad with a term the database lacks is ``None`` (it cannot be there)."""
        get = self._ids.get
        keys: list[Any] = []
        misses = []
        for i, (s, p, o, g) in enumerate(quads):
            key = (get(s), get(p), get(o), get(g or ""))
            if None in key:
                misses.append(i)
            keys.append(key)
        if misses:
            # Resolving may start the cache over, so every term of these quads is asked for.
            found = self._resolve({t or "" for i in misses for t in quads[i]}, create=create)
            for i in misses:
                s, p, o, g = quads[i]
                key = (found.get(s), found.get(p), found.get(o), found.get(g or ""))
                keys[i] = None if None in key else key
        return keys

    def _resolve(self, terms: set[str], *, create: bool) -> dict[str, int]:
        """The ids of ``terms`` (those the database has, or all with ``create``), also cached."""
        ids = self._ids
        if len(ids) + len(terms) > self.term_cache:
            ids.clear()
            self._complete = False
        hashes = {t: term_hash(t) for t in terms if t not in ids}
        if hashes:
            if self.dialect == "postgresql":
                self._resolve_pg(hashes, create=create)
            else:
                self._resolve_sqlite(hashes, create=create)
        return {t: ids[t] for t in terms if t in ids}

    def _lookup(self, hashes: Iterable[int]) -> dict[str, int]:
        """Stored terms (text -> id) with any of these hashes; the text tells colliding ones apart."""
        found: dict[str, int] = {}
        unique = list(set(hashes))
        for i in range(0, len(unique), _LOOKUP_CHUNK):
            chunk = unique[i : i + _LOOKUP_CHUNK]
            sql = f"SELECT id, term FROM ps_terms WHERE h IN ({', '.join([self._mark] * len(chunk))})"
            found.update((term, term_id) for term_id, term in self._cur.execute(sql, tuple(chunk)).fetchall())
        return found

    def _resolve_sqlite(self, hashes: dict[str, int], *, create: bool) -> None:
        ids = self._ids
        if not self._complete:
            found = self._lookup(hashes.values())
            for term in hashes:
                term_id = found.get(term)
                if term_id is not None:
                    ids[term] = term_id
        if not create:
            return
        # We hold the write lock (BEGIN IMMEDIATE), so ids are ours to hand out.
        new = [(term, h) for term, h in hashes.items() if term not in ids]
        if not new:
            return
        first = self._next_id
        rows = [(first + i, h, term) for i, (term, h) in enumerate(new)]
        self._cur.executemany("INSERT INTO ps_terms (id, h, term) VALUES (?, ?, ?)", rows)
        for term_id, _, term in rows:
            ids[term] = term_id
        self._unit_terms.extend(term for term, _ in new)
        self._next_id = first + len(rows)
        self._known_max = self._next_id - 1

    def _resolve_pg(self, hashes: dict[str, int], *, create: bool) -> None:
        # New terms are committed at once on a connection of their own, outside the unit.
        # Inside it, two appliers adding overlapping new terms in different orders would
        # hold each other's index locks until their transactions end: a deadlock. A term
        # without quads is harmless (the dictionary only grows), and the unit's commit
        # flushes the WAL past these inserts, so a crash cannot keep quads and lose terms.
        # Insert-or-ignore in hash order, then read back: when two appliers add the same
        # term, the unique (h, md5(term)) index lets one insert win and both read its id.
        terms = sorted(hashes, key=hashes.__getitem__)
        values = [hashes[t] for t in terms]
        cursor = self._term_cursor()
        ids = self._ids
        select = "SELECT id, term FROM ps_terms WHERE h = ANY(%s::bigint[])"
        if create:
            # One round trip: the inserted rows come back from RETURNING, the ones already
            # there from the SELECT (whose snapshot does not show this statement's inserts).
            rows = cursor.execute(
                "WITH ins AS (INSERT INTO ps_terms (h, term) "
                "SELECT * FROM unnest(%s::bigint[], %s::text[]) AS i(h, term) ORDER BY h "
                f"ON CONFLICT (h, md5(term)) DO NOTHING RETURNING id, term) SELECT id, term FROM ins UNION ALL {select}",
                (values, terms, values),
            ).fetchall()
        else:
            rows = cursor.execute(select, (values,)).fetchall()
        for term_id, term in rows:
            if term in hashes:
                ids[term] = term_id
        if create and any(t not in ids for t in terms):
            # Another applier committed some of these after our statement began: its rows
            # made ours conflict, and only a new snapshot shows them.
            for term_id, term in cursor.execute(select, (values,)).fetchall():
                if term in hashes:
                    ids[term] = term_id

    def _term_cursor(self) -> Any:
        """PostgreSQL: a cursor on an autocommit connection of its own, for the dictionary."""
        if self._term_conn is None:
            self._term_conn = self.engine.raw_connection()
            driver = self._term_conn.driver_connection
            driver.autocommit = True
            cursor = driver.cursor()
            # Safe without a flush of its own: see _resolve_pg.
            cursor.execute("SET synchronous_commit = off")
            self._term_cur = cursor
        return self._term_cur

    def _forget(self, terms: list[str]) -> None:
        """Drop cache entries of terms whose insert was rolled back."""
        pop = self._ids.pop
        for term in terms:
            pop(term, None)
        terms.clear()

    def _sync_terms(self) -> None:
        """SQLite, at the start of our write transaction: where new ids start, and whether
        the cache is still complete (no other writer added terms since we last looked)."""
        top = self._cur.execute("SELECT max(id) FROM ps_terms").fetchone()[0] or 0
        if self._known_max is None:
            self._complete = top == 0 and not self._ids
        elif top != self._known_max:
            self._complete = False
        self._known_max = top
        self._next_id = top + 1

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
        for record in reversed(self._records):  # not written yet, but committed units
            if record[0] is not None:
                return str(record[0])
        p = schema.patches
        with self._reading() as conn:
            value = conn.execute(
                select(p.c.patch_id).where(p.c.patch_id.is_not(None)).order_by(p.c.seq.desc()).limit(1)
            ).scalar()
        return None if value is None else str(value)

    def has_patch(self, patch_id: str) -> bool:
        if patch_id in self._record_ids:
            return True
        with self._reading():
            return self._cur.execute(self._has_patch_sql, (patch_id,)).fetchone() is not None

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        q, t = schema.quads, schema.terms
        ts, tp, to, tg = t.alias("ts"), t.alias("tp"), t.alias("to"), t.alias("tg")
        stmt = (
            select(ts.c.term, tp.c.term, to.c.term, tg.c.term)
            .select_from(
                q.join(ts, ts.c.id == q.c.s)
                .join(tp, tp.c.id == q.c.p)
                .join(to, to.c.id == q.c.o)
                .join(tg, tg.c.id == q.c.g)
            )
            .order_by(tg.c.term, ts.c.term, tp.c.term, to.c.term)
        )
        with self._reading() as conn:
            # Per statement: Connection.execution_options() would stream every later statement too.
            result = conn.execute(stmt, execution_options={"yield_per": 10_000})
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
                if self.dialect == "sqlite":
                    self._sync_terms()
            self._cur.execute("SAVEPOINT ps_unit")
            self._in_unit = True

    def add(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("adding quads"):
            keys = [k for k in self._keys(quads, create=True) if k is not None]
            return self._execute_quads(self._insert_sql, keys)

    def delete(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("deleting quads"):
            keys = [k for k in self._keys(quads, create=False) if k is not None]
            return self._execute_quads(self._delete_sql, keys) if keys else 0

    def _execute_quads(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        # In key order the primary key B-tree is walked forward instead of at random, and
        # concurrent PostgreSQL appliers take row locks in one order.
        keys.sort()
        if self.dialect == "postgresql":
            # One statement over four arrays, whatever the batch size.
            columns = tuple(list(c) for c in zip(*keys, strict=True)) if keys else ([], [], [], [])
            return int(self._cur.execute(sql, columns).rowcount)
        self._cur.executemany(sql, keys)
        return int(self._cur.rowcount)

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present (point lookups on SQLite, one join per call on PostgreSQL)."""
        found: set[tuple[int, int, int, int]] = set()
        with self._guard("looking up quads"):
            aligned = self._keys(quads, create=False)
            keys = [k for k in aligned if k is not None]
            if keys and self.dialect == "postgresql":
                arrays = "unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
                result = self._cur.execute(
                    f"SELECT q.s, q.p, q.o, q.g FROM ps_quads q JOIN {arrays} AS d(s, p, o, g) "
                    "ON q.s = d.s AND q.p = d.p AND q.o = d.o AND q.g = d.g",
                    tuple(list(c) for c in zip(*keys, strict=True)),
                ).fetchall()
                found.update((r[0], r[1], r[2], r[3]) for r in result)
            elif keys:
                # In-process point queries on the primary key beat any set-based form here
                # (SQLite does not drive a row-value IN list through the key).
                cursor = self._cur
                sql = "SELECT 1 FROM ps_quads WHERE s = ? AND p = ? AND o = ? AND g = ?"
                found.update(key for key in keys if cursor.execute(sql, key).fetchone() is not None)
        return [k is not None and k in found for k in aligned]

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        with self._guard("binding a prefix"):
            self._cur.execute(self._ns_upsert, (graph or "", name, iri))

    def delete_prefix(self, graph: Any, name: str) -> None:
        with self._guard("removing a prefix"):
            self._cur.execute(self._ns_delete, (graph or "", name))

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        with self._guard("committing a unit"):
            if records:
                # Written with the checkpoints at the group's commit, in one executemany.
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
                        )
                        for r in records
                    ],
                )
                self._record_ids.update(r.patch_id for r in records if r.patch_id is not None)
            if self._in_unit:
                self._cur.execute("RELEASE SAVEPOINT ps_unit")
                self._in_unit = False
        self._tx_terms.extend(self._unit_terms)
        self._unit_terms.clear()
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
            if self._in_unit:
                self._in_unit = False
                self._cur.execute("ROLLBACK TO SAVEPOINT ps_unit")
                self._cur.execute("RELEASE SAVEPOINT ps_unit")
            self._forget(self._unit_terms)
            if self.dialect == "sqlite" and self._tx is not None:
                # The unit's ids are free again; the cache lost only its own entries.
                top = self._cur.execute("SELECT max(id) FROM ps_terms").fetchone()[0] or 0
                self._known_max, self._next_id = top, top + 1

    def flush(self) -> None:
        """Write the pending checkpoints and commit the database transaction."""
        if self._tx is None:
            return
        tx = self._tx
        try:
            with self._guard("committing"):
                if self._in_unit:
                    # An open unit never reaches the commit; it would be incomplete.
                    self._in_unit = False
                    self._cur.execute("ROLLBACK TO SAVEPOINT ps_unit")
                    self._cur.execute("RELEASE SAVEPOINT ps_unit")
                    self._forget(self._unit_terms)
                if self._records:
                    self._cur.executemany(self._record_sql, self._records)
                for source, cp in self._pending.items():
                    self._write_checkpoint(source, cp)
                tx.commit()
        except BaseException:
            self._abandon()
            raise
        self._tx = None
        self._tx_terms.clear()
        self._records.clear()
        self._record_ids.clear()
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
        self._in_unit = False
        self._forget(self._unit_terms)
        self._forget(self._tx_terms)
        self._complete = False
        self._records.clear()
        self._record_ids.clear()
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
        cursor = getattr(self, "_cur", None)
        if cursor is not None:
            with suppress(self._dbapi_error):
                cursor.close()
            self._cur = None
        if self._term_conn is not None:
            # Closed for good rather than pooled: it is in autocommit mode, and the pool's
            # reset of a connection the server already dropped logs a traceback.
            with suppress(self._dbapi_error, SQLAlchemyError):
                self._term_conn.invalidate()
            self._term_conn = self._term_cur = None
        if conn is not None:
            try:
                if self._failed:
                    # The hot path bypasses SQLAlchemy, which cannot know the connection
                    # may be dead; do not hand it back to the pool (the server releases
                    # its advisory locks when it goes).
                    conn.invalidate()
                elif self._locks and not conn.closed:
                    with conn.begin():
                        conn.exec_driver_sql("SELECT pg_advisory_unlock_all()")
                conn.close()
            except (SQLAlchemyError, self._dbapi_error):
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
