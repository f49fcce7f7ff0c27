"""SQLite's rules for the SQL target: one writer at a time, in-process statements.

A write transaction starts with ``BEGIN IMMEDIATE`` (sent by the engine's ``begin`` hook
set up here), so writers queue instead of failing at commit, and that lock is the target's
write lock. Holding it, the term dictionary hands out ids itself and knows when its cache
holds every stored term (nothing else wrote terms since it last looked): then a term it
lacks is new and is stored without a lookup. Statements run in process, so a batch is an
``executemany`` of point statements on the primary key (no round trips to save). Inserts
whose rows need no answer each go as statements of :data:`ROWS_PER_INSERT` rows
(:class:`RowInserts`): the sqlite3 module's work per execution then counts once per hundred
rows, not per row.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar

from sqlalchemy import URL, Connection, Engine, event

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.dialects.base import Dialect, Reading
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.quad_writes import QuadWrites
from patchsync.apply.targets.sql.source_locks import FileSourceLocks, SourceLocks
from patchsync.apply.targets.sql.statements import LOOKUP_CHUNK, SQLITE, Statements
from patchsync.apply.targets.sql.term_keys import split_new, store_keys
from patchsync.apply.targets.sql.terms import TermDictionary
from patchsync.errors import UsageError


def _whole(text: str) -> int | None:
    """A whole number of at least 1, or ``None``."""
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 1 else None


def _seconds(text: str) -> float | None:
    """A finite number of seconds above 0, or ``None``."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < math.inf else None


@dataclass(frozen=True)
class SqliteSetting:
    """A setting of a SQLite target URL that patchsync reads itself (``?name=VALUE``)."""

    default: float
    rule: str  # what a value must be, as messages say it
    parse: Callable[[str], float | None]  # the value, or None when it breaks the rule
    pragma: Callable[[float], str]  # the statement that applies it to each connection


#: The parameters a SQLite target URL takes, all read by patchsync itself: taken out of the
#: URL before the driver sees it and applied to each connection, in this order. Any other
#: parameter is refused (SQLAlchemy's driver would fail on some with a traceback and ignore
#: others with a warning, running on its defaults).
SQLITE_SETTINGS: dict[str, SqliteSetting] = {
    # How long a connection waits for another process's lock (the sqlite3 module's own
    # ``timeout``, as the busy timeout); first, so every later statement waits as long.
    "timeout": SqliteSetting(
        30.0, "a number of seconds above 0", _seconds, lambda v: f"PRAGMA busy_timeout={max(1, round(v * 1000))}"
    ),
    # Inserts land all over the term and quad indexes; a 64 MiB page cache (SQLite's default
    # is 2 MiB) doubles the insert rate once the database outgrows the default.
    "cache_mb": SqliteSetting(
        64, "a whole number of MiB, at least 1", _whole, lambda v: f"PRAGMA cache_size=-{int(v) * 1024}"
    ),
    # SQLite checkpoints the WAL into the database once it holds this many pages; each
    # checkpoint writes every page dirtied since the last one.
    "checkpoint_pages": SqliteSetting(
        1000, "a whole number of pages, at least 1", _whole, lambda v: f"PRAGMA wal_autocheckpoint={int(v)}"
    ),
}


#: Rows per statement of a :class:`RowInserts` (its bound values stay far below SQLite's limit).
ROWS_PER_INSERT = 100


class RowInserts:
    """One single-row ``INSERT … VALUES (?, …)`` sent as statements of :data:`ROWS_PER_INSERT`
    rows, the rows left over one at a time (one statement text, prepared once).

    The statement's conflict mode must be ``OR IGNORE`` or ``OR FAIL``: a statement of many
    rows that may stop midway and undo its own rows (``ABORT``, the default and the mode of
    ``ON CONFLICT DO NOTHING`` for the other constraints) makes SQLite copy every page it
    changes to a statement journal first, which costs more than the rows save.
    """

    def __init__(self, single: str) -> None:
        head, sep, row = single.partition(" VALUES ")
        modes = (" OR IGNORE ", " OR FAIL ")
        if not sep or not row.startswith("(") or not row.endswith(")") or not any(m in head for m in modes):
            raise ValueError(f"not a single-row INSERT OR IGNORE/FAIL: {single!r}")
        self.single = single
        self.width = row.count("?")
        self.many = f"{head} VALUES {', '.join([row] * ROWS_PER_INSERT)}"

    def run(self, cursor: Any, flat: list[Any]) -> int:
        """Insert the rows whose values are ``flat`` (``width`` values a row, row after row);
        the number of rows inserted."""
        width = self.width
        step = width * ROWS_PER_INSERT
        full = len(flat) - len(flat) % step
        inserted = 0
        if full:
            cursor.executemany(self.many, [flat[i : i + step] for i in range(0, full, step)])
            inserted = int(cursor.rowcount)
        if full < len(flat):
            rest = iter(flat[full:])
            cursor.executemany(self.single, zip(*[rest] * width, strict=True))
            inserted += int(cursor.rowcount)
        return inserted

    def rows(self, cursor: Any, rows: Iterable[tuple[Any, ...]]) -> int:
        """:meth:`run` for rows given as tuples."""
        return self.run(cursor, list(chain.from_iterable(rows)))


class SqliteTerms(TermDictionary):
    """The term dictionary of a SQLite target (see the module docstring)."""

    def __init__(self, link: Link, sql: Statements, term_cache: int, term_cache_chars: int) -> None:
        super().__init__(link, sql, term_cache, term_cache_chars)
        # Whether the cache holds every term of the database, the largest id when that was
        # last checked, and the next id to hand out (we hold the write lock).
        self._complete = False
        self._known_max: int | None = None
        self._next_id = 1
        self._insert = RowInserts(sql.term_insert)

    @property
    def next_id(self) -> int:
        """The id the next new term gets (we hold the write lock, so ids are ours to hand out)."""
        return self._next_id

    def keys(self, quads: Sequence[Quad], *, create: bool) -> list[tuple[int, int, int, int] | None]:
        if self._complete:
            ids = self.cache.ids
            if not create:
                # Holding every stored term: a quad with an uncached one is not stored. (A
                # comprehension: the fastest form of this pass, and presence probes run it
                # over every quad a commit group touches.)
                get = ids.get
                probed: list[Any] = [
                    None if None in (key := (get(s), get(p), get(o), get(g or ""))) else key for s, p, o, g in quads
                ]
                return probed
            if len(ids) + 4 * len(quads) <= self.cache.max_terms:
                return self._keys_storing(quads)
        return super().keys(quads, create=create)

    def _keys_storing(self, quads: Sequence[Quad]) -> list[tuple[int, int, int, int] | None]:
        """:meth:`keys` with ``create`` when the cache holds every stored term and has room
        for four new terms per quad: a term not cached is new, and gets the next id (we hold
        the write lock) in the same pass, so no quad is looked at twice."""
        cache = self.cache
        first = self._next_id
        new: list[str] = []
        keys, next_id = store_keys(quads, cache.ids, first, new)
        if not new:
            return keys
        chars = sum(map(len, new))
        if cache.overflows(0, chars):
            # Past the text budget the cache starts over, keeping this batch's new terms.
            cache.start_over(dict(zip(new, range(first, next_id), strict=True)))
            self._complete = False
        else:
            cache.took(new, chars=chars)
        # Listed before the insert: if it fails, the unit's rollback forgets them.
        cache.new_in_unit(new)
        self._next_id = next_id
        self._known_max = next_id - 1
        self._store(range(first, next_id), list(map(self._hash_of(), new)), new)
        return keys

    def _store(self, ids: range, hashes: list[int], terms: list[str]) -> None:
        """Insert the rows (id, hash, term); the three are aligned."""
        rows: list[Any] = [None] * (3 * len(terms))
        rows[0::3] = ids
        rows[1::3] = hashes
        rows[2::3] = terms
        # OR FAIL: a stored id still fails the statement (an error of the unit).
        self._insert.run(self.link.cur, rows)

    def _cache_restarted(self) -> None:
        self._complete = False

    def _resolve_hashes(self, hashes: dict[str, int], *, create: bool) -> None:
        ids = self.cache.ids
        if not self._complete:
            found = self._lookup(hashes.values())
            for term in hashes:
                term_id = found.get(term)
                if term_id is not None:
                    ids[term] = term_id
        if not create:
            return
        # We hold the write lock (BEGIN IMMEDIATE), so ids are ours to hand out.
        new = list(hashes) if self._complete else [term for term in hashes if term not in ids]
        if not new:
            return
        first = self._next_id
        numbers = range(first, first + len(new))
        self._store(numbers, list(map(hashes.__getitem__, new)), new)
        ids.update(zip(new, numbers, strict=True))
        self.cache.new_in_unit(new)
        self._next_id = first + len(new)
        self._known_max = self._next_id - 1

    def _lookup(self, hashes: Any) -> dict[str, int]:
        """Stored terms (text -> id) with any of these hashes; the text tells colliding ones apart."""
        found: dict[str, int] = {}
        unique = list(set(hashes))
        cursor = self.link.cur
        for i in range(0, len(unique), LOOKUP_CHUNK):
            chunk = unique[i : i + LOOKUP_CHUNK]
            sql = self.sql.term_lookup if len(chunk) == LOOKUP_CHUNK else _lookup_sql(len(chunk))
            found.update((term, term_id) for term_id, term in cursor.execute(sql, tuple(chunk)).fetchall())
        return found

    def transaction_started(self) -> None:
        """Where new ids start, and whether the cache is still complete (no other writer
        added terms since we last looked)."""
        top = self._top()
        if self._known_max is None:
            self._complete = top == 0 and not self.cache.ids
        elif top != self._known_max:
            self._complete = False
        self._known_max = top
        self._next_id = top + 1

    def unit_rolled_back(self, *, in_transaction: bool) -> None:
        super().unit_rolled_back(in_transaction=in_transaction)
        if in_transaction:
            # The unit's ids are free again; the cache lost only its own entries.
            top = self._top()
            self._known_max, self._next_id = top, top + 1

    def abandoned(self) -> None:
        super().abandoned()
        self._complete = False

    def _top(self) -> int:
        return int(self.link.cur.execute("SELECT max(id) FROM ps_terms").fetchone()[0] or 0)


def _lookup_sql(count: int) -> str:
    """The lookup of ``count`` hashes (one ``IN`` list), for a last chunk shorter than the others."""
    return f"SELECT id, term FROM ps_terms WHERE h IN ({', '.join(['?'] * count)})"


class SqliteQuads(QuadWrites):
    """Quad writes on SQLite: ``executemany`` of point statements on the primary key."""

    terms: SqliteTerms

    def __init__(self, link: Link, sql: Statements, terms: SqliteTerms) -> None:
        super().__init__(link, sql, terms)
        self._insert = RowInserts(sql.insert_quads)

    def _send(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        cursor = self.link.cur
        cursor.executemany(sql, keys)
        return int(cursor.rowcount)

    def add(self, quads: Sequence[Quad]) -> int:
        keys = [k for k in self.terms.keys(quads, create=True) if k is not None]
        keys.sort()  # see quad_writes
        return self._insert.rows(self.link.cur, keys)

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        # Ids from here on are terms this call stores (we hold the write lock): a quad with
        # one of them cannot be in the table yet, the others may be.
        new_from = self.terms.next_id
        keys: list[Any] = self.terms.keys(quads, create=True)
        cursor = self.link.cur
        sql = self.sql.insert_quads_each
        added = [True] * len(keys)
        old, new = split_new(keys, new_from)
        # In key order, as execute (the primary key B-tree walked forward).
        for i in sorted(old, key=keys.__getitem__):
            added[i] = cursor.execute(sql, keys[i]).rowcount == 1
        new.sort()
        self._insert.rows(cursor, new)
        return added

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        keys: list[Any] = self.terms.keys(quads, create=False)
        cursor = self.link.cur
        sql = self.sql.delete_quads_each
        deleted = [False] * len(keys)
        # A quad with a term the database lacks (key None) is not there.
        for i in sorted((i for i, k in enumerate(keys) if k is not None), key=keys.__getitem__):
            deleted[i] = cursor.execute(sql, keys[i]).rowcount == 1
        return deleted

    def _present(self, keys: list[tuple[int, int, int, int]]) -> set[tuple[int, int, int, int]]:
        # In-process point queries on the primary key beat any set-based form here (SQLite
        # does not drive a row-value IN list through the key).
        cursor = self.link.cur
        sql = self.sql.contains_quads
        return {key for key in keys if cursor.execute(sql, key).fetchone() is not None}


class SqliteDialect(Dialect):
    """SQLite (see the module docstring)."""

    name: ClassVar[str] = "sqlite"
    title: ClassVar[str] = "SQLite"
    statements: ClassVar[Statements] = SQLITE
    url_settings: ClassVar[dict[str, SqliteSetting]] = SQLITE_SETTINGS
    secondary_indexes: ClassVar[str] = (
        # printf's %w doubles the double quotes inside an identifier.
        """SELECT printf('"%w"', name), sql FROM sqlite_master WHERE type = 'index'"""
        " AND tbl_name = 'ps_quads' AND sql IS NOT NULL AND upper(sql) NOT LIKE 'CREATE UNIQUE%' ORDER BY name"
    )

    def read_settings(self, url: URL) -> dict[str, float]:
        name = url.render_as_string(hide_password=True)
        for key in url.query:
            if key not in SQLITE_SETTINGS:
                raise UsageError(
                    f"{name}: unknown parameter {key!r}; a SQLite target takes "
                    + ", ".join(f"?{k}=" for k in SQLITE_SETTINGS)
                )
        values: dict[str, float] = {}
        for key, setting in SQLITE_SETTINGS.items():
            raw = url.query.get(key)
            if raw is None:
                values[key] = setting.default
                continue
            if not isinstance(raw, str):  # given more than once: which one was meant?
                raise UsageError(f"{name}: {key} is given {len(raw)} times; give it once")
            value = setting.parse(raw)
            if value is None:
                raise UsageError(f"{name}: {key} must be {setting.rule} (got {raw!r})")
            values[key] = value
        return values

    def setup_engine(self, engine: Engine, settings: dict[str, float]) -> None:
        path = engine.url.database

        @event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE is ours to send.
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            try:
                # The settings first: the busy timeout is the wait of every statement after it.
                for key, value in settings.items():
                    cursor.execute(SQLITE_SETTINGS[key].pragma(value))
                cursor.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as exc:
                # SQLite says "unable to open database file" when it cannot create the file or,
                # in WAL mode, its -shm and -wal files beside it: name the reason it cannot know.
                raise sqlite3.OperationalError(f"{exc}{_unwritable(path)}") from exc
            # WAL + NORMAL: a committed transaction survives a process crash; only power loss
            # can drop the last commits, and then checkpoint and data go back together.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            # The write lock from the first statement (see the module docstring); it also
            # serialises schema changes, so lock_schema needs nothing more.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    def write_prefixes(self, cursor: Any, binds: list[tuple[str, str, Any]], unbinds: list[tuple[str, str]]) -> None:
        # In-process statements: one per pair costs SQLite no round trip.
        if unbinds:
            cursor.executemany(self.statements.ns_delete, unbinds)
        if binds:
            cursor.executemany(self.statements.ns_upsert, binds)

    def quad_writes(self, link: Link, term_cache: int, term_cache_chars: int) -> SqliteQuads:
        terms = SqliteTerms(link, self.statements, term_cache, term_cache_chars)
        return SqliteQuads(link, self.statements, terms)

    def source_locks(self, link: Link, reading: Reading) -> SourceLocks:
        path = link.engine.url.database
        if not path or path == ":memory:" or path.startswith("file:"):
            return SourceLocks()  # one connection's database, or a URI only SQLite reads
        return FileSourceLocks(f"{path}-sources.lock", link.name)


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


__all__ = ["SQLITE_SETTINGS", "SqliteDialect", "SqliteQuads", "SqliteSetting", "SqliteTerms"]
