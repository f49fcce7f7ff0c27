"""The SQL term dictionary: N-Triples term text <-> integer ids, cached in memory.

Terms missing from the cache are looked up by hash and new ones inserted in bulk; how is
the dialect's (:mod:`.dialects`): on SQLite, which has one writer at a time, the cache
knows when it holds every term in the database and then skips the lookups; on PostgreSQL
new terms are committed at once on a connection of their own. This module holds what both
share: the cache (:class:`TermCache`: the ids, their bounds, and the lists of terms a
rollback must forget, one object changed only through its own methods) and the lookup of
a batch's keys. The dictionary only grows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.schema import term_hash
from patchsync.apply.targets.sql.statements import Statements
from patchsync.apply.targets.sql.term_keys import fill_keys, split_keys

# Term ids kept in memory by default; beyond this the cache starts again (and is no longer
# complete).
TERM_CACHE_SIZE = 1 << 19
#: Characters of term text the cache may hold by default, on top of the entry count: the count
#: alone bounds entries, not bytes, and 524,288 literals of 10 KB each would be GBs. Typical
#: terms (IRIs and short literals, well under 128 characters on average) reach the count
#: first, so they keep the hit rate they had; long ones start the cache over sooner. At most
#: about 64 MB of text (more for text outside Latin-1) plus the entries' own ~120 bytes each.
TERM_CACHE_CHARS = 1 << 26


class TermCache:
    """The term dictionary's memory: term text -> id, bounded, and the new terms a rollback forgets.

    ``ids`` holds at most ``max_terms`` entries and ``max_chars`` characters of term text
    (``chars``); past either it starts over. Terms first stored by the open unit
    (``unit_terms``) and by the open transaction's committed units (``tx_terms``) are listed
    so that a rollback forgets them; ids read from the database stay valid (never deleted).
    The dictionary's loops fill ``ids`` themselves (in C where built) and then report what
    they added (:meth:`took`); everything else about the cache is changed here only.
    """

    __slots__ = ("chars", "ids", "max_chars", "max_terms", "tx_terms", "unit_terms")

    def __init__(self, max_terms: int, max_chars: int) -> None:
        self.max_terms = max_terms
        self.max_chars = max_chars
        self.ids: dict[str, int] = {}
        self.chars = 0
        self.unit_terms: list[str] = []
        self.tx_terms: list[str] = []

    def overflows(self, terms: int, chars: int) -> bool:
        """Whether ``terms`` more entries of ``chars`` characters would pass a bound."""
        return len(self.ids) + terms > self.max_terms or self.chars + chars > self.max_chars

    def start_over(self, keep: Mapping[str, int] | None = None) -> None:
        """Empty the cache (keeping only ``keep``, which counts against the text bound)."""
        self.ids.clear()
        self.chars = 0
        if keep:
            self.ids.update(keep)
            self.chars = sum(map(len, keep))

    def took(self, terms: Collection[str], *, before: int | None = None, chars: int | None = None) -> None:
        """``terms`` were put in ``ids`` (those of them now there): count their text.

        ``before`` is the number of entries before they were put, so that when all of them
        were new their lengths are summed without a lookup; ``chars``, their text, when known.
        """
        if chars is not None:
            self.chars += chars
        elif before is not None and len(self.ids) - before == len(terms):
            self.chars += sum(map(len, terms))
        else:
            ids = self.ids
            self.chars += sum(len(t) for t in terms if t in ids)

    def new_in_unit(self, terms: list[str]) -> None:
        """``terms`` were stored by the open unit: forgotten if it rolls back."""
        self.unit_terms.extend(terms)

    def forget(self, terms: list[str]) -> None:
        """Drop the entries of ``terms`` (their insert was rolled back); ``terms`` is emptied."""
        pop = self.ids.pop
        dropped = 0
        for term in terms:
            if pop(term, None) is not None:
                dropped += len(term)
        self.chars -= dropped
        terms.clear()

    def unit_committed(self) -> None:
        """The open unit committed: its new terms live or die with the transaction."""
        self.tx_terms.extend(self.unit_terms)
        self.unit_terms.clear()

    def unit_rolled_back(self) -> None:
        """The open unit's writes were undone: its new terms are not stored."""
        self.forget(self.unit_terms)

    def transaction_committed(self) -> None:
        """The transaction committed: every term it stored is in the database."""
        self.tx_terms.clear()

    def abandoned(self) -> None:
        """The transaction was dropped: none of the terms it stored are in the database."""
        self.forget(self.unit_terms)
        self.forget(self.tx_terms)


class TermDictionary:
    """Term id resolution for :class:`~patchsync.apply.targets.sql.target.SqlTarget`, a part it holds.

    Its memory is ``cache`` (:class:`TermCache`). Each dialect subclasses it with
    :meth:`_resolve_hashes` (look up, and with ``create`` store, terms the cache lacks)
    and the hooks the target calls at transaction boundaries.
    """

    def __init__(self, link: Link, sql: Statements, term_cache: int, term_cache_chars: int) -> None:
        self.link = link
        self.sql = sql
        self.cache = TermCache(term_cache, term_cache_chars)

    @staticmethod
    def _hash_of() -> Any:
        # Looked up at call time: tests swap in a weaker hash.
        return term_hash

    def keys(self, quads: Sequence[Quad], *, create: bool) -> list[tuple[int, int, int, int] | None]:
        """Each quad as (s, p, o, g) term ids, in order; with ``create`` unknown terms are
        stored, without it a quad with a term the database lacks is ``None`` (it cannot be there)."""
        # Every row applied goes through here: each form below makes one pass
        # over the batch, plus one over the quads with a term to resolve.
        # The keys of the quads whose terms are all cached, and the terms the cache lacks.
        ids = self.cache.ids
        keys, misses, unknown = split_keys(quads, ids)
        if not misses:
            return keys
        if self._make_room(unknown):
            # The cache started over: the cached terms of these quads went with it.
            unknown = dict.fromkeys(t or "" for i in misses for t in quads[i])
        self._resolve(unknown, create=create)
        fill_keys(quads, keys, misses, ids)
        return keys

    def _make_room(self, terms: dict[str, None]) -> bool:
        """Start the cache over if ``terms`` (all of them may be new) would overflow a bound;
        returns whether it did (the batch is then stored whatever its size)."""
        cache = self.cache
        if cache.overflows(len(terms), sum(map(len, terms))):
            cache.start_over()
            self._cache_restarted()
            return True
        return False

    def _cache_restarted(self) -> None:
        """The cache was emptied to make room: it no longer holds what it held."""

    def _hashes(self, terms: dict[str, None]) -> dict[str, int]:
        """Each term's dictionary hash."""
        hash_of = self._hash_of()
        return dict(zip(terms, map(hash_of, terms), strict=True))

    def _resolve(self, terms: dict[str, None], *, create: bool) -> None:
        """Cache the ids of ``terms``, none of them cached: those the database has, or all
        with ``create``."""
        hashes = self._hashes(terms)
        if not hashes:
            return
        before = len(self.cache.ids)
        self._resolve_hashes(hashes, create=create)
        self.cache.took(hashes, before=before)

    def _resolve_hashes(self, hashes: dict[str, int], *, create: bool) -> None:
        """Cache the ids of the terms of ``hashes`` (text -> hash) the database has, storing
        the others with ``create`` (the dialect's part)."""
        raise NotImplementedError

    # -- transaction boundaries, called by the target ----------------------------------

    def transaction_started(self) -> None:
        """A write transaction began (it holds the target's write lock)."""

    def unit_committed(self) -> None:
        """The open unit committed: its new terms live or die with the transaction."""
        self.cache.unit_committed()

    def unit_rolled_back(self, *, in_transaction: bool) -> None:
        """The open unit's writes were undone: its new terms are not stored."""
        self.cache.unit_rolled_back()

    def transaction_committed(self) -> None:
        """The transaction committed: every term it stored is in the database."""
        self.cache.transaction_committed()

    def abandoned(self) -> None:
        """The transaction was dropped: none of the terms it stored are in the database."""
        self.cache.abandoned()

    def settle(self, *, failing: bool = False) -> bool:
        """Wait for term inserts still running; returns whether quads written meanwhile
        must be written again (see the PostgreSQL dictionary). Nothing runs by default."""
        return False

    def close(self) -> None:
        """Release what the dictionary holds of its own (connections, threads)."""


__all__ = ["TERM_CACHE_CHARS", "TERM_CACHE_SIZE", "TermCache", "TermDictionary"]
