"""Recording every change made to an rdflib graph as RDF Patch.

Theory of operation. The interception point is the rdflib *store*: :class:`RecordingStore`
wraps the graph's store and every write rdflib makes, whatever API path led there
(``add``, ``addN``, ``remove`` with a pattern, ``set``, ``+=``, ``parse``, SPARQL
``update``, ``remove_graph``, ``bind``), reaches one of its methods. Each write is checked
against the inner store so that only real changes are recorded: an add of a present quad
or a delete of an absent one records nothing, and a pattern delete records the concrete
quads it removed. That makes every recorded log reversible (:func:`patchsync.capture.diff.reverse`).

Grouping. Changes made inside :meth:`Recorder.transaction` form one patch ``H id``,
``H prev``, user headers, ``TX`` … ``TC``; when the block raises, the patch ends in ``TA``
and the store is rolled back by applying the block's inverse changes to the inner store.
Changes outside a block accumulate into an implicit patch of the same shape, committed by
:meth:`Recorder.flush`, by :meth:`Recorder.close`, before the next transaction starts, or
automatically once it holds ``autocommit`` changes (the autocommit policy; ``None``, the
default, means only explicitly). A patch's bytes reach the log only when it is committed
(see :mod:`patchsync.capture._log`), so a reader of the log never sees a partial patch.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from rdflib import ConjunctiveGraph, Dataset, Graph, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.plugins.stores.memory import Memory, SimpleMemory
from rdflib.store import Store

from patchsync.capture._log import PatchLog, open_patch_log
from patchsync.errors import UsageError
from patchsync.options import PatchOptions, StatementType
from patchsync.units import Kind, TransactionError, UnitTracker

# Change kinds kept for rolling back an aborted transaction.
_ADD, _DELETE, _PREFIX = 0, 1, 2


def unbind_prefix(store: Store, prefix: str) -> None:
    """Remove a namespace binding from an rdflib store.

    rdflib has no API for this (``bind`` can only add or rebind), but ``PD`` must be
    replayable and a rolled-back ``bind`` must be undone, so the two in-memory stores are
    edited directly. Other stores raise :class:`UsageError`.
    """
    if isinstance(store, RecordingStore):
        store.unbind(prefix)
        return
    if isinstance(store, Memory):
        namespaces, prefixes = store._Memory__namespace, store._Memory__prefix  # type: ignore[attr-defined]
    elif isinstance(store, SimpleMemory):
        namespaces, prefixes = store._SimpleMemory__namespace, store._SimpleMemory__prefix  # type: ignore[attr-defined]
    else:
        raise UsageError(f"cannot remove a namespace binding from a {type(store).__name__} store")
    ns = namespaces.pop(prefix, None)
    if ns is not None and prefixes.get(ns) == prefix:
        del prefixes[ns]


class RecordingStore(Store):
    """An rdflib store that forwards to ``inner`` and reports real changes to a recorder.

    Built by :class:`Recorder`, which hands it its (private) recording state.
    """

    def __init__(self, inner: Store, recording: _Recording) -> None:
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

    def add(self, triple: Any, context: Any, quoted: bool = False) -> None:
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

    def remove(self, triple: Any, context: Any = None) -> None:
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
            _restore_namespaces(self.inner, before, after)
            raise

    def unbind(self, prefix: str) -> None:
        """Remove the binding of ``prefix`` (rdflib has no API for it), recording ``PD``."""
        before = dict(self.inner.namespaces())
        if prefix not in before:
            return
        unbind_prefix(self.inner, prefix)
        self._report_namespaces(before, dict(self.inner.namespaces()))

    # -- reads and the rest: forwarded ---------------------------------------------------

    def triples(self, triple_pattern: Any, context: Any = None) -> Iterator[Any]:
        return self.inner.triples(triple_pattern, context)

    def triples_choices(self, triple: Any, context: Any = None) -> Any:
        return self.inner.triples_choices(triple, context)

    def __len__(self, context: Any = None) -> int:
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


class _Recording:
    """The recorder's state and the store's callbacks: the patch being written.

    A private class, so its fields are plain attributes that :class:`Recorder` and
    :class:`RecordingStore` share. ``units`` follows the user's blocks through the
    transaction rules of :mod:`patchsync.units`: a ``transaction()`` block is a
    transaction, changes outside one an implicit unit that ``flush()`` (a patch end)
    completes, and ``close()`` is the stream's end. In the log an implicit unit is
    written as a patch of its own, ``TX`` … ``TC`` like a block's.
    """

    def __init__(self, log: PatchLog, headers: dict[str, Any], autocommit: int | None, graph: Graph) -> None:
        self.log = log
        self.headers = headers
        self.autocommit = autocommit
        self.quads = log.options.statement_type is StatementType.QUADS
        # Graph identifiers that stand for the default graph: a ConjunctiveGraph's default
        # context has a random identifier, a Dataset's is DATASET_DEFAULT_GRAPH_ID.
        self.default_ids = {DATASET_DEFAULT_GRAPH_ID}
        if isinstance(graph, ConjunctiveGraph) and not isinstance(graph, Dataset):
            self.default_ids.add(graph.default_context.identifier)
        self.map_default = not isinstance(graph, Dataset)
        self.inner: Store = graph.store
        self.units = UnitTracker()
        self.sink_add: Callable[..., None] = log.sink.add
        self.patch_headers: dict[str, Any] | None = None  # headers of the patch to start
        self.open = False  # a patch has been started in the encoder (TX written)
        self.patch_id: URIRef | None = None
        self.changes = 0  # changes in the open patch
        self.undo: list[tuple[Any, ...]] = []
        self.closed = False
        self.broken: BaseException | None = None
        self.changes_recorded = 0

    # -- blocks, flush and close, through the transaction rules ---------------------------

    def start_block(self, headers: dict[str, Any]) -> None:
        try:
            self.units.check(Kind.TX)
        except TransactionError as exc:
            raise UsageError(f"transactions do not nest ({exc.rule.why})") from None
        self.check_open()
        self.flush()
        self.units.send(Kind.TX)
        self.patch_headers = headers
        self.undo = []

    def end_block(self, *, commit: bool) -> None:
        """End the block with ``TC`` (``commit``) or, after a rollback, ``TA``."""
        self.units.send(Kind.TC if commit else Kind.TA)
        self.units.send(Kind.PATCH_END)  # a block is a patch of its own
        self.patch_headers = None
        if not commit:
            self.undo = []  # the caller rolled the block back already
        if self.open:
            if commit:
                self.log.sink.tx_commit()
            else:
                self.log.sink.tx_abort()
            self.end_patch()
        self.undo = []

    def flush(self) -> None:
        try:
            self.units.send(Kind.PATCH_END)
        except TransactionError:
            raise UsageError("flush() inside a transaction; the block commits when it ends") from None
        if self.open:
            self.log.sink.tx_commit()
            self.end_patch()

    def close(self) -> None:
        if self.closed:
            return
        if self.broken is not None:
            self.closed = True
            self.log.abandon()
            return
        try:
            self.units.check(Kind.STREAM_END)
        except TransactionError:
            raise UsageError("close() inside a transaction") from None
        self.flush()
        self.units.send(Kind.STREAM_END)
        self.closed = True
        self.log.close()

    # -- the store's callbacks ------------------------------------------------------------

    def graph_term(self, context: Any) -> Any:
        if not self.quads:
            return None
        g = context.identifier if isinstance(context, Graph) else context
        # A Dataset's default graph already is DATASET_DEFAULT_GRAPH_ID; only a
        # ConjunctiveGraph's random default identifier needs mapping.
        if self.map_default and (g is None or g in self.default_ids):
            return DATASET_DEFAULT_GRAPH_ID
        return g

    def begin(self) -> None:
        self.check_open()
        self.units.send(Kind.CHANGE)  # opens an implicit unit outside a block
        sink = self.log.sink
        self.patch_id = URIRef(uuid.uuid4().urn)
        sink.header("id", self.patch_id)
        if self.log.head is not None:
            sink.header("prev", URIRef(self.log.head))
        for key, value in {**self.headers, **(self.patch_headers or {})}.items():
            sink.header(key, _header_term(value))
        sink.tx_start()
        self.sink_add = sink.add  # the sink only changes between patches (rotation)
        self.open = True
        self.changes = 0

    def after_change(self) -> None:
        self.changes += 1
        self.changes_recorded += 1
        if not self.units.in_transaction and self.autocommit is not None and self.changes >= self.autocommit:
            self.flush()

    def added(self, triple: Any, context: Any) -> None:
        if not self.open:
            self.begin()
        s, p, o = triple
        try:
            self.sink_add(s, p, o, self.graph_term(context))
        except BaseException as exc:
            self.fail(exc)
            raise
        self.undo.append((_ADD, triple, context))
        # after_change, inlined: this runs once per recorded add.
        self.changes += 1
        self.changes_recorded += 1
        if self.autocommit is not None and not self.units.in_transaction and self.changes >= self.autocommit:
            self.flush()

    def deleted(self, triple: Any, context: Any) -> None:
        if not self.open:
            self.begin()
        s, p, o = triple
        try:
            self.log.sink.delete(s, p, o, self.graph_term(context))
        except BaseException as exc:
            self.fail(exc)
            raise
        self.undo.append((_DELETE, triple, context))
        self.after_change()

    def namespaces_changed(self, before: dict[str, URIRef], after: dict[str, URIRef]) -> None:
        if not self.open:
            self.begin()
        sink = self.log.sink
        try:
            # Deletions first: a replica applying PD then PA ends with exactly ``after``.
            for name, ns in before.items():
                if after.get(name) != ns:
                    sink.prefix_delete(name, ns)
            for name, ns in after.items():
                if before.get(name) != ns:
                    sink.prefix_add(name, ns)
        except BaseException as exc:
            self.fail(exc)
            raise
        self.undo.append((_PREFIX, before, after))
        self.after_change()

    # -- internals ------------------------------------------------------------------------

    def end_patch(self) -> None:
        self.log.sink.end_patch()
        self.open = False
        try:
            self.log.commit(str(self.patch_id))
        except BaseException as exc:
            # The patch is not in the log (a stream refused it, a disk failed), so the
            # store must not keep its changes either: roll them back and stop.
            self.fail(exc)
            raise
        self.undo = []

    def rollback(self, inner: Store) -> None:
        for change in reversed(self.undo):
            kind = change[0]
            if kind == _ADD:
                inner.remove(change[1], change[2])
            elif kind == _DELETE:
                inner.add(change[1], change[2])
            else:
                _restore_namespaces(inner, change[1], change[2])

    def fail(self, exc: BaseException) -> None:
        # The encoder may hold half a row (its repeated-term state included), so the
        # patch can never be finished: it is dropped unwritten and the recorder stops,
        # as a failed protocol state machine does.
        self.broken = exc
        self.open = False
        self.rollback(self.inner)
        self.undo = []

    def check_open(self) -> None:
        if self.broken is not None:
            raise UsageError(f"the recorder stopped after an error: {self.broken}")
        if self.closed:
            raise UsageError("the recorder is closed")


class Recorder:
    """Records every change made through :attr:`graph` into a patch log.

    ``graph`` is an rdflib ``Graph`` or ``Dataset``; the recorder builds :attr:`graph`, a
    graph of the same kind and identifier over a :class:`RecordingStore` wrapping the
    original's store. A ``ConjunctiveGraph`` (deprecated by rdflib) over a graph-aware
    store is still accepted and recorded through a ``Dataset`` view of it (its default
    context stays the default graph). Make changes through
    :attr:`graph` (changes made through the original object bypass the recorder).

    ``log`` is a :class:`LogWriter` or anything it accepts as target (a ``.jellyp`` or
    ``.rdfp`` path, a directory of segments, a binary stream), a stream address
    ``nats://HOST:PORT/STREAM`` (each patch is published as one message when it commits,
    appended only if it follows the stream's head; see
    :class:`patchsync.streams.StreamWriter`), or any other :class:`PatchLog`. When a commit
    fails (the stream refused the patch, the disk failed) the patch's changes are rolled
    back in the store too and the recorder stops. Datasets are recorded as
    QUADS and plain graphs as TRIPLES unless ``options`` say otherwise; ``fmt``
    (``jellyp``/``rdfp``) names the format of a stream or directory target. ``headers``
    are added to every patch. See the module docstring for transactions and ``autocommit``.
    """

    def __init__(
        self,
        graph: Graph,
        log: PatchLog | str | os.PathLike[str] | IO[bytes],
        *,
        options: PatchOptions | None = None,
        fmt: str | None = None,
        headers: Mapping[str, Any] | None = None,
        autocommit: int | None = None,
        fsync: bool = False,
        max_segment_bytes: int | None = None,
        max_segment_patches: int | None = None,
    ) -> None:
        if autocommit is not None and autocommit < 1:
            raise UsageError("autocommit must be at least 1 change (or None)")
        if isinstance(graph, ConjunctiveGraph) and not isinstance(graph, Dataset) and not graph.store.graph_aware:
            raise UsageError(
                f"a ConjunctiveGraph over a {type(graph.store).__name__} store (not graph-aware) cannot be "
                "recorded: rdflib deprecates ConjunctiveGraph; record a Dataset, or a Graph of its default context"
            )
        # Dataset is a ConjunctiveGraph subclass; a caller's ConjunctiveGraph is one too.
        quads = isinstance(graph, ConjunctiveGraph)
        if options is None:
            options = PatchOptions(statement_type=StatementType.QUADS if quads else StatementType.TRIPLES)
        self.log: PatchLog = open_patch_log(
            log,
            options,
            fmt=fmt,
            fsync=fsync,
            max_segment_bytes=max_segment_bytes,
            max_segment_patches=max_segment_patches,
        )
        self.headers = dict(headers or {})
        self.autocommit = autocommit
        self._rec = _Recording(self.log, self.headers, autocommit, graph)
        self.store = RecordingStore(graph.store, self._rec)
        self.graph: Graph = _rewrap(graph, self.store)

    # -- public API ---------------------------------------------------------------------

    @contextmanager
    def transaction(self, **headers: Any) -> Iterator[Graph]:
        """A block whose changes are one patch, or an aborted one if the block raises.

        On an exception the patch ends with ``TA``, the store is rolled back to its state
        before the block and the exception propagates. Keyword arguments are extra
        headers of this patch (values: rdflib terms, or strings taken as literals).
        """
        rec = self._rec
        rec.start_block(headers)
        try:
            yield self.graph
        except BaseException:
            try:
                rec.rollback(self.store.inner)
            finally:
                rec.end_block(commit=False)
            raise
        else:
            rec.end_block(commit=True)

    def flush(self) -> None:
        """Commit the changes made outside any transaction as one patch (if there are any)."""
        self._rec.flush()

    def unbind(self, prefix: str) -> None:
        """Remove a namespace binding (rdflib has no API for this), recorded as ``PD``."""
        self.store.unbind(prefix)

    @property
    def head(self) -> str | None:
        """The id of the last patch written to the log (the next patch's ``prev``)."""
        return self.log.head

    @property
    def changes_recorded(self) -> int:
        """Changes recorded so far (rolled-back ones included)."""
        return self._rec.changes_recorded

    def close(self) -> None:
        """Commit pending changes and close the log."""
        self._rec.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _restore_namespaces(store: Store, before: dict[str, URIRef], after: dict[str, URIRef]) -> None:
    """Undo a namespace change of ``store`` from ``before`` to ``after``."""
    for name, ns in after.items():
        if before.get(name) != ns:
            unbind_prefix(store, name)
    for name, ns in before.items():
        if after.get(name) != ns:
            store.bind(name, ns, override=True)


def _header_term(value: Any) -> Any:
    from rdflib import Literal
    from rdflib.term import Node

    return value if isinstance(value, Node) else Literal(str(value))


def _rewrap(graph: Graph, store: RecordingStore) -> Graph:
    """A graph like ``graph`` (kind, identifier, namespace policy) over ``store``.

    A caller's ``ConjunctiveGraph`` (deprecated in rdflib 7) is recorded through a
    ``Dataset`` over the same store whose default graph is the ConjunctiveGraph's default
    context and whose default graph is the union, as a ConjunctiveGraph's is: the same
    writes land in the same contexts, and no deprecated class is built here. A Dataset
    needs a graph-aware store (see :class:`Recorder`).
    """
    # rdflib has no public API to read a graph's namespace policy (the namespaces its
    # namespace manager binds on first use), hence the getattr; Graph's constructor takes
    # the policy, Dataset's does not, so a Dataset gets it as its attribute.
    policy: Any = getattr(graph, "_bind_namespaces", "rdflib")
    if not isinstance(graph, ConjunctiveGraph):
        return Graph(store=store, identifier=graph.identifier, bind_namespaces=policy)
    if isinstance(graph, Dataset):
        new = Dataset(store=store, default_union=graph.default_union)
    else:
        new = Dataset(store=store, default_union=True)
        new.default_graph = Graph(store=store, identifier=graph.default_context.identifier)
    new._bind_namespaces = policy
    return new


def record(
    graph: Graph,
    log: PatchLog | str | os.PathLike[str] | IO[bytes],
    **kwargs: Any,
) -> Recorder:
    """Start recording changes to ``graph`` into ``log`` (see :class:`Recorder`)."""
    return Recorder(graph, log, **kwargs)
