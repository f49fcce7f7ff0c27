"""The SQL target: quads, namespaces, checkpoints and patch history in SQLite or PostgreSQL.

The target is assembled from parts named for what they hold, each an object of its own
that the target holds: the dialect (:mod:`.dialects`, chosen once from the URL) decides
everything SQLite and PostgreSQL do differently and makes the quad writes
(:mod:`.quad_writes`) with their term dictionary (:mod:`.terms`, text <-> ids, cached);
:mod:`.ledger` holds checkpoints and patch records, :mod:`.namespaces` prefix rows,
:mod:`.engine` opens databases, :mod:`.errors` translates driver errors. This module holds
units, transactions and the connection's lifetime.

Hot path: each run of adds (or deletes) from the applier becomes one write of the batch's
term-id keys (an ``executemany`` of point statements on SQLite, one set-based statement
over arrays on PostgreSQL); ``add_each`` and ``delete_each`` tell which quads changed the
table (a commit group writes the quads one of its units touches once that way instead of
looking them up first).

Transactions: units run inside a database transaction that may hold several units
(docs/design.md §2). A unit gets a savepoint only if it writes before the applier
announces its last writes (``last_writes``: rows sent because a batch filled up, and the
prefix rows of such a unit), since only such a unit can still be aborted after its rows were sent; a unit whose
rows all come with its commit costs no savepoint round trips, and a database error in them
drops the whole open transaction (none of its units had their checkpoint written yet); the transaction commits when it holds enough rows, units or
seconds, and at the end of an apply, with the checkpoints of its sources (:mod:`.ledger`).
Every write transaction starts under the dialect's write lock on the target (SQLite's
``BEGIN IMMEDIATE``, a PostgreSQL advisory lock keyed on the schema), so one applier at a
time writes to a target, and what it reads inside its transaction (the head, applied patch
ids) cannot change until it commits (docs/design.md §3, exactly once across processes).
Every driver error leaves through :func:`.errors.translate`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
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
    CAN_WRITE_LATER,
    CAN_WRITE_PREFIXES,
    Checkpoint,
    PatchRecord,
    PrefixOp,
    Quad,
    SourceStatus,
)
from patchsync.apply.targets.sql import bulk, schema
from patchsync.apply.targets.sql.dialects import dialect_of
from patchsync.apply.targets.sql.engine import create_sql_engine, safe_url
from patchsync.apply.targets.sql.errors import translate
from patchsync.apply.targets.sql.ledger import Ledger
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.migrate import ensure_schema
from patchsync.apply.targets.sql.namespaces import Namespaces
from patchsync.apply.targets.sql.terms import TERM_CACHE_CHARS, TERM_CACHE_SIZE
from patchsync.terms.ntriples import NTriplesTerms


class SqlTarget:
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
            CAN_WRITE_LATER,
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
        # Chosen once (create_sql_engine has refused a URL of any other dialect).
        self.dialect = dialect_of(self.engine)
        self._dbapi_error: type[Exception] = self.engine.dialect.loaded_dbapi.Error
        self.sql = self.dialect.statements
        self.group_rows = group_rows
        self.group_units = group_units
        self.group_seconds = group_seconds
        self.link = Link(self.engine, self.name, self._dbapi_error)
        self.writes = self.dialect.quad_writes(self.link, term_cache, term_cache_chars)
        self.terms = self.writes.terms
        self.ledger = Ledger(self.link, self.dialect, self._reading)
        self.prefixes = Namespaces(self.link, self.dialect)
        self._tx: RootTransaction | None = None
        self._in_unit = False  # a SAVEPOINT for the open unit is set
        self._last = False  # the open unit's remaining writes end with its commit
        self._unsaved = False  # the open unit wrote without a savepoint
        self._deferred: list[str] = []  # indexes the open unit builds at its commit (bulk)
        self._failed = False  # a database error was seen: the connection may be dead
        self._group_rows = 0
        self._group_units = 0
        self._group_start = 0.0
        self._conn: Connection | None = None
        try:
            self._conn = self.engine.connect()
            with self._conn.begin():
                ensure_schema(self._conn)
                self.dialect.open_session(self._conn)
            # The hot path (units, terms, quads, records) talks to the driver's own cursor:
            # SQLAlchemy's per-statement bookkeeping cost more than SQLite's own work on
            # small patches. Transactions still begin and end through SQLAlchemy.
            driver = self._conn.connection.driver_connection
            assert driver is not None  # a connection just opened has its driver's
            self.link.cur = driver.cursor()
        except (SQLAlchemyError, self._dbapi_error) as exc:
            self._dispose()
            raise translate(exc, f"{self.name}: cannot open the database") from exc
        except BaseException:
            self._dispose()
            raise

    # -- plumbing ----------------------------------------------------------------------

    @property
    def _connection(self) -> Connection:
        """The target's open connection (its transactions begin and end here)."""
        assert self._conn is not None, "the target is closed"
        return self._conn

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
            self.link.land()  # reads through SQLAlchemy bypass the cursor's wait
            conn = self._connection
            if self._tx is not None:
                yield conn
            else:
                with conn.begin():
                    yield conn

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

    def namespaces(self) -> dict[tuple[str, str], str]:
        with self._reading() as conn:
            return self.prefixes.read(conn)

    def checkpoint(self, source: str) -> Checkpoint | None:
        return self.ledger.checkpoint(source)

    def head(self) -> str | None:
        return self.ledger.head()

    def has_patch(self, patch_id: str) -> bool:
        return self.ledger.has_patch(patch_id)

    def sources(self) -> list[SourceStatus]:
        return self.ledger.sources()

    def history(self, source: str | None = None) -> list[PatchRecord]:
        """Applied patches in order, of one source or all."""
        return self.ledger.history(source)

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present (point lookups on SQLite, one join per call on PostgreSQL)."""
        with self._guard("looking up quads"):
            return self.writes.contains(quads)

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        with self._guard("starting a unit"):
            if self._tx is None:
                self._tx = self._connection.begin()
                self._group_start = time.monotonic()
                # Before any read of the transaction: every statement after it sees what
                # the previous holder of the lock committed.
                self.dialect.lock_target(self.link.cur)
                self.terms.transaction_started()
                self.ledger.transaction_started()
        self._last = self._unsaved = False

    def last_writes(self) -> None:
        """The open unit's writes from now on end with its commit: they need no savepoint."""
        self._last = True

    def defer_indexes(self) -> bool:
        """In an open unit, on an empty quad table: leave out its secondary indexes until the
        unit commits, then build each with one sort (:mod:`.bulk`). Returns whether they are
        left out (not when the table holds quads: a sort of them all would cost more)."""
        with self._guard("deferring indexes"):
            cursor = self.link.cur
            if not self._deferred and cursor.execute(bulk.ANY_QUAD).fetchone() is None:
                self._before_write()  # under the unit's savepoint: its rollback restores them
                self._deferred = bulk.drop_secondary(cursor, self.dialect)
        return bool(self._deferred)

    def _before_write(self) -> None:
        # Lazily: a unit that writes only with its commit never pays for a savepoint.
        if self._in_unit:
            return
        if self._last:
            self._unsaved = True
        else:
            self.link.cur.execute("SAVEPOINT ps_unit")
            self._in_unit = True

    def add(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("adding quads"):
            self._before_write()
            return self.writes.add(quads)

    def delete(self, quads: Sequence[Quad]) -> int:
        self._group_rows += len(quads)
        with self._guard("deleting quads"):
            self._before_write()
            return self.writes.delete(quads)

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`add`, telling whether each quad was added (it was absent before)."""
        return self.add_each_later(quads)()

    def add_each_later(self, quads: Sequence[Quad]) -> Callable[[], list[bool]]:
        """:meth:`add_each`, the insert left running where the dialect can (PostgreSQL: the
        server inserts while the applier decodes on). The function returned waits for it and
        tells whether each quad was added; any other call on the target waits for it first."""
        self._group_rows += len(quads)
        with self._guard("adding quads"):
            self._before_write()
            answer = self.writes.add_each_later(quads)

        def answered() -> list[bool]:
            with self._guard("adding quads"):
                return answer()

        return answered

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`delete`, telling whether each quad was deleted (it was present before)."""
        self._group_rows += len(quads)
        with self._guard("deleting quads"):
            self._before_write()
            return self.writes.delete_each(quads)

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        with self._guard("binding a prefix"):
            self._before_write()
            self.prefixes.bind(graph, name, iri)

    def delete_prefix(self, graph: Any, name: str) -> None:
        with self._guard("removing a prefix"):
            self._before_write()
            self.prefixes.unbind(graph, name)

    def write_prefixes(self, ops: Sequence[PrefixOp]) -> None:
        """The prefix rows ``ops``, in log order, as one change (:mod:`.namespaces`)."""
        with self._guard("writing prefixes"):
            self._before_write()
            self.prefixes.write(ops)

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        with self._guard("committing a unit"):
            if records:
                # Written with the checkpoints at the group's commit, in one executemany.
                self.ledger.note(records)
            if self._deferred:
                bulk.build(self.link.cur, self._deferred)
                self._deferred = []
            if self._in_unit:
                self.link.cur.execute("RELEASE SAVEPOINT ps_unit")
                self._in_unit = False
        self._last = self._unsaved = False
        self.terms.unit_committed()
        self.ledger.stage(source, checkpoint)
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
                self.link.cur.execute("ROLLBACK TO SAVEPOINT ps_unit")
                self.link.cur.execute("RELEASE SAVEPOINT ps_unit")
            self.terms.unit_rolled_back(in_transaction=self._tx is not None)

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
                self.link.land()  # the commit goes through SQLAlchemy, not the cursor
                if self._in_unit:
                    # An open unit never reaches the commit; it would be incomplete.
                    self._in_unit = False
                    self._deferred = []
                    self.link.cur.execute("ROLLBACK TO SAVEPOINT ps_unit")
                    self.link.cur.execute("RELEASE SAVEPOINT ps_unit")
                    self.terms.unit_rolled_back(in_transaction=False)
                self.ledger.write(self._connection)
                tx.commit()
        except BaseException:
            self._abandon()
            raise
        self._tx = None
        self.terms.transaction_committed()
        self.ledger.committed()
        self._group_rows = self._group_units = 0

    def _abandon(self) -> None:
        """Drop the open database transaction and forget what it held."""
        # A write left running is waited for (its outcome no longer matters): the
        # connection is then free for the rollback.
        with suppress(Exception):
            self.link.land()
        try:
            if self._tx is not None and self._tx.is_active:
                self._tx.rollback()
        except SQLAlchemyError:
            pass
        self._tx = None
        self._in_unit = self._last = self._unsaved = False
        self._deferred = []
        self.terms.abandoned()
        self.ledger.abandoned()
        self._group_rows = self._group_units = 0

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
        conn = self._conn
        try:
            cursor = self.link.cur
            if cursor is not None:
                with suppress(self._dbapi_error):
                    cursor.close()
                self.link.cur = None
            self.writes.close()
            self.terms.close()
            if conn is not None:
                try:
                    if self._failed:
                        # The hot path bypasses SQLAlchemy, which cannot know the connection
                        # may be dead; do not hand it back to the pool (the server releases
                        # its advisory locks when it goes).
                        conn.invalidate()
                    elif not conn.closed:
                        self.ledger.release_locks(conn)
                    conn.close()
                except (SQLAlchemyError, self._dbapi_error):
                    pass
                self._conn = None
        finally:
            # Whatever failed above: a source lock kept would lock the next target out.
            self.ledger.release_locks(None)
            if self._own_engine:
                self.engine.dispose()

    def __enter__(self) -> SqlTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.discard()
