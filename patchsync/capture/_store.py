"""The store wrapper that sees every write rdflib makes and reports the real changes.

See :mod:`patchsync.capture._recorder` for how a recorder uses it. Every write is checked
against the inner store so that only real changes are reported: an add of a present quad
or a delete of an absent one reports nothing, and a pattern delete reports the concrete
quads it removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from rdflib import Graph, URIRef
from rdflib.plugins.stores.memory import Memory, SimpleMemory
from rdflib.store import Store

from patchsync.errors import UsageError

#: The context rdflib hands a store with a write or a read (its ``Store`` API's type): the
#: graph, or ``None`` for every graph.
StoreContext = Graph | None


class ChangeListener(Protocol):
    """What a :class:`RecordingStore` reports to (the recorder's state)."""

    def added(self, triple: Any, context: StoreContext) -> None: ...
    def deleted(self, triple: Any, context: StoreContext) -> None: ...
    def namespaces_changed(self, before: dict[str, URIRef], after: dict[str, URIRef]) -> None: ...


def _namespace_maps(store: Store) -> tuple[dict[str, URIRef], dict[URIRef, str]] | None:
    """The prefix-to-IRI and IRI-to-prefix maps of rdflib's two in-memory stores, else None."""
    if isinstance(store, Memory):
        return store._Memory__namespace, store._Memory__prefix  # type: ignore[attr-defined]
    if isinstance(store, SimpleMemory):
        return store._SimpleMemory__namespace, store._SimpleMemory__prefix  # type: ignore[attr-defined]
    return None


def _match_prefixes(namespaces: dict[str, URIRef], prefixes: dict[URIRef, str]) -> None:
    """Make the IRI-to-prefix map name only live bindings, one for each bound IRI.

    rdflib's own ``bind(..., override=False)`` can leave an IRI mapped to a prefix that is
    bound to another IRI, and its next ``bind`` of that IRI then fails with a ``KeyError``;
    an undo must leave the store in a state rdflib can go on from.
    """
    for ns, name in list(prefixes.items()):
        if namespaces.get(name) != ns:
            del prefixes[ns]
    for name, ns in namespaces.items():
        prefixes.setdefault(ns, name)


def unbind_prefix(store: Store, prefix: str) -> None:
    """Remove a namespace binding from an rdflib store.

    rdflib has no API for this (``bind`` can only add or rebind), but ``PD`` must be
    replayable and a rolled-back ``bind`` must be undone, so the two in-memory stores are
    edited directly. Other stores raise :class:`UsageError`.
    """
    if isinstance(store, RecordingStore):
        store.unbind(prefix)
        return
    maps = _namespace_maps(store)
    if maps is None:
        raise UsageError(f"cannot remove a namespace binding from a {type(store).__name__} store")
    namespaces, prefixes = maps
    namespaces.pop(prefix, None)
    _match_prefixes(namespaces, prefixes)


class RecordingStore(Store):
    """An rdflib store that forwards to ``inner`` and reports real changes to a recorder.

    Built by :class:`Recorder`, which hands it its (private) recording state.
    """

    def __init__(self, inner: Store, recording: ChangeListener) -> None:
        super().__init__()
        self.inner = inner
        self._recording = recording
        self.context_aware = inner.context_aware
        self.formula_aware = inner.formula_aware
        self.graph_aware = inner.graph_aware
        self.transaction_aware = False
        # Memory and SimpleMemory count a context's triples in O(1), so "did the size
        # change" is the cheapest presence test; other stores are asked with triples().
        self._counts = isinstance(inner, (Memory, SimpleMemory))
        # Bound once: this is the hot path of every recorded add.
        self._count = inner.__len__
        self._inner_add = inner.add
        # Memory's subject-predicate-object index (a private attribute, so looked up
        # defensively) tells in three dict lookups that a triple is in no graph at all.
        spo = getattr(inner, "_Memory__spo", None) if type(inner) is Memory else None
        self._spo: dict[Any, Any] | None = spo if isinstance(spo, dict) else None

    # -- writes -------------------------------------------------------------------------

    def add(self, triple: Any, context: Graph, quoted: bool = False) -> None:
        if quoted:
            raise UsageError("formulae (quoted graphs) cannot be recorded as RDF Patch")
        spo = self._spo
        if spo is not None:
            s, p, o = triple
            po = spo.get(s)
            objects = None if po is None else po.get(p)
            if objects is None or o not in objects:
                # Absent from every graph, so certainly a change: the common case costs
                # three dict lookups.
                self._inner_add(triple, context, quoted)
            else:
                # Present in some graph: a change only if this graph's size grows.
                count = self._count
                before = count(context)
                self._inner_add(triple, context, quoted)
                if count(context) == before:
                    return
        elif self._counts:
            count = self._count
            before = count(context)
            self._inner_add(triple, context, quoted)
            if count(context) == before:
                return
        else:
            for _ in self.inner.triples(triple, context):
                return
            self._inner_add(triple, context, quoted)
        try:
            self._recording.added(triple, context)
        except BaseException:
            # Not in the log, so not in the store either: the two never disagree.
            self.inner.remove(triple, context)
            raise

    def addN(self, quads: Iterable[Any]) -> None:
        add = self.add
        for s, p, o, c in quads:
            add((s, p, o), c)

    def remove(self, triple: Any, context: StoreContext = None) -> None:
        inner = self.inner
        removed: list[tuple[Any, Any]] = []
        for t, contexts in inner.triples(triple, context):
            if context is not None:
                removed.append((t, context))
            else:
                removed.extend((t, c) for c in contexts)
        inner.remove(triple, context)
        self._report_deleted(removed)

    def _report_deleted(self, removed: list[tuple[Any, Any]]) -> None:
        deleted = self._recording.deleted
        try:
            for t, c in removed:
                deleted(t, c)
        except BaseException:
            for t, c in removed:
                self.inner.add(t, c)
            raise

    def remove_graph(self, graph: Any) -> None:
        removed = [t for t, _ in self.inner.triples((None, None, None), graph)]
        self.inner.remove_graph(graph)
        self._report_deleted([(t, graph) for t in removed])

    def add_graph(self, graph: Any) -> None:
        # An empty graph has no RDF Patch form; its triples are recorded as they arrive.
        self.inner.add_graph(graph)

    def bind(self, prefix: str, namespace: URIRef, override: bool = True) -> None:
        before = dict(self.inner.namespaces())
        self.inner.bind(prefix, namespace, override=override)
        after = dict(self.inner.namespaces())
        if before != after:
            self._report_namespaces(before, after)

    def _report_namespaces(self, before: dict[str, URIRef], after: dict[str, URIRef]) -> None:
        try:
            self._recording.namespaces_changed(before, after)
        except BaseException:
            restore_namespaces(self.inner, before, after)
            raise

    def unbind(self, prefix: str) -> None:
        """Remove the binding of ``prefix`` (rdflib has no API for it), recording ``PD``."""
        before = dict(self.inner.namespaces())
        if prefix not in before:
            return
        unbind_prefix(self.inner, prefix)
        self._report_namespaces(before, dict(self.inner.namespaces()))

    # -- reads and the rest: forwarded ---------------------------------------------------

    def triples(self, triple_pattern: Any, context: StoreContext = None) -> Iterator[Any]:
        return self.inner.triples(triple_pattern, context)

    def triples_choices(self, triple: Any, context: StoreContext = None) -> Any:
        return self.inner.triples_choices(triple, context)

    def __len__(self, context: StoreContext = None) -> int:
        return self.inner.__len__(context)

    def contexts(self, triple: Any = None) -> Any:
        return self.inner.contexts(triple)

    def namespace(self, prefix: str) -> URIRef | None:
        return self.inner.namespace(prefix)

    def prefix(self, namespace: URIRef) -> str | None:
        return self.inner.prefix(namespace)

    def namespaces(self) -> Iterator[tuple[str, URIRef]]:
        return self.inner.namespaces()

    def query(self, *args: Any, **kwargs: Any) -> Any:
        # rdflib's own SPARQL engine then evaluates over the graph, so every write of an
        # update comes back through add/remove here.
        raise NotImplementedError

    def update(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def open(self, configuration: Any, create: bool = False) -> Any:
        return self.inner.open(configuration, create)

    def close(self, commit_pending_transaction: bool = False) -> None:
        self.inner.close(commit_pending_transaction)

    def commit(self) -> None:
        self.inner.commit()

    def rollback(self) -> None:
        self.inner.rollback()

    def gc(self) -> None:
        self.inner.gc()


def restore_namespaces(store: Store, before: dict[str, URIRef], after: dict[str, URIRef]) -> None:
    """Undo a namespace change of ``store`` from ``before`` to ``after``."""
    maps = _namespace_maps(store)
    if maps is not None:
        # Set directly: rdflib's bind may rename or refuse, and the undo must be exact.
        namespaces, prefixes = maps
        for name, ns in after.items():
            if before.get(name) != ns:
                namespaces.pop(name, None)
        namespaces.update((name, ns) for name, ns in before.items() if after.get(name) != ns)
        _match_prefixes(namespaces, prefixes)
        return
    for name, ns in after.items():
        if before.get(name) != ns:
            unbind_prefix(store, name)
    for name, ns in before.items():
        if after.get(name) != ns:
            store.bind(name, ns, override=True)
