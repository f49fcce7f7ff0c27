"""N-Triples term strings (how messages are read) turned into another adapter's terms."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from patchsync.events import Add, Delete, Event, Header
from patchsync.terms import BNODE, IRI, LITERAL, TRIPLE, TermAdapter
from patchsync.terms.ntriples import NTriplesTerms

_NT = NTriplesTerms()
#: Terms kept converted; IRIs repeat across messages, most literals do not.
_CACHE_TERMS = 100_000


class TermConverter:
    """Converts N-Triples term strings into ``adapter``'s terms, remembering recent ones."""

    def __init__(self, adapter: TermAdapter[Any]) -> None:
        self.adapter = adapter
        self.identity = type(adapter) is NTriplesTerms
        self._cache: dict[str, Any] = {}

    def __call__(self, term: str) -> Any:
        if self.identity:
            return term
        found = self._cache.get(term)
        if found is not None:
            return found
        made = self._make(term)
        if len(self._cache) >= _CACHE_TERMS:
            self._cache.clear()
        self._cache[term] = made
        return made

    def _make(self, term: str) -> Any:
        u = _NT.unpack(term)
        a = self.adapter
        kind = u[0]
        if kind == IRI:
            return a.iri(u[1])
        if kind == BNODE:
            return a.bnode(u[1])
        if kind == LITERAL:
            return a.literal(u[1], u[2], u[3])
        if kind == TRIPLE:
            return a.triple(self(u[1]), self(u[2]), self(u[3]))
        return a.default_graph()

    def events(self, events: Iterable[Event]) -> list[Event]:
        """``events`` with their terms converted (statements and headers; the rest as they are)."""
        if self.identity:
            return list(events)
        out: list[Event] = []
        for e in events:
            kind = type(e)
            if kind is Add or kind is Delete:
                assert isinstance(e, (Add, Delete))
                out.append(type(e)(self(e.s), self(e.p), self(e.o), None if e.g is None else self(e.g)))
            elif kind is Header:
                assert isinstance(e, Header)
                out.append(Header(e.key, self(e.value)))
            else:
                out.append(e)
        return out
