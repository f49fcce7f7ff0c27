"""The SQL target: quads, namespaces, checkpoints and patch history in SQLite or PostgreSQL.

The target is assembled from modules named for what they hold: :mod:`.engine` opens
databases, :mod:`.terms` is the term dictionary (text <-> ids, cached), :mod:`.ledger`
holds checkpoints and patch records, :mod:`.errors` translates driver errors; this
module holds units, quad writes and the connection's lifetime.

Hot path: quads are stored as four term ids (see :mod:`.schema`). Each run of adds (or
deletes) from the applier becomes one ``executemany`` of ``INSERT … ON CONFLICT DO
NOTHING`` (``DELETE … WHERE`` the key) on SQLite, or one set-based statement over arrays
(``unnest``) on PostgreSQL. The driver's row count is the number of rows that changed the
table, which is exactly the set-semantics count the applier reports. ``add_each`` and
``delete_each`` tell which quads changed the table (a commit group writes the quads one of
its units touches once that way instead of looking them up first): on SQLite one statement
per quad whose terms were stored before the call; on PostgreSQL from the row count when
it says every quad of a batch changed the table, else from ``RETURNING``.

Transactions: units run inside a database transaction that may hold several units
(docs/design.md §2). A unit gets a savepoint only if it writes before the applier
announces its last writes (``last_writes``: rows sent because a batch filled up, and the
prefix rows of such a unit), since only such a unit can still be aborted after its rows were sent; a unit whose
rows all come with its commit costs no savepoint round trips, and a database error in them
drops the whole open transaction (none of its units had their checkpoint written yet); the transaction commits when it holds enough rows, units or
seconds, and at the end of an apply, with the checkpoints of its sources (:mod:`.ledger`).
SQLite transactions start with ``BEGIN IMMEDIATE`` so writers queue instead of failing at
commit; a PostgreSQL write transaction starts by taking a transaction-scoped advisory lock
keyed on the target (its schema), so on both dialects one applier at a time writes to a
target, and what it reads inside its transaction (the head, applied patch ids) cannot change
until it commits (docs/design.md §3, exactly once across processes). Every driver error
leaves through :func:`.errors.translate`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar

from sqlalchemy import Connection, Engine, select
from sqlalchemy.engine import RootTransaction
from sqlalchemy.exc import SQLAlchemyError

from patchsync.apply.target import (
    CAN_BULK_LOAD,
    CAN_CONTAINS,
    CAN_DISCARD,
    CAN_DUMP,
    CAN_HISTORY,
    CAN_LAST_WRITES,
    CAN_NAMESPACES,
    CAN_WRITE_EACH,
    CAN_WRITE_PREFIXES,
    Checkpoint,
    PatchRecord,
    Quad,
)
from patchsync.apply.targets.sql import bulk, schema
from patchsync.apply.targets.sql.engine import create_sql_engine, safe_url
from patchsync.apply.targets.sql.errors import is_unique_violation, translate
from patchsync.apply.targets.sql.ledger import UNREAD, Ledger
from patchsync.apply.targets.sql.migrate import ensure_schema
from patchsync.apply.targets.sql.namespaces import Namespaces
from patchsync.apply.targets.sql.pg_arrays import key_arrays
from patchsync.apply.targets.sql.statements import PG_SESSION, STATEMENTS, Statements
from patchsync.apply.targets.sql.terms import TERM_CACHE_CHARS, TERM_CACHE_SIZE, TermDictionary
from patchsync.terms.ntriples import NTriplesTerms

#: PostgreSQL: batches of lone quads at least this long are first written without returning
#: rows, judged by the row count (see SqlTarget._each_pg); below it the savepoint round trips
#: would cost more than the rows sent back.
_EACH_AT_ONCE = 8
#: PostgreSQL: the lock every write transaction takes first (see the module docstring). Its
#: key is the target's schema: appliers of one schema queue, those of others do not meet.
_TARGET_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('patchsync:target:' || current_schema(), 0))"
#: PostgreSQL: a batch with a quad that changes nothing pays for both writes, so after one
#: the plain write waits until this many batches in a row (written returning rows) changed
#: the table with every quad. Logs with no-ops spread through them stay on ``RETURNING``.
_EACH_TRUST = 8


class SqlTarget(TermDictionary, Ledger, Namespaces):
    """A SQLite or PostgreSQL database as an apply target (see the module docstring).

    ``url`` is a SQLAlchemy URL or an :class:`~sqlalchemy.Engine`. An empty database gets
    the schema on first use; one at an older revision needs ``patchsync db upgrade``.
    ``group_rows``, ``group_units`` and ``group_seconds`` bound how much one database
    transaction holds before it commits. ``term_cache`` bounds how many term ids are kept
    in memory (the main part of a long-running applier's memory) and ``term_cache_chars``
    how many characters of term text they hold together; past either the cache starts over.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {
            CAN_DUMP,
            CAN_NAMESPACES,
            CAN_HISTORY,
            CAN_CONTAINS,
            CAN_DISCARD,
            CAN_LAST_WRITES,
            CAN_WRITE_EACH,
            CAN_BULK_LOAD,
            CAN_WRITE_PREFIXES,
        }
    )

    def __init__(
        self,
        url: str | Engine,
        *,
        group_rows: int = 200_000,
        group_units: int = 5_000,
        group_seconds: float = 2.0,
        term_cache: int = TERM_CACHE_SIZE,
        term_cache_chars: int = TERM_CACHE_CHARS,
    ) -> None:
        self.adapter = NTriplesTerms()
        self._own_engine = isinstance(url, str)
        self.engine = create_sql_engine(url) if isinstance(url, str) else url
        self.name = safe_url(self.engine)
        self.dialect = self.engine.dialect.name
        self._dbapi_error: type[Exception] = self.engine.dialect.loaded_dbapi.Error
        self.group_rows = group_rows
        self.group_units = group_units
        self.group_seconds = group_seconds
        self._init_terms(term_cache, term_cache_chars)
        self._tx: RootTransaction | None = None
        # The target's head read in the open transaction, which holds the write lock: only
        # this target's own records can move it until the transaction ends.
        self._tx_head: str | object | None = UNREAD
        self._in_unit = False  # a SAVEPOINT for the open unit is set
        self._last = False  # the open unit's remaining writes end with its commit
        self._unsaved = False  # the open unit wrote without a savepoint
        self._deferred: list[str] = []  # indexes the open unit builds at its commit (bulk)
        self._failed = False  # a database error was seen: the connection may be dead
        # Patch records of the committed units of the open transaction, written at flush.
        self._records: list[tuple[Any, ...]] = []
        self._record_ids: set[str] = set()
        # PostgreSQL, adds and deletes: batches in a row whose every quad changed the table.
        self._each_streak = [_EACH_TRUST, _EACH_TRUST]
        self._versions: dict[str, int | None] = {}
        self._pending: dict[str, Checkpoint] = {}
        self._locks: set[str] = set()
        self._group_rows = 0
        self._group_units = 0
        self._group_start = 0.0
        self.sql: Statements = STATEMENTS[self.dialect]
        self._mark = self.sql.mark
        try:
            self._conn = self.engine.connect()
            with self._conn.begin():
                ensure_schema(self._conn)
                if self.dialect == "postgresql":
                    # In a transaction that commits: a rolled back SET is undone.
                    for setting in PG_SESSION:
                        self._conn.exec_driver_sql(setting)
            # The hot path (units, terms, quads, records) talks to the driver's own cursor:
            # SQLAlchemy's per-statement bookkeeping cost more than SQLite's own work on
            # small patches. Transactions still begin and end through SQLAlchemy.
            self._cur: Any = self._conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        except (SQLAlchemyError, self._dbapi_error) as exc:
            self._dispose()
            raise translate(exc, f"{self.name}: cannot open the database") from exc
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
            raise translate(exc, f"{self.name}: {what} failed") from exc

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """The connection, inside the open transaction or a short one of its own."""
        with self._guard("reading"):
            if self._tx is not None:
                yield self._conn
            else:
                with self._conn.begin():
                    yield self._conn

    # -- reads -------------------------------------------------------------------------

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

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        with self._guard("starting a unit"):
            if self._tx is None:
                self._tx = self._conn.begin()
                self._tx_head = UNREAD
                self._group_start = time.monotonic()
                if self.dialect == "sqlite":
                    self._sync_terms()
                else:
                    # Before any read of the transaction: every statement after it sees
                    # what the previous holder committed (read committed).
                    self._cur.execute(_TARGET_LOCK)
        self._last = self._unsaved = False

    def last_writes(self) -> None:
        """The open unit's writes from now on end with its commit: they need no savepoint."""
        self._last = True

    def defer_indexes(self) -> bool:
        """In an open unit, on an empty quad table: leave out its secondary indexes until the
        unit commits, then build each with one sort (:mod:`.bulk`). Returns whether they are
        left out (not when the table holds quads: a sort of them all would cost more)."""
        with self._guard("deferring indexes"):
            if not self._deferred and self._cur.execute(bulk.ANY_QUAD).fetchone() is None:
                self._before_write()  # under the unit's savepoint: its rollback restores them
                self._deferred = bulk.drop_secondary(self._cur, self.dialect)
        return bool(self._deferred)

    def _before_write(self) -> None:
        # Lazily: a unit that writes only with its commit never pays for a savepoint.
        if self._in_unit:
            return
        if self._last:
            self._unsaved = True
        else:
            self._cur.execute("SAVEPOINT ps_unit")
            self._in_unit = True

    def add(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("adding quads"):
            self._before_write()
            if self.dialect != "postgresql":
                keys = [k for k in self._keys(quads, create=True) if k is not None]
                return self._execute_quads(self.sql.insert_quads, keys)
            aligned = self._keys_beside(quads)
            try:
                added = self._execute_quads(self.sql.insert_quads, [k for k in aligned if k is not None])
            except BaseException:
                self._settle_terms(failing=True)
                raise
            stale, fixed = self._restore_stale(quads, aligned)
            if stale:
                # Each stale key was a row this statement added (see _restore_stale).
                added -= len({aligned[i] for i in stale})
                added += self._execute_quads(self.sql.insert_quads, list({fixed[i] for i in stale}))
            return added

    def delete(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("deleting quads"):
            self._before_write()
            keys = [k for k in self._keys(quads, create=False) if k is not None]
            return self._execute_quads(self.sql.delete_quads, keys) if keys else 0

    def _execute_quads(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        # In key order the primary key B-tree is walked forward instead of at random, and
        # concurrent PostgreSQL appliers take row locks in one order.
        keys.sort()
        if self.dialect == "postgresql":
            # One statement over four arrays, whatever the batch size.
            return int(self._cur.execute(sql, key_arrays(keys)).rowcount)
        self._cur.executemany(sql, keys)
        return int(self._cur.rowcount)

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`add`, telling whether each quad was added (it was absent before)."""
        self._group_rows += len(quads)
        with self._guard("adding quads"):
            self._before_write()
            if self.dialect == "postgresql":
                return self._add_each_pg(quads)
            # Ids from here on are terms this call stores (we hold the write lock): a quad
            # with one of them cannot be in the table yet, the others may be.
            new_from = self._next_id
            keys: list[Any] = self._keys(quads, create=True)
            cursor = self._cur
            sql = self.sql.insert_quads_each
            added = [True] * len(keys)
            old = [i for i, key in enumerate(keys) if max(key) < new_from]
            # In key order, as _execute_quads (the primary key B-tree walked forward).
            for i in sorted(old, key=keys.__getitem__):
                added[i] = cursor.execute(sql, keys[i]).rowcount == 1
            cursor.executemany(sql, sorted(keys) if not old else sorted(k for k in keys if max(k) >= new_from))
            return added

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`delete`, telling whether each quad was deleted (it was present before)."""
        self._group_rows += len(quads)
        with self._guard("deleting quads"):
            self._before_write()
            keys: list[Any] = self._keys(quads, create=False)
            if self.dialect == "postgresql":
                return self._each_pg(1, self.sql.delete_quads, self.sql.delete_quads_each, keys)
            cursor = self._cur
            sql = self.sql.delete_quads_each
            deleted = [False] * len(keys)
            # A quad with a term the database lacks (key None) is not there.
            for i in sorted((i for i, k in enumerate(keys) if k is not None), key=keys.__getitem__):
                deleted[i] = cursor.execute(sql, keys[i]).rowcount == 1
            return deleted

    def _add_each_pg(self, quads: Sequence[Quad]) -> list[bool]:
        keys = self._keys_beside(quads)
        insert, each = self.sql.insert_quads_new, self.sql.insert_quads_each
        try:
            added = self._each_pg(0, insert, each, keys)
        except BaseException:
            self._settle_terms(failing=True)
            raise
        stale, fixed = self._restore_stale(quads, keys)
        if stale:
            for i, again in zip(stale, self._each_pg(0, insert, each, [fixed[i] for i in stale]), strict=True):
                added[i] = again
        return added

    def _keys_beside(self, quads: Sequence[Quad]) -> list[Any]:
        """PostgreSQL: :meth:`_keys` with ``create``, the insert of new terms left running.

        It runs on the dictionary's connection while this one writes the quads: two server
        processes at once, where each insert is mostly the server's B-tree work
        (bench.pg_statements). The caller waits for it (:meth:`_restore_stale`) before
        anything else, so the terms are committed before the quads can be.
        """
        self._overlap_terms = True
        try:
            return self._keys(quads, create=True)
        finally:
            self._overlap_terms = False

    def _restore_stale(self, quads: Sequence[Quad], keys: list[Any]) -> tuple[list[int], list[Any]]:
        """Wait for the insert of new terms of ``quads`` written as ``keys``. If another
        applier stored some of those terms first, they take its ids: the rows written with
        the ids drawn for them were added by our write (no one else has those ids) and are
        deleted here. Returns the positions of those quads and every quad's right key, for
        the caller to write them again."""
        if not self._settle_terms():
            return [], keys
        fixed: list[Any] = self._keys(quads, create=True)
        stale = [i for i, key in enumerate(keys) if key != fixed[i]]
        if stale:
            self._cur.execute(self.sql.delete_quads, key_arrays(sorted({keys[i] for i in stale})))
        return stale, fixed

    def _each_pg(self, kind: int, plain: str, returning: str, keys: list[Any]) -> list[bool]:
        """PostgreSQL: write ``keys`` (None: a quad that cannot be stored) in one statement;
        which of them changed the table. ``returning`` is the write returning the rows it
        changed; ``plain`` the same write returning nothing, which for adds fails on a quad
        already stored; ``kind`` is 0 for adds, 1 for deletes."""
        batch = sorted(k for k in keys if k is not None)
        if not batch:
            return [False] * len(keys)
        cursor = self._cur
        arrays = key_arrays(batch)
        streak = self._each_streak
        if len(batch) >= _EACH_AT_ONCE and streak[kind] >= _EACH_TRUST:
            # Usually every quad changes the table, and then the row count says so for
            # each, without the server sending the rows back (bench.pg_statements: 4% of
            # the workload's wall). Otherwise the write is undone and run again returning
            # what it changed. The add is a plain insert: a stored quad fails it on the
            # primary key, which costs the server less than ON CONFLICT's speculative
            # insertion of every row (about 15% of the statement).
            cursor.execute("SAVEPOINT ps_each")
            try:
                changed = cursor.execute(plain, arrays).rowcount
            except self._dbapi_error as exc:
                if not is_unique_violation(exc):
                    raise
                changed = -1
            if changed == len(batch):
                cursor.execute("RELEASE SAVEPOINT ps_each")
                return [k is not None for k in keys]
            cursor.execute("ROLLBACK TO SAVEPOINT ps_each")
            cursor.execute("RELEASE SAVEPOINT ps_each")
        written = {(r[0], r[1], r[2], r[3]) for r in cursor.execute(returning, arrays).fetchall()}
        streak[kind] = streak[kind] + 1 if len(written) == len(batch) else 0
        return [k in written for k in keys]

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present (point lookups on SQLite, one join per call on PostgreSQL)."""
        found: set[tuple[int, int, int, int]] = set()
        with self._guard("looking up quads"):
            aligned = self._keys(quads, create=False)
            keys = [k for k in aligned if k is not None]
            if keys and self.dialect == "postgresql":
                result = self._cur.execute(self.sql.contains_quads, key_arrays(keys)).fetchall()
                found.update((r[0], r[1], r[2], r[3]) for r in result)
            elif keys:
                # In-process point queries on the primary key beat any set-based form here
                # (SQLite does not drive a row-value IN list through the key).
                cursor = self._cur
                sql = self.sql.contains_quads
                found.update(key for key in keys if cursor.execute(sql, key).fetchone() is not None)
        return [k is not None and k in found for k in aligned]

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
                            r.chained,
                        )
                        for r in records
                    ],
                )
                self._record_ids.update(r.patch_id for r in records if r.patch_id is not None)
            if self._deferred:
                bulk.build(self._cur, self._deferred)
                self._deferred = []
            if self._in_unit:
                self._cur.execute("RELEASE SAVEPOINT ps_unit")
                self._in_unit = False
        self._last = self._unsaved = False
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
        if self._unsaved:
            # Rows without a savepoint cannot be undone alone: drop the transaction.
            self._abandon()
            return
        self._last = False
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
        if self._unsaved:
            self._abandon()  # an incomplete unit's rows, inseparable from the others
            return
        tx = self._tx
        try:
            with self._guard("committing"):
                if self._in_unit:
                    # An open unit never reaches the commit; it would be incomplete.
                    self._in_unit = False
                    self._deferred = []
                    self._cur.execute("ROLLBACK TO SAVEPOINT ps_unit")
                    self._cur.execute("RELEASE SAVEPOINT ps_unit")
                    self._forget(self._unit_terms)
                if self._records:
                    self._cur.executemany(self.sql.record, self._records)
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
        self._in_unit = self._last = self._unsaved = False
        self._deferred = []
        self._forget(self._unit_terms)
        self._forget(self._tx_terms)
        self._complete = False
        self._records.clear()
        self._record_ids.clear()
        self._pending.clear()
        self._group_rows = self._group_units = 0
        # Versions read before may be stale now: re-read on the next checkpoint().
        self._versions.clear()

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
        self._settle_terms(failing=True)
        if self._term_sender is not None:
            self._term_sender.shutdown()
            self._term_sender = None
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
