"""The term layer: how the codec builds and inspects RDF terms without importing rdflib.

The codec never constructs terms itself. It calls a :class:`TermAdapter`, so one decoder
can hand out rdflib terms (:class:`patchsync.terms.rdflib_adapter.RdflibTerms`, the default) or
N-Triples strings (:class:`patchsync.terms.ntriples.NTriplesTerms`, used by Spark) with no
second conversion pass. Writers go the other way through :meth:`TermAdapter.unpack`.

``unpack`` answers one of these tuples (the first item is a kind constant)::

    (IRI, iri)                      (BNODE, label)
    (LITERAL, lex, lang, datatype)  lang and datatype are None for a simple literal
    (TRIPLE, s, p, o)               an RDF-star quoted triple of adapter terms
    (DEFAULT_GRAPH,)                the default graph, valid only in graph position
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeVar

IRI = 0
BNODE = 1
LITERAL = 2
TRIPLE = 3
DEFAULT_GRAPH = 4

KIND_NAMES = ("IRI", "blank node", "literal", "quoted triple", "default graph")

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

T = TypeVar("T")

#: What :meth:`TermAdapter.unpack` returns; see the module docstring for the shapes.
Unpacked = tuple[Any, ...]


class TripleTerm(NamedTuple):
    """An RDF-star quoted triple whose parts are terms of the same adapter."""

    s: Any
    p: Any
    o: Any


class TermAdapter(Protocol[T]):
    """Builds terms for decoders and takes them apart for encoders.

    An adapter that cannot build a term (rdflib and a language tag it rejects, a SPARQL
    target and a blank node under ``bnodes=refuse``) raises :class:`ValueError`; the decoder
    turns it into a :class:`~patchsync.errors.DecodeError` naming the row's byte, after the
    events before that row.
    """

    def iri(self, value: str) -> T:
        """An IRI term."""
        ...

    def bnode(self, label: str) -> T:
        """A blank node; the label is kept as the node's system identifier."""
        ...

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> T:
        """A literal: simple, language-tagged or typed (never both lang and datatype)."""
        ...

    def triple(self, s: T, p: T, o: T) -> T:
        """An RDF-star quoted triple."""
        ...

    def default_graph(self) -> T:
        """The default graph of a dataset (graph position only)."""
        ...

    def unpack(self, term: T) -> Unpacked:
        """Classify ``term`` as one of the tuples in the module docstring.

        Raises :class:`patchsync.errors.EncodeError` for objects that are not terms.
        """
        ...
