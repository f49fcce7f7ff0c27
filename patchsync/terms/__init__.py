"""The term layer: the adapter protocol and its two adapters.

The codec builds and inspects terms only through a :class:`TermAdapter` (``base``), so a
decoder hands out rdflib terms (``rdflib_adapter``, the default) or N-Triples strings
(``ntriples``, used by SQL targets and Spark) with no second conversion pass.
"""

from __future__ import annotations

from typing import Any

from patchsync.terms.adapter import (
    BNODE,
    DEFAULT_GRAPH,
    IRI,
    KIND_NAMES,
    LITERAL,
    RDF_LANGSTRING,
    TRIPLE,
    XSD_STRING,
    T,
    TermAdapter,
    TripleTerm,
    Unpacked,
)

__all__ = [
    "BNODE",
    "DEFAULT_GRAPH",
    "IRI",
    "KIND_NAMES",
    "LITERAL",
    "RDF_LANGSTRING",
    "TRIPLE",
    "XSD_STRING",
    "T",
    "TermAdapter",
    "TripleTerm",
    "Unpacked",
    "default_adapter",
]


def default_adapter() -> TermAdapter[Any]:
    """The adapter codecs use when none is given: rdflib terms.

    Imported on first use, so that the codec modules themselves never import rdflib.
    """
    from patchsync.terms.rdflib_adapter import RdflibTerms

    return RdflibTerms()
