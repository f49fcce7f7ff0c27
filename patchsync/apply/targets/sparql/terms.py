"""The term adapter of a SPARQL target: N-Triples strings, refusing what the store cannot hold.

Refusing while the log is decoded (rather than when a group is written) stops before the unit
that holds the row: every unit before it is applied, nothing after. A refusal is a
:class:`ValueError`, as the term adapter protocol has an adapter refuse a term
(:class:`~patchsync.terms.adapter.TermAdapter`): the decoder turns it into a
:class:`~patchsync.errors.DecodeError` naming the log, the row's byte and the rule.
"""

from __future__ import annotations

from patchsync.terms.ntriples import NTriplesTerms

from .config import SparqlConfig


class SparqlTerms(NTriplesTerms):
    """:class:`NTriplesTerms` that refuse (:class:`ValueError`) a blank node under
    ``bnodes=refuse`` and a quoted triple on a store that takes none (``star=refuse``)."""

    __slots__ = ("_refuse_bnodes", "_refuse_star")

    def __init__(self, config: SparqlConfig) -> None:
        self._refuse_bnodes = config.bnodes == "refuse"
        self._refuse_star = config.star == "refuse"

    def bnode(self, label: str) -> str:
        if self._refuse_bnodes:
            raise ValueError(f"blank node _:{label}: this SPARQL target is set to bnodes=refuse")
        return super().bnode(label)

    def triple(self, s: str, p: str, o: str) -> str:
        if self._refuse_star:
            raise ValueError("an RDF-star quoted triple: this SPARQL store takes none (star=refuse)")
        return super().triple(s, p, o)
