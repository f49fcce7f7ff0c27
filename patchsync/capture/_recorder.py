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
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from rdflib import ConjunctiveGraph, Dataset, Graph, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.store import Store

from patchsync.capture._log import PatchLog, open_patch_log
from patchsync.capture._store import RecordingStore, StoreContext, restore_namespaces
from patchsync.errors import UsageError
from patchsync.options import PatchOptions, StatementType
from patchsync.units import Kind, TransactionError, UnitTracker

# Change kinds kept for rolling back an aborted transaction.
_ADD, _DELETE, _PREFIX = 0, 1, 2


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
        # The open patch's changes, newest last, for rolling them back: three items a
        # change (kind, then two values), flat, because a tuple a change that lives until
        # the patch commits is a container the garbage collector keeps scanning; with
        # 10,000-change patches that scanning cost more than encoding the changes.
        self.undo: list[Any] = []
        # One context object per graph identifier of the open patch: rdflib builds a new
        # Graph for every add into a Dataset, and keeping each alive would cost the same.
        self.contexts: dict[Any, Any] = {}
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
        self.forget()

    def end_block(self, *, commit: bool) -> None:
        """End the block with ``TC`` (``commit``) or, after a rollback, ``TA``."""
        self.units.send(Kind.TC if commit else Kind.TA)
        self.units.send(Kind.PATCH_END)  # a block is a patch of its own
        self.patch_headers = None
        if not commit:
            self.forget()  # the caller rolled the block back already
        if self.open:
            if commit:
                self.log.sink.tx_commit()
            else:
                self.log.sink.tx_abort()
            self.end_patch()
        self.forget()

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

    def context_id(self, context: StoreContext) -> Any:
        """The identifier of a write's context, its object kept for the rollback."""
        cid = context.identifier if isinstance(context, Graph) else context
        if cid not in self.contexts:
            self.contexts[cid] = context
        return cid

    def graph_of(self, g: Any) -> Any:
        """The graph term of a context identifier in the log."""
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

    def added(self, triple: Any, context: StoreContext) -> None:
        if not self.open:
            self.begin()
        s, p, o = triple
        # context_id, inlined: this runs once per recorded add.
        cid = context.identifier if isinstance(context, Graph) else context
        contexts = self.contexts
        if cid not in contexts:
            contexts[cid] = context
        try:
            self.sink_add(s, p, o, self.graph_of(cid) if self.quads else None)
        except BaseException as exc:
            self.fail(exc)
            raise
        self.undo += (_ADD, triple, cid)
        # after_change, inlined: this runs once per recorded add.
        self.changes += 1
        self.changes_recorded += 1
        if self.autocommit is not None and not self.units.in_transaction and self.changes >= self.autocommit:
            self.flush()

    def deleted(self, triple: Any, context: StoreContext) -> None:
        if not self.open:
            self.begin()
        s, p, o = triple
        cid = self.context_id(context)
        try:
            self.log.sink.delete(s, p, o, self.graph_of(cid) if self.quads else None)
        except BaseException as exc:
            self.fail(exc)
            raise
        self.undo += (_DELETE, triple, cid)
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
        self.undo += (_PREFIX, before, after)
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
        self.forget()

    def forget(self) -> None:
        """Drop the rollback state of a patch that is over (committed or rolled back)."""
        self.undo = []
        self.contexts = {}

    def rollback(self, inner: Store) -> None:
        undo, contexts = self.undo, self.contexts
        for i in range(len(undo) - 3, -1, -3):
            kind, a, b = undo[i : i + 3]
            if kind == _ADD:
                inner.remove(a, contexts[b])
            elif kind == _DELETE:
                inner.add(a, contexts[b])
            else:
                restore_namespaces(inner, a, b)

    def fail(self, exc: BaseException) -> None:
        # The encoder may hold half a row (its repeated-term state included), so the
        # patch can never be finished: it is dropped unwritten and the recorder stops,
        # as a failed protocol state machine does.
        self.broken = exc
        self.open = False
        self.rollback(self.inner)
        self.forget()

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
    :class:`patchsync.nats.StreamWriter`), or any other :class:`PatchLog`. When a commit
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
