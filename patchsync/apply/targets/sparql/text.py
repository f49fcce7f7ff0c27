"""What the target says to a store and reads from it, as text (sans I/O).

Terms. The target's terms are N-Triples strings (:class:`~patchsync.terms.ntriples.NTriplesTerms`,
the memory target's), which SPARQL reads as they are, except:

- a blank node cannot be named by an update (SPARQL 1.1 Update §3.1.1, §3.1.2: ``INSERT DATA``
  mints a fresh node, ``DELETE DATA`` refuses one), so it is written as a skolem IRI
  ``GENID + label`` (RDF 1.1 Concepts §3.5, https://www.w3.org/TR/rdf11-concepts/#section-skolemization)
  and read back as the blank node ``_:label``; RDF Patch labels are stable across patches
  (https://afs.github.io/rdf-delta/rdf-patch.html, "Blank nodes"), so a label is one IRI for
  ever. With ``bnodes=refuse`` a patch holding one is refused in one line instead;
- a quoted triple is refused, or written as an RDF 1.2 triple term ``<<( s p o )>>`` (only as an
  object) or as RDF-star ``<< s p o >>``, as the store takes them (``star=``).

Every write of a commit group is its net change per quad (0019, decision 1): the deletes and
adds are disjoint, so their order does not matter and writing them again is harmless.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from patchsync.errors import ApplyError
from patchsync.terms import BNODE, TRIPLE
from patchsync.terms.ntriples import NTriplesTerms, format_iri

from .config import SparqlConfig

NT = NTriplesTerms()
XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
#: The vocabulary of the state graphs.
PS = "urn:x-patchsync:"
SOURCE, AT, CHECKPOINT, APPLIED, GUARD, HEAD = (
    f"<{PS}{name}>" for name in ("source", "at", "checkpoint", "applied", "guard", "head")
)

#: ``(s, p, o, g)`` as N-Triples strings, ``g`` ``""`` or None in the default graph.
Quad = tuple[str, str, str, Any]


class Refused(ApplyError):
    """A quad the store cannot hold as the target is configured (a blank node, a quoted triple)."""


class Terms:
    """N-Triples terms as SPARQL terms and back, by the rules of the module docstring."""

    def __init__(self, config: SparqlConfig) -> None:
        self.genid = config.genid
        self.skolem = config.bnodes == "skolem"
        self.star = config.star
        self.default_graph = format_iri(config.default_graph) if config.default_graph else None
        self.system_graphs = frozenset(config.layout.system_graphs)

    # -- writing ---------------------------------------------------------------------------

    def term(self, text: str, *, position: str = "o") -> str:
        """One N-Triples term as SPARQL text (``position``: ``s``, ``p``, ``o`` or ``g``)."""
        first = text[0]
        if first == '"' or (first == "<" and text[1] != "<" and not text.startswith("<_:")):
            return text
        u = NT.unpack(text)
        kind = u[0]
        if kind == BNODE:
            if not self.skolem:
                raise Refused(f"a blank node ({text}) cannot be written with bnodes=refuse")
            return format_iri(self.genid + u[1])
        if kind == TRIPLE:
            if self.star == "refuse":
                raise Refused(f"the store takes no RDF-star quoted triple ({text[:80]})")
            if self.star == "rdf12" and position != "o":
                raise Refused(f"RDF 1.2 allows a triple term only as an object, not {text[:80]}")
            inner = " ".join(self.term(t, position=x) for t, x in zip(u[1:4], "spo", strict=True))
            return f"<<( {inner} )>>" if self.star == "rdf12" else f"<< {inner} >>"
        return text  # an IRI or a literal in a form the fast path did not see

    def graph(self, g: Any) -> str | None:
        """The SPARQL graph of a quad's ``g``; None: the store's own default graph."""
        if not g:
            return self.default_graph
        return self.term(g, position="g")

    def triple_text(self, quad: Quad) -> tuple[str | None, str]:
        s, p, o, g = quad
        return self.graph(g), f"{self.term(s, position='s')} {self.term(p, position='p')} {self.term(o)} ."

    # -- reading ---------------------------------------------------------------------------

    def read(self, binding: dict[str, Any]) -> str:
        """One JSON result term (SPARQL 1.1 Query Results JSON §3.2.2) as an N-Triples term."""
        kind, value = binding["type"], binding["value"]
        if kind == "uri":
            if value.startswith(self.genid):
                return NT.bnode(value[len(self.genid) :])
            return NT.iri(value)
        if kind == "bnode":
            return NT.bnode(value.replace("nodeID://", ""))
        if kind == "triple":
            return NT.triple(self.read(value["subject"]), self.read(value["predicate"]), self.read(value["object"]))
        lang = binding.get("xml:lang")
        datatype = binding.get("datatype")
        if lang:
            return NT.literal(value, lang)
        if datatype in (None, XSD_STRING, RDF_LANG_STRING):
            return NT.literal(value)
        return NT.literal(value, None, datatype)

    def read_graph(self, binding: dict[str, Any] | None) -> str | None:
        """A result's graph as a quad's ``g`` (``""`` default), None for a graph not the replica's."""
        if binding is None:
            return ""
        value = binding["value"]
        if value in self.system_graphs:
            return None
        g = self.read(binding)
        return "" if g == self.default_graph else g


def data_ops(terms: Terms, verb: str, quads: Iterable[Quad], per_op: int) -> Iterator[tuple[str, int]]:
    """``INSERT DATA``/``DELETE DATA`` operations (``verb``) of at most ``per_op`` triples each,
    each in one graph: each operation's text and triple count.

    One graph an operation because Virtuoso 7.2.5 deletes only part of a ``DELETE DATA`` that
    holds several ``GRAPH`` blocks (measured: two blocks of two triples, one of each deleted),
    and answers 200; ``tests/test_sparql_servers.py`` pins it."""
    by_graph: dict[str | None, list[str]] = {}
    for quad in quads:
        g, text = terms.triple_text(quad)
        by_graph.setdefault(g, []).append(text)
    for g, lines in by_graph.items():
        for start in range(0, len(lines), per_op):
            chunk = lines[start : start + per_op]
            body = "\n".join(chunk)
            yield f"{verb} {{\n" + (body if g is None else f"GRAPH {g} {{\n{body}\n}}") + "\n}", len(chunk)


def split_requests(ops: Sequence[tuple[str, int]], max_bytes: int, max_triples: int, max_ops: int) -> list[list[str]]:
    """Operations in order, cut into requests of at most ``max_bytes`` of text, ``max_triples``
    triples and ``max_ops`` operations (an operation larger than a bound is a request alone);
    always at least one request (the last carries the checkpoint)."""
    requests: list[list[str]] = [[]]
    size = count = 0
    for text, triples in ops:
        current = requests[-1]
        if current and (size + len(text) > max_bytes or count + triples > max_triples or len(current) >= max_ops):
            requests.append([])
            size = count = 0
        requests[-1].append(text)
        size += len(text)
        count += triples
    return requests


#: What Virtuoso answers to a request too large to compile (0019: its SQL code limit, SP031,
#: and the same words after a transaction aborted for its log after-image, SR325 / 40005).
_TOO_LARGE = ("exceeded 10000 lines", "SQ199", "40005")


def too_large(message: str) -> bool:
    """Whether a store's error message says the request was too large (nothing applied)."""
    return any(words in message for words in _TOO_LARGE)


def presence_query(terms: Terms, quads: Sequence[Quad]) -> str:
    """A SELECT answering ``?i`` for each quad (by index in ``quads``) the store holds."""
    named: list[str] = []
    default: list[str] = []
    for i, (s, p, o, g) in enumerate(quads):
        row = f"{terms.term(s, position='s')} {terms.term(p, position='p')} {terms.term(o)}"
        graph = terms.graph(g)
        if graph is None:
            default.append(f"({i} {row})")
        else:
            named.append(f"({i} {row} {graph})")
    branches = []
    if named:
        branches.append("{ VALUES (?i ?s ?p ?o ?g) {\n" + "\n".join(named) + "\n} GRAPH ?g { ?s ?p ?o } }")
    if default:
        branches.append("{ VALUES (?i ?s ?p ?o) {\n" + "\n".join(default) + "\n} ?s ?p ?o }")
    return "SELECT ?i WHERE { " + " UNION ".join(branches) + " }"


def dump_query(terms: Terms, state: str) -> str:
    """Every quad of the replica: the named graphs but the state graphs, and the default graph
    where the store has one of its own (Virtuoso's query default graph is every graph's union)."""
    named = f'{{ GRAPH ?g {{ ?s ?p ?o }} FILTER (!STRSTARTS(STR(?g), "{state}")) }}'
    if terms.default_graph is not None:
        return f"SELECT ?s ?p ?o ?g WHERE {named}"
    return f"SELECT ?s ?p ?o ?g WHERE {{ {{ ?s ?p ?o }} UNION {named} }}"


__all__ = ["NT", "Refused", "Terms", "data_ops", "dump_query", "presence_query"]
