"""The term dictionary of a PostgreSQL target: new terms committed at once, beside the quads.

New terms are inserted on a connection of the dictionary's own in autocommit mode, outside
the unit (see :meth:`PostgresTerms._resolve_hashes`), their ids drawn from the table's
sequence. A dictionary that started empty trusts its cache to tell new terms before their
insert, and only speed rests on that (see ``_fresh``); a term another applier stored
first fails the plain insert on the unique index, which is repaired by insert-or-ignore.
While the target writes a batch's quads, the batch's new terms may go from a thread of
their own (:meth:`PostgresTerms.keys_beside`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.errors import is_unique_violation
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.pg_arrays import bigint_array, text_array
from patchsync.apply.targets.sql.statements import PG_SESSION, Statements
from patchsync.apply.targets.sql.terms import TermDictionary


class PostgresTerms(TermDictionary):
    """The term dictionary of a PostgreSQL target (see the module docstring)."""

    def __init__(self, link: Link, sql: Statements, term_cache: int, term_cache_chars: int) -> None:
        super().__init__(link, sql, term_cache, term_cache_chars)
        # The dictionary's own autocommit connection and its cursor, opened on first use.
        self._term_conn: Any = None
        self._term_cur: Any = None
        # The terms (and their hashes) the last lookup without ``create`` found missing.
        self._absent: dict[str, int] = {}
        # Whether the cache is taken to hold every stored term, so a term it lacks is
        # inserted without a lookup first. True while the table was empty when we first
        # looked, the cache never started over and no such insert failed. Only speed rests
        # on it: a term another applier stored fails the plain insert on the unique index,
        # which turns this off and falls back to insert-or-ignore. (Lookups that do not
        # store, for deletes and presence, never skip: there a wrong guess would lose a row.)
        self._fresh = False
        # While set, _resolve_hashes sends its plain insert of new terms from a thread and
        # caches the ids drawn for them at once, so the server runs it beside the quad
        # insert that follows on the other connection (see keys_beside); _in_flight is that
        # insert until settle waits for it.
        self._overlap_terms = False
        self._in_flight: tuple[Future[Any], list[str], list[int], dict[str, int], tuple[Any, Any]] | None = None
        self._term_sender: ThreadPoolExecutor | None = None
        # Ids drawn from the table's sequence ahead of need: the insert left running draws
        # as many as it inserts once it is done, so the next batch's new terms need no round
        # trip of their own for ids. Ids drawn and never used are gaps, which ids may have.
        self._spare_ids: list[int] = []

    def keys_beside(self, quads: Sequence[Quad]) -> list[Any]:
        """:meth:`keys` with ``create``, the insert of new terms left running.

        It runs on the dictionary's connection while the target's writes the quads: two
        server processes at once, where each insert is mostly the server's B-tree work
        (bench.pg_statements). The caller waits for it (:meth:`settle`) before anything
        else, so the terms are committed before the quads can be.
        """
        self._overlap_terms = True
        try:
            return self.keys(quads, create=True)
        finally:
            self._overlap_terms = False

    def _cache_restarted(self) -> None:
        self._fresh = False

    def _hashes(self, terms: dict[str, None]) -> dict[str, int]:
        absent = self._absent
        hash_of = self._hash_of()
        if not absent:
            return dict(zip(terms, map(hash_of, terms), strict=True))
        return {t: absent[t] if t in absent else hash_of(t) for t in terms}

    def _resolve_hashes(self, hashes: dict[str, int], *, create: bool) -> None:
        # New terms are committed at once on a connection of their own, outside the unit.
        # Inside it, two appliers adding overlapping new terms in different orders would
        # hold each other's index locks until their transactions end: a deadlock. A term
        # without quads is harmless (the dictionary only grows), and the unit's commit
        # flushes the WAL past these inserts, so a crash cannot keep quads and lose terms.
        # Terms absent at our lookup are inserted in hash order; when two appliers add the
        # same term, the unique (h, md5(term)) index fails the later plain insert, which
        # runs again as insert-or-ignore and reads back: both get the one id.
        cursor = self._term_cursor()
        ids = self.cache.ids
        if create and self._fresh:
            # Every term of ``hashes`` is new (the cache holds every stored term): no lookup,
            # and no sort either, as the insert orders its rows by hash itself.
            self._absent = {}
            self._insert(cursor, list(hashes), hashes)
            return
        terms = sorted(hashes, key=hashes.__getitem__)
        absent = self._absent
        if not create:
            self._read(cursor, terms, hashes)
            # Remembered for the insert that usually follows (a commit group's presence
            # lookup comes before its adds): those need no second lookup.
            self._absent = {t: hashes[t] for t in terms if t not in ids}
            return
        # A lookup first, then a plain insert of the terms still absent: that costs the
        # server less than insert-or-read of them all (bench.pg_statements). Terms the last
        # lookup found absent skip it.
        unknown = [t for t in terms if t not in absent] if absent else terms
        if unknown:
            self._read(cursor, unknown, hashes)
        self._absent = {}
        self._insert(cursor, [t for t in terms if t not in ids], hashes)

    def _insert(self, cursor: Any, new: list[str], hashes: dict[str, int]) -> None:
        """Store ``new`` (terms absent at our lookup, or new while the cache is fresh) with
        ids from the sequence, from a thread while ``keys_beside`` runs."""
        if not new:
            return
        ids = self.cache.ids
        values, texts = bigint_array([hashes[t] for t in new]), text_array(new)
        numbers = self._draw_ids(cursor, len(new))
        params = (bigint_array(numbers), values, texts)
        if self._overlap_terms:
            if self._term_sender is None:
                self._term_sender = ThreadPoolExecutor(1, thread_name_prefix="patchsync-terms")
            sent = self._term_sender.submit(self._insert_and_draw, cursor, params, len(new))
            # Cached before the insert is known to succeed: settle corrects them.
            ids.update(zip(new, numbers, strict=True))
            self._in_flight = (sent, new, numbers, hashes, (values, texts))
            return
        try:
            cursor.execute(self.sql.term_insert_new, params)
            ids.update(zip(new, numbers, strict=True))
        except Exception as exc:
            if not is_unique_violation(exc):
                raise
            self._insert_or_read(new, hashes, values, texts)

    def _draw_ids(self, cursor: Any, count: int) -> list[int]:
        """``count`` ids from the table's sequence (unique whoever else draws from it):
        spare ones first, the rest drawn now."""
        spare = self._spare_ids
        if len(spare) < count:
            spare += cursor.execute(self.sql.term_ids, (count - len(spare),)).fetchone()[0]
        numbers, self._spare_ids = spare[:count], spare[count:]
        return numbers

    def _insert_and_draw(self, cursor: Any, params: tuple[Any, ...], count: int) -> list[int]:
        """The insert left running (on the dictionary's thread), then ``count`` ids drawn for
        the next batch while the server is still busy with the quads on the other connection."""
        cursor.execute(self.sql.term_insert_new, params)
        return list(cursor.execute(self.sql.term_ids, (count,)).fetchone()[0])

    def _insert_or_read(self, new: list[str], hashes: dict[str, int], values: Any, texts: Any) -> None:
        """The plain insert of ``new`` failed on the unique index: another applier added
        some of them since our lookup (or since the table was empty, see _fresh). Insert
        or ignore, and read back. The ids drawn for the plain insert stay unused."""
        cursor = self._term_cur
        self._fresh = False
        self._store(cursor.execute(self.sql.term_insert, (values, texts, values, texts)).fetchall())
        # Only here can a term still lack an id: another applier committed it after that
        # statement began, so its row made ours conflict and only a new snapshot shows it.
        missing = [t for t in new if t not in self.cache.ids]
        if missing:
            self._read(cursor, missing, hashes)

    def settle(self, *, failing: bool = False) -> bool:
        """Wait for the insert of new terms sent from a thread (see keys_beside); returns
        whether any of them got an id other than the one drawn for it (another applier had
        stored it), so that rows written with the drawn ids must be written again. If the
        insert failed otherwise, its terms leave the cache and the error is raised, unless
        ``failing`` (the caller is raising an error of its own already)."""
        if self._in_flight is None:
            return False
        sent, new, numbers, hashes, (values, texts) = self._in_flight
        self._in_flight = None
        try:
            self._spare_ids += sent.result()
            return False
        except Exception as exc:
            # Not stored with these ids (or not at all): out of the cache.
            self.cache.forget(list(new))
            if failing:
                return False
            if not is_unique_violation(exc):
                raise
        self._insert_or_read(new, hashes, values, texts)
        self.cache.took(new)
        ids = self.cache.ids
        return any(ids.get(term) != number for term, number in zip(new, numbers, strict=True))

    def _read(self, cursor: Any, terms: list[str], hashes: dict[str, int]) -> None:
        params = (bigint_array([hashes[t] for t in terms]), text_array(terms))
        self._store(cursor.execute(self.sql.term_lookup, params).fetchall())

    def _store(self, rows: Iterable[tuple[str, int]]) -> None:
        # The statements return (term, id) of the texts they were given (statements.py).
        self.cache.ids.update(rows)

    def _term_cursor(self) -> Any:
        """A cursor on an autocommit connection of its own, for the dictionary."""
        if self._term_conn is None:
            self._term_conn = self.link.engine.raw_connection()
            driver = self._term_conn.driver_connection
            driver.autocommit = True
            cursor = driver.cursor()
            # Safe without a flush of its own: see _resolve_hashes.
            cursor.execute("SET synchronous_commit = off")
            for setting in PG_SESSION:
                cursor.execute(setting)
            self._term_cur = cursor
            # The cache is empty until this first statement of ours: it holds every stored
            # term from here on if the table holds none.
            self._fresh = not self.cache.ids and cursor.execute("SELECT 1 FROM ps_terms LIMIT 1").fetchone() is None
        return self._term_cur

    def close(self) -> None:
        self.settle(failing=True)
        if self._term_sender is not None:
            self._term_sender.shutdown()
            self._term_sender = None
        if self._term_conn is not None:
            # Closed for good rather than pooled: it is in autocommit mode, and the pool's
            # reset of a connection the server already dropped logs a traceback.
            with suppress(self.link.dbapi_error, SQLAlchemyError):
                self._term_conn.invalidate()
            self._term_conn = self._term_cur = None


__all__ = ["PostgresTerms"]
