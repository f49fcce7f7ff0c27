"""rdflib parser and serializer plugins, registered through entry points.

Plugin names (chosen not to clash with pyjelly, which registers ``jelly`` and
``application/x-jelly-rdf``; both packages can be installed side by side):

``patchsync-jelly`` (parser and serializer)
    Jelly-RDF (``.jelly``). ``Dataset().parse("x.jelly", format="patchsync-jelly")``
    reads a TRIPLES stream into the default graph and QUADS/GRAPHS streams into the
    dataset's graphs; parsing into a plain ``Graph`` accepts only default-graph
    statements (docs/design.md §5). ``graph.serialize(destination=..., format="patchsync-jelly")``
    writes a TRIPLES stream for a ``Graph`` and a QUADS stream for a ``Dataset``.
``patchsync-jellyp`` (parser)
    Applies a Jelly-Patch log (``.jellyp``) to a dataset, the Jelly-Patch counterpart of
    rdflib's ``format="patch"``: every unit of docs/design.md §2 (a committed transaction, or the
    rows outside transactions up to the next ``TX`` or patch end) is applied whole, an
    aborted transaction is dropped, and an incomplete unit at the end is never applied.
    On a ``DecodeError`` the complete units before it stay applied and the error is raised.

Blank nodes: a Jelly-RDF document gets fresh rdflib blank nodes per parse, one per label,
like rdflib's own parsers. Patch logs keep labels as node identifiers (docs/design.md §1), so
``_:b1`` is the same node in every patch and in the dataset. rdflib 7 has no RDF-star
terms, so a quoted triple in either format raises :class:`~patchsync.errors.UsageError`
instead of being dropped (docs/design.md §5). rdflib cannot remove a namespace binding, so a ``PD``
row changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any
from uuid import uuid4

from rdflib.graph import DATASET_DEFAULT_GRAPH_ID, ConjunctiveGraph, Dataset, Graph
from rdflib.parser import InputSource, Parser
from rdflib.serializer import Serializer
from rdflib.term import BNode, Node, URIRef

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.errors import UsageError
from patchsync.events import (
    Add,
    Event,
    LogicalType,
    Namespace,
    PhysicalType,
    PrefixAdd,
    PrefixDelete,
    RdfOptions,
    Statement,
)
from patchsync.options import Limits
from patchsync.terms import TripleTerm
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.terms.rdflib_fast import FastRdflibTerms
from patchsync.units import Unit, read_units

__all__ = [
    "JELLY_FORMAT",
    "JELLYP_FORMAT",
    "FreshBNodeTerms",
    "JellyParser",
    "JellyPatchParser",
    "JellySerializer",
]

#: rdflib format name of the Jelly-RDF parser and serializer.
JELLY_FORMAT = "patchsync-jelly"
#: rdflib format name of the Jelly-Patch log parser.
JELLYP_FORMAT = "patchsync-jellyp"

_CHUNK = 1 << 16
_BATCH = 4096


class FreshBNodeTerms(FastRdflibTerms):
    """rdflib terms where each blank node label gets a fresh ``BNode`` (per instance)."""

    def __init__(self) -> None:
        super().__init__()
        self._labels: dict[str, BNode] = {}
        # One random id per parse and a counter: as unique as rdflib's ``BNode()``, which
        # reads the OS's random source for every node, several times slower.
        self._prefix = f"N{uuid4().hex}b"
        self._count = 0

    def bnode(self, label: str) -> BNode:
        node = self._labels.get(label)
        if node is None:
            self._count += 1
            node = self._labels[label] = BNode(f"{self._prefix}{self._count}")
        return node


def _source_name(source: InputSource) -> str:
    return str(source.getSystemId() or source.getPublicId() or "<rdflib input>")


def _chunks(source: InputSource) -> Iterable[bytes]:
    stream = source.getByteStream()
    if stream is None:
        raise UsageError("patchsync's binary parsers need a byte stream (not text)")
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return
        if isinstance(chunk, str):
            raise UsageError("patchsync's binary parsers need a byte stream (not text)")
        yield chunk


class _Sink:
    """Where statements go: the sink's store as a dataset, or the sink graph alone."""

    def __init__(self, sink: Graph) -> None:
        self.sink = sink
        self.dataset: Dataset | None = None
        self.default: Graph = sink
        if isinstance(sink, Dataset):
            self.dataset = sink
            # Dataset.default_context is deprecated; the default graph by its name works
            # on every rdflib 7 (default_graph came in 7.2).
            self.default = sink.get_context(DATASET_DEFAULT_GRAPH_ID)
        elif isinstance(sink, ConjunctiveGraph):
            self.default = sink.default_context
        elif sink.store.context_aware and sink.identifier == DATASET_DEFAULT_GRAPH_ID:
            # Dataset.parse hands plugins its default graph (a Graph on the dataset's
            # store): named graphs go to that store. Any other Graph is a single-graph
            # target, which refuses named graphs (docs/design.md §5).
            self.dataset = Dataset(store=sink.store, default_union=True)
        self._contexts: dict[Any, Graph] = {}
        self._pending: list[tuple[Any, Any, Any, Graph]] = []

    def context(self, g: Any) -> Graph:
        if g is None or g == DATASET_DEFAULT_GRAPH_ID:
            return self.default
        found = self._contexts.get(g)
        if found is None:
            if self.dataset is not None:
                found = self.dataset.graph(g)
            elif isinstance(self.sink, ConjunctiveGraph):
                found = self.sink.get_context(g)
            else:
                raise UsageError(f"a statement in graph {g} cannot go into a single graph: parse into a Dataset")
            self._contexts[g] = found
        return found

    def add(self, s: Any, p: Any, o: Any, g: Any) -> None:
        if type(s) is TripleTerm or type(o) is TripleTerm or type(p) is TripleTerm:
            raise UsageError("rdflib cannot hold RDF-star quoted triples; use the SQL target or patchsync's decoder")
        self._pending.append((s, p, o, self.context(g)))
        if len(self._pending) >= _BATCH:
            self.flush()

    def take(self, events: Iterable[Any]) -> None:
        """Add the statements of ``events`` and bind their namespaces, one batch per call.

        The parser's hot loop: a call gets one chunk's events, so the batch stays bounded
        by the chunk, and the per-statement work is a tuple and a list append.
        """
        pending = self._pending
        append = pending.append
        default = self.default
        for event in events:
            if type(event) is Statement:
                s, p, o, g = event[0], event[1], event[2], event[3]
                if type(s) is TripleTerm or type(o) is TripleTerm or type(p) is TripleTerm:
                    raise UsageError(
                        "rdflib cannot hold RDF-star quoted triples; use the SQL target or patchsync's decoder"
                    )
                append((s, p, o, default if g is None else self.context(g)))
            elif type(event) is Namespace:
                self.sink.bind(event.name, event.iri, override=True)
        self.flush()

    def flush(self) -> None:
        if self._pending:
            self.sink.store.addN(self._pending)
            self._pending.clear()


class JellyParser(Parser):
    """rdflib parser for Jelly-RDF (format ``patchsync-jelly``; see the module docstring).

    Keyword arguments: ``limits`` (:class:`~patchsync.options.Limits`), ``keep_bnode_labels``
    (use the stream's labels as ``BNode`` ids instead of fresh nodes).
    """

    def parse(self, source: InputSource, sink: Graph, **kwargs: Any) -> None:
        limits: Limits | None = kwargs.get("limits")
        adapter = FastRdflibTerms() if kwargs.get("keep_bnode_labels") else FreshBNodeTerms()
        decoder: RdfDecoder[Node] = RdfDecoder(adapter, source=_source_name(source), limits=limits)  # type: ignore[arg-type]
        target = _Sink(sink)
        try:
            for chunk in _chunks(source):
                decoder.feed(chunk)
                target.take(decoder)
            decoder.close()
            target.take(decoder)
        finally:
            # Statements decoded before an error are kept, like rdflib's own parsers.
            target.flush()


def _unit_op(sink: _Sink, event: Any) -> Callable[[], object]:
    """One buffered operation of a patch unit, validated before anything is applied."""
    if type(event) is PrefixAdd:
        return lambda: sink.sink.bind(event.name, event.iri, override=True, replace=True)
    s, p, o, g = event.s, event.p, event.o, event.g
    if type(s) is TripleTerm or type(p) is TripleTerm or type(o) is TripleTerm:
        raise UsageError("rdflib cannot hold RDF-star quoted triples; use the SQL target")
    graph = sink.context(g)
    if type(event) is Add:
        return lambda: graph.add((s, p, o))
    return lambda: graph.remove((s, p, o))


class JellyPatchParser(Parser):
    """rdflib parser that applies a Jelly-Patch log (format ``patchsync-jellyp``)."""

    def parse(self, source: InputSource, sink: Graph, **kwargs: Any) -> None:
        decoder: PatchDecoder[Node] = PatchDecoder(
            RdflibTerms(),  # type: ignore[arg-type]
            source=_source_name(source),
            limits=kwargs.get("limits"),
        )
        target = _Sink(sink)

        def events() -> Iterator[Event]:
            for chunk in _chunks(source):
                decoder.feed(chunk)
                yield from decoder
            decoder.close()
            yield from decoder

        # The units the applier sees (patchsync.units): a decode error comes after the
        # complete units before it, and the unit it interrupted is never applied.
        for item in read_units(events(), decoder.adapter, source=decoder.source):
            if type(item) is Unit and item.committed:
                ops = [_unit_op(target, event) for event in item.rows if type(event) is not PrefixDelete]
                for op in ops:
                    op()


class JellySerializer(Serializer):
    """rdflib serializer for Jelly-RDF (format ``patchsync-jelly``).

    Keyword arguments: ``options`` (:class:`~patchsync.events.RdfOptions`, overriding
    the choice of TRIPLES for a graph and QUADS for a dataset), ``frame_rows`` and
    ``namespaces`` (write the graph's namespace bindings; needs version 2, the default
    then).
    """

    def serialize(
        self,
        stream: IO[bytes],
        base: str | None = None,
        encoding: str | None = None,
        **kwargs: Any,
    ) -> None:
        store = self.store
        quads = isinstance(store, ConjunctiveGraph)
        namespaces = bool(kwargs.get("namespaces", False))
        options: RdfOptions | None = kwargs.get("options")
        if options is None:
            options = RdfOptions(
                physical_type=PhysicalType.QUADS if quads else PhysicalType.TRIPLES,
                logical_type=LogicalType.FLAT_QUADS if quads else LogicalType.FLAT_TRIPLES,
                version=2 if namespaces else 1,
            )
        encoder: RdfEncoder[Node] = RdfEncoder(
            options,
            RdflibTerms(),  # type: ignore[arg-type]
            max_frame_rows=int(kwargs.get("frame_rows", 1024)),
        )
        if namespaces:
            for prefix, iri in store.namespaces():
                encoder.namespace(prefix, iri)
        write = stream.write
        statement = encoder.statement
        if quads:
            default = DATASET_DEFAULT_GRAPH_ID
            assert isinstance(store, ConjunctiveGraph)  # narrowed above; for mypy
            for s, p, o, ctx in store.quads((None, None, None, None)):
                # Dataset.quads yields graph names; ConjunctiveGraph.quads yields graphs.
                g = default if ctx is None else getattr(ctx, "identifier", ctx)
                statement(s, p, o, g if isinstance(g, URIRef | BNode) else default)
                if encoder.pending_bytes():
                    write(encoder.take())
        else:
            for s, p, o in store.triples((None, None, None)):
                statement(s, p, o, None)
                if encoder.pending_bytes():
                    write(encoder.take())
        encoder.finish()
        write(encoder.take())
