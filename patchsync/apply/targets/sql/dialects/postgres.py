"""PostgreSQL's rules for the SQL target: advisory locks, set-based statements over arrays.

A write transaction starts by taking a transaction-scoped advisory lock keyed on the
target (its schema): appliers of one schema queue, those of others do not meet, and what
one reads inside its transaction (the head, applied patch ids) cannot change until it
commits (docs/design.md §3). Schema changes take another such lock, and each source a
session-level one, so a second applier of a source fails up front. Every batch is one
statement over arrays (``unnest``, sent in binary by :mod:`..pg_arrays`), and the term
dictionary (:mod:`.postgres_terms`) inserts new terms on a connection of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, cast

from sqlalchemy import Connection, Engine, event

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.dialects.base import Dialect, Reading
from patchsync.apply.targets.sql.dialects.postgres_terms import PostgresTerms
from patchsync.apply.targets.sql.errors import is_unique_violation
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.pg_arrays import key_arrays
from patchsync.apply.targets.sql.pg_arrays import register as register_arrays
from patchsync.apply.targets.sql.quad_writes import QuadWrites
from patchsync.apply.targets.sql.source_locks import SourceLocks
from patchsync.apply.targets.sql.statements import PG_SESSION, POSTGRESQL, RECORDS_AT_ONCE, Statements

#: Batches of lone quads at least this long are first written without returning rows,
#: judged by the row count (see PostgresQuads._each); below it the savepoint round trips
#: would cost more than the rows sent back.
_EACH_AT_ONCE = 8
#: A batch with a quad that changes nothing pays for both writes, so after one the plain
#: write waits until this many batches in a row (written returning rows) changed the table
#: with every quad. Logs with no-ops spread through them stay on ``RETURNING``.
_EACH_TRUST = 8
#: The lock every write transaction takes first (see the module docstring).
_TARGET_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('patchsync:target:' || current_schema(), 0))"
#: The lock around schema changes, keyed on the schema the connection works in.
_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('patchsync:schema:' || current_schema(), 0))"
#: The lock of one source in one schema, held by the session until it ends.
_SOURCE_LOCK = "SELECT pg_try_advisory_lock(hashtextextended('patchsync:' || current_schema() || ':' || %s, 0))"


class PostgresQuads(QuadWrites):
    """Quad writes on PostgreSQL: one statement over four arrays, whatever the batch size.

    ``add_each`` and ``delete_each`` tell which quads changed the table from the row count
    when it says every quad of a batch did, else from ``RETURNING`` (see :meth:`_each`).
    """

    terms: PostgresTerms

    def __init__(self, link: Link, sql: Statements, terms: PostgresTerms) -> None:
        super().__init__(link, sql, terms)
        # Adds and deletes: batches in a row whose every quad changed the table.
        self._each_streak = [_EACH_TRUST, _EACH_TRUST]
        # The thread an insert is left running on (add_each_later).
        self._writer: ThreadPoolExecutor | None = None

    def _send(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        return int(self.link.cur.execute(sql, key_arrays(keys)).rowcount)

    def add(self, quads: Sequence[Quad]) -> int:
        aligned = self.terms.keys_beside(quads)
        try:
            added = self.execute(self.sql.insert_quads, [k for k in aligned if k is not None])
        except BaseException:
            self.terms.settle(failing=True)
            raise
        stale, fixed = self._restore_stale(quads, aligned)
        if stale:
            # Each stale key was a row this statement added (see _restore_stale).
            added -= len({aligned[i] for i in stale})
            added += self.execute(self.sql.insert_quads, list({fixed[i] for i in stale}))
        return added

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        return self.add_each_later(quads)()

    def add_each_later(self, quads: Sequence[Quad]) -> Callable[[], list[bool]]:
        """:meth:`add_each`, the insert left running where it is sent returning nothing (see
        :meth:`_each`): the server inserts while the caller goes on decoding. The function
        returned waits for it (as does any other use of the cursor, :class:`.Link`) and
        tells which quads were added."""
        keys = self.terms.keys_beside(quads)
        insert, each = self.sql.insert_quads_new, self.sql.insert_quads_each
        batch = sorted(k for k in keys if k is not None)
        if not self._plain_first(0, len(batch)):
            added = self._restored(quads, keys, self._guarded(lambda: self._each(0, insert, each, keys, batch)))
            return lambda: added
        arrays = key_arrays(batch)
        cursor = self.link.cur  # waits for a write left running before
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="patchsync-quads")
        # The savepoint from here: from the thread its round trip would wait twice for the
        # interpreter lock while the applier decodes, and hold back the insert that much.
        cursor.execute("SAVEPOINT ps_each")
        sent = self._writer.submit(self._saved_plain, cursor, insert, arrays)
        outcome: list[Any] = []

        def landing() -> None:
            try:
                changed = self._guarded(lambda: self._after_plain(0, each, keys, arrays, len(batch), sent.result()))
                outcome.append(self._restored(quads, keys, changed))
            except BaseException as exc:
                outcome.append(exc)
                raise

        self.link.leave_running(landing)

        def answer() -> list[bool]:
            self.link.land()
            if isinstance(outcome[0], BaseException):
                raise outcome[0]
            return cast("list[bool]", outcome[0])

        return answer

    def _guarded(self, write: Callable[[], list[bool]]) -> list[bool]:
        """``write`` of quads keyed by a batch whose new terms are in flight: if it fails,
        their insert is waited for (and its failure not raised over this one)."""
        try:
            return write()
        except BaseException:
            self.terms.settle(failing=True)
            raise

    def _restored(self, quads: Sequence[Quad], keys: list[Any], added: list[bool]) -> list[bool]:
        """``added`` of ``quads`` written as ``keys``, once the insert of their new terms is
        waited for, with the quads written again whose keys turned out stale (_restore_stale)."""
        stale, fixed = self._restore_stale(quads, keys)
        if stale:
            insert, each = self.sql.insert_quads_new, self.sql.insert_quads_each
            for i, again in zip(stale, self._each(0, insert, each, [fixed[i] for i in stale]), strict=True):
                added[i] = again
        return added

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        keys: list[Any] = self.terms.keys(quads, create=False)
        return self._each(1, self.sql.delete_quads, self.sql.delete_quads_each, keys)

    def _present(self, keys: list[tuple[int, int, int, int]]) -> set[tuple[int, int, int, int]]:
        # One join per call.
        result = self.link.cur.execute(self.sql.contains_quads, key_arrays(keys)).fetchall()
        return {(r[0], r[1], r[2], r[3]) for r in result}

    def _restore_stale(self, quads: Sequence[Quad], keys: list[Any]) -> tuple[list[int], list[Any]]:
        """Wait for the insert of new terms of ``quads`` written as ``keys``. If another
        applier stored some of those terms first, they take its ids: the rows written with
        the ids drawn for them were added by our write (no one else has those ids) and are
        deleted here. Returns the positions of those quads and every quad's right key, for
        the caller to write them again."""
        if not self.terms.settle():
            return [], keys
        fixed: list[Any] = self.terms.keys(quads, create=True)
        stale = [i for i, key in enumerate(keys) if key != fixed[i]]
        if stale:
            self.link.cur.execute(self.sql.delete_quads, key_arrays(sorted({keys[i] for i in stale})))
        return stale, fixed

    def _each(
        self, kind: int, plain: str, returning: str, keys: list[Any], batch: list[Any] | None = None
    ) -> list[bool]:
        """Write ``keys`` (None: a quad that cannot be stored) in one statement; which of
        them changed the table. ``returning`` is the write returning the rows it changed;
        ``plain`` the same write returning nothing, which for adds fails on a quad already
        stored; ``kind`` is 0 for adds, 1 for deletes. ``batch`` is the keys that are not
        None, sorted, if the caller has them already."""
        if batch is None:
            batch = sorted(k for k in keys if k is not None)
        if not batch:
            return [False] * len(keys)
        arrays = key_arrays(batch)
        if self._plain_first(kind, len(batch)):
            # Usually every quad changes the table, and then the row count says so for
            # each, without the server sending the rows back (bench.pg_statements: 4% of
            # the workload's wall). Otherwise the write is undone and run again returning
            # what it changed. The add is a plain insert: a stored quad fails it on the
            # primary key, which costs the server less than ON CONFLICT's speculative
            # insertion of every row (about 15% of the statement).
            changed = self._plain(self.link.cur, plain, arrays)
            return self._after_plain(kind, returning, keys, arrays, len(batch), changed)
        return self._returning(kind, returning, keys, arrays, len(batch))

    def _plain_first(self, kind: int, size: int) -> bool:
        """Whether a batch of ``size`` keys goes as the plain write first (see :meth:`_each`)."""
        return size >= _EACH_AT_ONCE and self._each_streak[kind] >= _EACH_TRUST

    def _plain(self, cursor: Any, plain: str, arrays: Any) -> int:
        """``plain`` under a savepoint: the rows it changed, -1 if it failed on a stored quad."""
        cursor.execute("SAVEPOINT ps_each")
        return self._saved_plain(cursor, plain, arrays)

    def _saved_plain(self, cursor: Any, plain: str, arrays: Any) -> int:
        """:meth:`_plain` once the savepoint is set. It may run on a thread of its own: it
        touches nothing but ``cursor``."""
        try:
            return int(cursor.execute(plain, arrays).rowcount)
        except self.link.dbapi_error as exc:
            if not is_unique_violation(exc):
                raise
            return -1

    def _after_plain(
        self, kind: int, returning: str, keys: list[Any], arrays: Any, size: int, changed: int
    ) -> list[bool]:
        """Keep the plain write of ``size`` quads if it changed each of them, else undo it
        and write them again returning what changed."""
        cursor = self.link.cur
        if changed == size:
            cursor.execute("RELEASE SAVEPOINT ps_each")
            return [k is not None for k in keys]
        cursor.execute("ROLLBACK TO SAVEPOINT ps_each")
        cursor.execute("RELEASE SAVEPOINT ps_each")
        return self._returning(kind, returning, keys, arrays, size)

    def _returning(self, kind: int, returning: str, keys: list[Any], arrays: Any, size: int) -> list[bool]:
        written = {(r[0], r[1], r[2], r[3]) for r in self.link.cur.execute(returning, arrays).fetchall()}
        streak = self._each_streak
        streak[kind] = streak[kind] + 1 if len(written) == size else 0
        return [k in written for k in keys]

    def close(self) -> None:
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg 3 (see the module docstring)."""

    name: ClassVar[str] = "postgresql"
    title: ClassVar[str] = "PostgreSQL"
    statements: ClassVar[Statements] = POSTGRESQL
    # indexrelid::regclass prints the name as the search path needs it, quoted if need be.
    secondary_indexes: ClassVar[str] = (
        "SELECT x.indexrelid::regclass::text, pg_get_indexdef(x.indexrelid) FROM pg_index x"
        " WHERE x.indrelid = to_regclass('ps_quads') AND NOT x.indisunique ORDER BY 1"
    )

    def setup_engine(self, engine: Engine, settings: dict[str, float]) -> None:
        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            # The write path sends its batches as prebuilt binary arrays (pg_arrays).
            register_arrays(dbapi_connection)  # psycopg (3) is the only PostgreSQL driver supported

    def open_session(self, conn: Connection) -> None:
        # In a transaction that commits: a rolled back SET is undone.
        for setting in PG_SESSION:
            conn.exec_driver_sql(setting)

    def lock_target(self, cursor: Any) -> None:
        # Before any read of the transaction: every statement after it sees what the
        # previous holder committed (read committed).
        cursor.execute(_TARGET_LOCK)

    def lock_schema(self, conn: Connection) -> None:
        # Reads after it see what every earlier holder committed (each statement of a read
        # committed transaction takes a new snapshot).
        conn.exec_driver_sql(_SCHEMA_LOCK)

    def source_locks(self, link: Link, reading: Reading) -> SourceLocks:
        return _AdvisorySourceLocks(reading)

    def write_prefixes(self, cursor: Any, binds: list[tuple[str, str, Any]], unbinds: list[tuple[str, str]]) -> None:
        # Columns as arrays: one statement each, however many pairs.
        for sql, rows in ((self.statements.ns_delete_many, unbinds), (self.statements.ns_upsert_many, binds)):
            if rows:
                cursor.execute(sql, [list(column) for column in zip(*rows, strict=True)])

    def write_records(self, cursor: Any, records: list[tuple[Any, ...]]) -> None:
        # One statement over one JSON text: executemany costs the server a statement per
        # record, and lists as arrays cost psycopg a dump per element (bench.pg_statements).
        text = json.dumps(records, ensure_ascii=False)
        if "\\u0000" in text:
            # jsonb refuses U+0000 with a message about escapes; the driver's own refusal of
            # NUL in text names it (a patch id or prefix cannot be stored either way).
            super().write_records(cursor, records)
            return
        cursor.execute(RECORDS_AT_ONCE, (text,))

    def quad_writes(self, link: Link, term_cache: int, term_cache_chars: int) -> PostgresQuads:
        terms = PostgresTerms(link, self.statements, term_cache, term_cache_chars)
        return PostgresQuads(link, self.statements, terms)


class _AdvisorySourceLocks(SourceLocks):
    """A session-level advisory lock per source, in the target's session."""

    def __init__(self, reading: Reading) -> None:
        self._reading = reading
        self._held = False

    def take(self, source: str) -> bool:
        with self._reading() as conn:
            free = bool(conn.exec_driver_sql(_SOURCE_LOCK, (source,)).scalar())
        self._held = self._held or free
        return free

    def release(self, conn: Connection | None) -> None:
        held, self._held = self._held, False
        if held and conn is not None:  # else they went with the session
            with conn.begin():
                conn.exec_driver_sql("SELECT pg_advisory_unlock_all()")


__all__ = ["PostgresDialect", "PostgresQuads"]
