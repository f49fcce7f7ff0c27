"""rdflib targets: any ``Graph``, ``Dataset`` or ``Store`` a library caller hands in.

rdflib stores need not support transactions, so each unit keeps an undo log of the
changes it actually made (an add of a quad that was absent, a delete of one that was
present, a prefix binding it replaced); ``rollback`` replays it backwards, which leaves
the store exactly as before the unit. Checkpoints and the patch history live in this
object (a caller's graph has no place for them).

rdflib binds prefixes store-wide (docs/design.md §5): ``PA``/``PD`` of any graph change the one
store-wide table, and rdflib keeps one prefix per namespace IRI. rdflib has no RDF-star
terms, so a quoted triple fails with :class:`ApplyError` instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from rdflib import Dataset, Graph, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID, ConjunctiveGraph
from rdflib.store import Store

from patchsync.apply.target import Checkpoint, LocalLedger, PatchRecord, Quad
from patchsync.errors import ApplyError
from patchsync.terms import TripleTerm
from patchsync.terms.ntriples import format_term
from patchsync.terms.rdflib_adapter import RdflibTerms

_ADD = 0
_DEL = 1


class RdflibTarget(LocalLedger):
    """Applies patches to an rdflib ``Graph`` (one graph), ``Dataset`` or ``Store`` (quads).

    A plain ``Graph`` takes triples and quads of the default graph; a quad naming another
    graph fails clearly instead of being merged into it (docs/design.md §5).
    """

    def __init__(self, obj: Graph | Store) -> None:
        self.adapter = RdflibTerms()
        self._terms: Any = self.adapter
        if isinstance(obj, Store):
            obj = Dataset(store=obj)
        self.graph: Graph = obj
        self.store: Store = obj.store
        # rdflib binds its default prefixes when the namespace manager is first used (for
        # example by get_context), overriding earlier bindings; have that happen now.
        obj.namespace_manager  # noqa: B018
        self.is_dataset = isinstance(obj, ConjunctiveGraph)
        self._contexts: dict[Any, Graph] = {}
        self._init_ledger()
        self._bound: set[str] = set()
        self._undo: list[tuple[int, tuple[Any, Any, Any], Graph]] | None = None
        self._prefix_undo: dict[str, Any] = {}

    # -- reads -------------------------------------------------------------------------

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        t = self._terms
        if self.is_dataset:
            for s, p, o, g in self.graph.quads((None, None, None, None)):  # type: ignore[attr-defined]
                gid = g.identifier if isinstance(g, Graph) else g
                gtext = "" if gid is None or gid == DATASET_DEFAULT_GRAPH_ID else format_term(t, gid)
                yield (format_term(t, s), format_term(t, p), format_term(t, o), gtext)
        else:
            for s, p, o in self.graph:
                yield (format_term(t, s), format_term(t, p), format_term(t, o), "")

    def namespaces(self) -> dict[tuple[str, str], str]:
        out = {}
        for prefix in self._bound:
            ns = self.store.namespace(prefix)
            if ns is not None:
                out[("", prefix)] = format_term(self._terms, URIRef(ns))
        return out

    # -- unit --------------------------------------------------------------------------

    def _context(self, g: Any) -> Graph:
        ctx = self._contexts.get(g)
        if ctx is not None:
            return ctx
        if type(g) is TripleTerm:
            raise ApplyError("rdflib targets cannot hold RDF-star quoted triples (graph name)")
        if self.is_dataset:
            if g is None or g == DATASET_DEFAULT_GRAPH_ID:
                # Dataset.default_context is deprecated (default_graph came in rdflib 7.2); a
                # ConjunctiveGraph, still accepted from callers, names its default graph itself.
                ctx = (
                    self.graph.get_context(DATASET_DEFAULT_GRAPH_ID)
                    if isinstance(self.graph, Dataset)
                    else self.graph.default_context  # type: ignore[attr-defined]
                )
            else:
                ctx = self.graph.get_context(g)  # type: ignore[attr-defined]
        elif g is None or g == DATASET_DEFAULT_GRAPH_ID or g == self.graph.identifier:
            ctx = self.graph
        else:
            raise ApplyError(f"a quad names the graph {g.n3()} but the rdflib target holds a single graph")
        self._contexts[g] = ctx
        return ctx

    def _check(self, s: Any, p: Any, o: Any) -> None:
        if type(s) is TripleTerm or type(o) is TripleTerm or type(p) is TripleTerm:
            raise ApplyError("rdflib targets cannot hold RDF-star quoted triples; use a SQL or oxigraph target")

    def begin(self) -> None:
        self._undo = []
        self._prefix_undo = {}

    def add(self, quads: Sequence[Quad]) -> int:
        undo = self._undo
        assert undo is not None, "add outside a unit"
        store = self.store
        changed = 0
        for s, p, o, g in quads:
            self._check(s, p, o)
            ctx = self._context(g)
            triple = (s, p, o)
            for _ in store.triples(triple, ctx):
                break
            else:
                store.add(triple, ctx)
                undo.append((_ADD, triple, ctx))
                changed += 1
        return changed

    def delete(self, quads: Sequence[Quad]) -> int:
        undo = self._undo
        assert undo is not None, "delete outside a unit"
        store = self.store
        changed = 0
        for s, p, o, g in quads:
            self._check(s, p, o)
            ctx = self._context(g)
            triple = (s, p, o)
            for _ in store.triples(triple, ctx):
                store.remove(triple, ctx)
                undo.append((_DEL, triple, ctx))
                changed += 1
                break
        return changed

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        self._prefix_undo.setdefault(name, self.store.namespace(name))
        self._bind(name, iri)
        self._bound.add(name)

    def _bind(self, name: str, iri: Any) -> None:
        self.store.bind(name, iri, override=True)
        if self.store.namespace(name) != iri:
            # rdflib keeps one prefix per IRI and may refuse the binding when the IRI already
            # has another prefix (rdflib's defaults bind many); PA must win, so move the IRI.
            ns_map = getattr(self.store, "_Memory__namespace", None)
            prefix_map = getattr(self.store, "_Memory__prefix", None)
            if ns_map is None or prefix_map is None:
                raise ApplyError(f"the rdflib store {type(self.store).__name__} refused to bind {name!r} to {iri}")
            old = prefix_map.pop(iri, None)
            if old is not None:
                ns_map.pop(old, None)
            ns_map[name] = iri
            prefix_map[iri] = name

    def delete_prefix(self, graph: Any, name: str) -> None:
        self._prefix_undo.setdefault(name, self.store.namespace(name))
        self._unbind(name)

    def _unbind(self, name: str) -> None:
        # rdflib's Store API cannot remove a binding; the Memory stores keep them in two maps.
        ns_map = getattr(self.store, "_Memory__namespace", None)
        prefix_map = getattr(self.store, "_Memory__prefix", None)
        if ns_map is None or prefix_map is None:
            raise ApplyError(f"the rdflib store {type(self.store).__name__} cannot remove the prefix {name!r}")
        ns = ns_map.pop(name, None)
        if ns is not None and prefix_map.get(ns) == name:
            del prefix_map[ns]

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        self._record(source, checkpoint, records)
        self._undo = None
        self._prefix_undo = {}

    def rollback(self) -> None:
        store = self.store
        for op, triple, ctx in reversed(self._undo or []):
            if op == _ADD:
                store.remove(triple, ctx)
            else:
                store.add(triple, ctx)
        for name, old in self._prefix_undo.items():
            if old is None:
                self._unbind(name)
            else:
                self._bind(name, old)
        self._undo = None
        self._prefix_undo = {}

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.flush()
