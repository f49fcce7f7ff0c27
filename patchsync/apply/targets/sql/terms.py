"""The SQL term dictionary: N-Triples term text <-> integer ids, cached in memory.

Terms missing from the cache are looked up by hash in one query per few hundred and new
ones inserted in bulk. On SQLite, which has one writer at a time, the cache knows when it
holds every term in the database (nothing else wrote terms since it last looked) and then
skips the lookups. On PostgreSQL new terms are committed at once on a connection of their
own (see :meth:`TermDictionary._resolve_pg`); there the cache of a dictionary that started
empty is trusted to tell new terms before their insert, and only speed rests on that (see
``_pg_fresh``). The dictionary only grows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from sqlalchemy import Engine

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.errors import is_unique_violation
from patchsync.apply.targets.sql.pg_arrays import bigint_array, text_array
from patchsync.apply.targets.sql.schema import term_hash
from patchsync.apply.targets.sql.statements import LOOKUP_CHUNK, PG_SESSION, Statements
from patchsync.apply.targets.sql.term_keys import fill_keys, split_keys, store_keys

# Term ids kept in memory by default; beyond this the cache starts again (and is no longer
# complete).
TERM_CACHE_SIZE = 1 << 19
#: Characters of term text the cache may hold by default, on top of the entry count: the count
#: alone bounds entries, not bytes, and 524,288 literals of 10 KB each would be GBs. Typical
#: terms (IRIs and short literals, well under 128 characters on average) reach the count
#: first, so they keep the hit rate they had; long ones start the cache over sooner. At most
#: about 64 MB of text (more for text outside Latin-1) plus the entries' own ~120 bytes each.
TERM_CACHE_CHARS = 1 << 26
_LOOKUP_CHUNK = LOOKUP_CHUNK


class TermDictionary:
    """Term id resolution for :class:`~patchsync.apply.targets.sql.target.SqlTarget` (a mixin).

    Term text -> id in ``_ids``. Entries first stored by the open unit / transaction are
    listed (``_unit_terms``, ``_tx_terms``) so a rollback can forget them; ids read from
    the database stay valid (never deleted).
    """

    engine: Engine
    dialect: str
    term_cache: int
    term_cache_chars: int
    _cur: Any
    _mark: str
    sql: Statements
    _ids: dict[str, int]
    # Characters of the terms in ``_ids`` (see TERM_CACHE_CHARS).
    _ids_chars: int
    _unit_terms: list[str]
    _tx_terms: list[str]
    _term_conn: Any
    _term_cur: Any
    # PostgreSQL: the terms (and their hashes) the last lookup without ``create`` found missing.
    _absent: dict[str, int]
    # SQLite only: whether the cache holds every term of the database, the largest id
    # when that was last checked, and the next id to hand out (we hold the write lock).
    _complete: bool
    _known_max: int | None
    _next_id: int
    # PostgreSQL only: whether the cache is taken to hold every stored term, so a term it
    # lacks is inserted without a lookup first. True while the table was empty when we
    # first looked, the cache never started over and no such insert failed. Only speed
    # rests on it: a term another applier stored fails the plain insert on the unique
    # index, which turns this off and falls back to insert-or-ignore. (Lookups that do not
    # store, for deletes and presence, never skip: there a wrong guess would lose a row.)
    _pg_fresh: bool
    # PostgreSQL only: while set, _resolve_pg sends its plain insert of new terms from a
    # thread and caches the ids drawn for them at once, so the server runs it beside the
    # quad insert that follows on the other connection (see SqlTarget._keys_beside);
    # _in_flight is that insert until _settle_terms waits for it.
    _overlap_terms: bool
    _in_flight: tuple[Future[Any], list[str], list[int], dict[str, int], tuple[Any, Any]] | None
    _term_sender: ThreadPoolExecutor | None

    def _init_terms(self, term_cache: int, term_cache_chars: int) -> None:
        self.term_cache = term_cache
        self.term_cache_chars = term_cache_chars
        self._ids = {}
        self._ids_chars = 0
        self._unit_terms = []
        self._tx_terms = []
        self._term_conn = None
        self._term_cur = None
        self._absent = {}
        self._complete = False
        self._known_max = None
        self._next_id = 1
        self._pg_fresh = False
        self._overlap_terms = False
        self._in_flight = None
        self._term_sender = None

    def _keys(self, quads: Sequence[Quad], *, create: bool) -> list[tuple[int, int, int, int] | None]:
        """Each quad as (s, p, o, g) term ids, in order; with ``create`` unknown terms are
        stored, without it a quad with a term the database lacks is ``None`` (it cannot be there)."""
        # Every row applied goes through here: each form below makes one pass
        # over the batch, plus one over the quads with a term to resolve.
        if not create and self._complete:
            # SQLite holding every stored term: a quad with an uncached one is not stored.
            # (A comprehension: the fastest form of this pass, and presence probes run it
            # over every quad a commit group touches.)
            get = self._ids.get
            probed: list[Any] = [
                None if None in (key := (get(s), get(p), get(o), get(g or ""))) else key for s, p, o, g in quads
            ]
            return probed
        if create and self._complete and len(self._ids) + 4 * len(quads) <= self.term_cache:
            return self._keys_storing(quads)
        # The keys of the quads whose terms are all cached, and the terms the cache lacks.
        keys, misses, unknown = split_keys(quads, self._ids)
        if not misses:
            return keys
        if self._make_room(unknown):
            # The cache started over: the cached terms of these quads went with it.
            unknown = dict.fromkeys(t or "" for i in misses for t in quads[i])
        self._resolve(unknown, create=create)
        fill_keys(quads, keys, misses, self._ids)
        return keys

    def _keys_storing(self, quads: Sequence[Quad]) -> list[tuple[int, int, int, int] | None]:
        """:meth:`_keys` with ``create`` on SQLite when the cache holds every stored term and
        has room for four new terms per quad: a term not cached is new, and gets the next id
        (we hold the write lock) in the same pass, so no quad is looked at twice."""
        ids = self._ids
        first = self._next_id
        new: list[str] = []
        keys, next_id = store_keys(quads, ids, first, new)
        if not new:
            return keys
        chars = sum(map(len, new))
        if self._ids_chars + chars > self.term_cache_chars:
            # Past the text budget the cache starts over, keeping this batch's new terms.
            ids.clear()
            ids.update(zip(new, range(first, next_id), strict=True))
            self._ids_chars = 0
            self._complete = False
        self._ids_chars += chars
        # Listed before the insert: if it fails, the unit's rollback forgets them.
        self._unit_terms.extend(new)
        self._next_id = next_id
        self._known_max = next_id - 1
        # Looked up at call time: tests swap in a weaker hash.
        hash_of = term_hash
        self._cur.executemany(self.sql.term_insert, zip(range(first, next_id), map(hash_of, new), new, strict=True))
        return keys

    def _make_room(self, terms: dict[str, None]) -> bool:
        """Start the cache over if ``terms`` (all of them may be new) would overflow a bound;
        returns whether it did (the batch is then stored whatever its size)."""
        ids = self._ids
        if len(ids) + len(terms) > self.term_cache or self._ids_chars + sum(map(len, terms)) > self.term_cache_chars:
            ids.clear()
            self._ids_chars = 0
            self._complete = self._pg_fresh = False
            return True
        return False

    def _resolve(self, terms: dict[str, None], *, create: bool) -> None:
        """Cache the ids of ``terms``, none of them cached: those the database has, or all
        with ``create``."""
        ids = self._ids
        if self._complete and not create:
            return
        absent = self._absent
        # Looked up at call time: tests swap in a weaker hash.
        hash_of = term_hash
        hashes = (
            {t: absent[t] if t in absent else hash_of(t) for t in terms}
            if absent
            else dict(zip(terms, map(hash_of, terms), strict=True))
        )
        if not hashes:
            return
        before = len(ids)
        if self.dialect == "postgresql":
            self._resolve_pg(hashes, create=create)
        else:
            self._resolve_sqlite(hashes, create=create)
        # The terms just cached are those of ``hashes`` now in ``ids`` (usually all of them).
        if len(ids) - before == len(hashes):
            self._ids_chars += sum(map(len, hashes))
        else:
            self._ids_chars += sum(len(t) for t in hashes if t in ids)

    def _lookup(self, hashes: Iterable[int]) -> dict[str, int]:
        """Stored terms (text -> id) with any of these hashes; the text tells colliding ones apart."""
        found: dict[str, int] = {}
        unique = list(set(hashes))
        for i in range(0, len(unique), _LOOKUP_CHUNK):
            chunk = unique[i : i + _LOOKUP_CHUNK]
            sql = self.sql.term_lookup if len(chunk) == _LOOKUP_CHUNK else self.sql.term_lookup_sql(len(chunk))
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
        new = list(hashes) if self._complete else [term for term in hashes if term not in ids]
        if not new:
            return
        first = self._next_id
        numbers = range(first, first + len(new))
        self._cur.executemany(self.sql.term_insert, zip(numbers, map(hashes.__getitem__, new), new, strict=True))
        ids.update(zip(new, numbers, strict=True))
        self._unit_terms.extend(new)
        self._next_id = first + len(new)
        self._known_max = self._next_id - 1

    def _resolve_pg(self, hashes: dict[str, int], *, create: bool) -> None:
        # New terms are committed at once on a connection of their own, outside the unit.
        # Inside it, two appliers adding overlapping new terms in different orders would
        # hold each other's index locks until their transactions end: a deadlock. A term
        # without quads is harmless (the dictionary only grows), and the unit's commit
        # flushes the WAL past these inserts, so a crash cannot keep quads and lose terms.
        # Terms absent at our lookup are inserted in hash order; when two appliers add the
        # same term, the unique (h, md5(term)) index fails the later plain insert, which
        # runs again as insert-or-ignore and reads back: both get the one id.
        terms = sorted(hashes, key=hashes.__getitem__)
        cursor = self._term_cursor()
        ids = self._ids
        absent = self._absent
        if not create:
            self._pg_read(cursor, terms, hashes)
            # Remembered for the insert that usually follows (a commit group's presence
            # lookup comes before its adds): those need no second lookup.
            self._absent = {t: hashes[t] for t in terms if t not in ids}
            return
        # A lookup first, then a plain insert of the terms still absent: that costs the
        # server less than insert-or-read of them all (bench.pg_statements). Terms the last
        # lookup found absent skip it, and so does every term while the cache is fresh (a
        # term it lacks is new, see _pg_fresh).
        unknown = [] if self._pg_fresh else [t for t in terms if t not in absent] if absent else terms
        if unknown:
            self._pg_read(cursor, unknown, hashes)
        new = [t for t in terms if t not in ids]
        self._absent = {}
        if new:
            values, texts = bigint_array([hashes[t] for t in new]), text_array(new)
            # Ids from the table's own sequence: unique whoever else draws from it.
            numbers: list[int] = cursor.execute(self.sql.term_ids, (len(new),)).fetchone()[0]
            params = (bigint_array(numbers), values, texts)
            if self._overlap_terms:
                if self._term_sender is None:
                    self._term_sender = ThreadPoolExecutor(1, thread_name_prefix="patchsync-terms")
                sent = self._term_sender.submit(cursor.execute, self.sql.term_insert_new, params)
                # Cached before the insert is known to succeed: _settle_terms corrects them.
                ids.update(zip(new, numbers, strict=True))
                self._in_flight = (sent, new, numbers, hashes, (values, texts))
                return
            try:
                cursor.execute(self.sql.term_insert_new, params)
                ids.update(zip(new, numbers, strict=True))
            except Exception as exc:
                if not is_unique_violation(exc):
                    raise
                self._pg_insert_or_read(new, hashes, values, texts)

    def _pg_insert_or_read(self, new: list[str], hashes: dict[str, int], values: Any, texts: Any) -> None:
        """The plain insert of ``new`` failed on the unique index: another applier added
        some of them since our lookup (or since the table was empty, see _pg_fresh). Insert
        or ignore, and read back. The ids drawn for the plain insert stay unused."""
        cursor = self._term_cur
        self._pg_fresh = False
        self._pg_store(cursor.execute(self.sql.term_insert, (values, texts, values, texts)).fetchall())
        # Only here can a term still lack an id: another applier committed it after that
        # statement began, so its row made ours conflict and only a new snapshot shows it.
        missing = [t for t in new if t not in self._ids]
        if missing:
            self._pg_read(cursor, missing, hashes)

    def _settle_terms(self, *, failing: bool = False) -> bool:
        """Wait for the insert of new terms sent from a thread (see _overlap_terms); returns
        whether any of them got an id other than the one drawn for it (another applier had
        stored it), so that rows written with the drawn ids must be written again. If the
        insert failed otherwise, its terms leave the cache and the error is raised, unless
        ``failing`` (the caller is raising an error of its own already)."""
        if self._in_flight is None:
            return False
        sent, new, numbers, hashes, (values, texts) = self._in_flight
        self._in_flight = None
        try:
            sent.result()
            return False
        except Exception as exc:
            # Not stored with these ids (or not at all): out of the cache.
            self._forget(list(new))
            if failing:
                return False
            if not is_unique_violation(exc):
                raise
        self._pg_insert_or_read(new, hashes, values, texts)
        ids = self._ids
        self._ids_chars += sum(len(term) for term in new if term in ids)
        return any(ids.get(term) != number for term, number in zip(new, numbers, strict=True))

    def _pg_read(self, cursor: Any, terms: list[str], hashes: dict[str, int]) -> None:
        params = (bigint_array([hashes[t] for t in terms]), text_array(terms))
        self._pg_store(cursor.execute(self.sql.term_lookup, params).fetchall())

    def _pg_store(self, rows: Iterable[tuple[str, int]]) -> None:
        # The statements return (term, id) of the texts they were given (statements.py).
        self._ids.update(rows)

    def _term_cursor(self) -> Any:
        """PostgreSQL: a cursor on an autocommit connection of its own, for the dictionary."""
        if self._term_conn is None:
            self._term_conn = self.engine.raw_connection()
            driver = self._term_conn.driver_connection
            driver.autocommit = True
            cursor = driver.cursor()
            # Safe without a flush of its own: see _resolve_pg.
            cursor.execute("SET synchronous_commit = off")
            for setting in PG_SESSION:
                cursor.execute(setting)
            self._term_cur = cursor
            # The cache is empty until this first statement of ours: it holds every stored
            # term from here on if the table holds none.
            self._pg_fresh = not self._ids and cursor.execute("SELECT 1 FROM ps_terms LIMIT 1").fetchone() is None
        return self._term_cur

    def _forget(self, terms: list[str]) -> None:
        """Drop cache entries of terms whose insert was rolled back."""
        pop = self._ids.pop
        dropped = 0
        for term in terms:
            if pop(term, None) is not None:
                dropped += len(term)
        self._ids_chars -= dropped
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


__all__ = ["TERM_CACHE_CHARS", "TERM_CACHE_SIZE", "TermDictionary"]
