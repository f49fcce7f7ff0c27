"""The rdflib term adapter: the decoders' default term factory.

Literals are built with ``normalize=False``: a replication engine must hand on lexical
forms exactly as written (rdflib would otherwise rewrite ``"01"^^xsd:integer`` to
``"1"``). The default graph is rdflib's ``DATASET_DEFAULT_GRAPH_ID``, so quads decode
straight into ``rdflib.Dataset``. Quoted triples are :class:`patchsync.terms.TripleTerm`
tuples of rdflib terms, because rdflib 7 has no RDF-star term of its own.
"""

from __future__ import annotations

from typing import ClassVar

from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.term import BNode, Literal, Node, URIRef

from patchsync.errors import EncodeError
from patchsync.terms.adapter import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, TripleTerm, Unpacked

RdflibTerm = Node | TripleTerm


class RdflibTerms:
    """Builds and unpacks rdflib terms (see the module docstring for the mapping)."""

    #: Term types that hold no reference which could lead back to the term (a URIRef or
    #: BNode holds none; a Literal its language, datatype and a value converted from its
    #: lexical form before the literal existed): the compiled decoder takes the terms it
    #: caches off the garbage collector's lists (reference counting still frees them).
    untracked_terms: ClassVar[tuple[type, ...]] = (URIRef, BNode, Literal)

    def __init__(self) -> None:
        self._datatypes: dict[str, URIRef] = {}

    def iri(self, value: str) -> URIRef:
        return URIRef(value)

    def bnode(self, label: str) -> BNode:
        return BNode(label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> Literal:
        if datatype is None:
            return Literal(lex, lang=lang or None, normalize=False)
        dt = self._datatypes.get(datatype)
        if dt is None:
            dt = self._datatypes[datatype] = URIRef(datatype)
        return Literal(lex, datatype=dt, normalize=False)

    def triple(self, s: RdflibTerm, p: RdflibTerm, o: RdflibTerm) -> TripleTerm:
        return TripleTerm(s, p, o)

    def default_graph(self) -> URIRef:
        return DATASET_DEFAULT_GRAPH_ID

    #: Term types that rdflib can call equal while they write differently: its Literal
    #: equality (and hash) ignore the case of a language tag, so an encoder must not stand
    #: ``"a"@EN`` in for an equal ``"a"@en`` it wrote before (see :meth:`writes_same`).
    loose_types: ClassVar[tuple[type, ...]] = (Literal, TripleTerm)

    def writes_same(self, a: RdflibTerm, b: RdflibTerm) -> bool:
        """Whether two terms rdflib calls equal also write the same (see ``loose_types``)."""
        if type(a) is TripleTerm:
            return all(self.writes_same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
        return not isinstance(a, Literal) or (isinstance(b, Literal) and a.language == b.language)

    def unpack(self, term: RdflibTerm) -> Unpacked:
        # Order matters: Literal and URIRef are both str subclasses.
        if isinstance(term, URIRef):
            if term == DATASET_DEFAULT_GRAPH_ID:
                return (DEFAULT_GRAPH,)
            return (IRI, str(term))
        if isinstance(term, BNode):
            return (BNODE, str(term))
        if isinstance(term, Literal):
            dt = term.datatype
            return (LITERAL, str(term), term.language, None if dt is None else str(dt))
        if isinstance(term, TripleTerm):
            return (TRIPLE, term.s, term.p, term.o)
        raise EncodeError(f"not an RDF term: {term!r}")
