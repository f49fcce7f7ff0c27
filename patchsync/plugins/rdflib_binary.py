"""rdflib parsers and serializers for Apache Jena's RDF Thrift and RDF Protobuf.

Plugin names (registered through entry points; neither rdflib nor pyjelly registers a name
with the ``patchsync-`` prefix, so they cannot clash):

``patchsync-rdf-thrift`` (parser and serializer)
    RDF Thrift (``.rt``).
``patchsync-rdf-protobuf`` (parser and serializer)
    RDF Protobuf (``.rpb``).

Parsing works like the ``patchsync-jelly`` parser (:mod:`.rdflib_formats`): triple rows go
into the default graph; quad rows into the dataset's graphs (a quad without a graph, or
naming one of Jena's default graph IRIs, into the default graph); parsing quads in a named
graph into a plain ``Graph`` is refused. Each blank node label gets a fresh ``BNode`` per
parse, as rdflib's own parsers do; ``keep_bnode_labels=True`` keeps the file's labels
instead. Prefix rows become namespace bindings. rdflib 7 has no RDF-star terms, so a
quoted triple raises :class:`~patchsync.errors.UsageError`.

Serializing writes triple rows for a ``Graph``; for a ``Dataset`` the default graph's
statements as triple rows and the others as quad rows (how Jena writes a dataset).
Keyword arguments: ``namespaces`` (write the graph's bindings as prefix rows; off by
default, since rdflib binds a dozen prefixes to every graph), ``prefixed_names`` (spell
IRIs under a written prefix as prefixed names; Jena's writer does for Thrift, not for
Protobuf, and that is the default) and ``values`` (write numbers as value terms, Jena's
``*_VALUES`` variants).
"""

from __future__ import annotations

from typing import IO, Any, ClassVar

from rdflib.graph import DATASET_DEFAULT_GRAPH_ID, ConjunctiveGraph, Graph
from rdflib.parser import InputSource, Parser
from rdflib.serializer import Serializer
from rdflib.term import Node

from patchsync.codec import jena
from patchsync.events import Namespace, Statement
from patchsync.plugins.rdflib_formats import FreshBNodeTerms, _chunks, _Sink, _source_name
from patchsync.terms.rdflib_fast import FastRdflibTerms

__all__ = [
    "RDF_PROTOBUF_FORMAT",
    "RDF_THRIFT_FORMAT",
    "RdfProtobufParser",
    "RdfProtobufSerializer",
    "RdfThriftParser",
    "RdfThriftSerializer",
]

#: rdflib format name of the RDF Thrift parser and serializer.
RDF_THRIFT_FORMAT = "patchsync-rdf-thrift"
#: rdflib format name of the RDF Protobuf parser and serializer.
RDF_PROTOBUF_FORMAT = "patchsync-rdf-protobuf"

_FLUSH = 1 << 20


class _BinaryParser(Parser):
    #: The codec format name (:data:`patchsync.codec.jena.FORMATS`).
    codec: ClassVar[str]

    def parse(self, source: InputSource, sink: Graph, **kwargs: Any) -> None:
        adapter = FastRdflibTerms() if kwargs.get("keep_bnode_labels") else FreshBNodeTerms()
        decoder = jena.lookup(self.codec).decoder(adapter, source=_source_name(source), limits=kwargs.get("limits"))
        target = _Sink(sink)

        def take() -> None:
            for event in decoder:
                if type(event) is Statement:
                    target.add(event.s, event.p, event.o, event.g)
                elif type(event) is Namespace:
                    sink.bind(event.name, event.iri, override=True)

        try:
            for chunk in _chunks(source):
                decoder.feed(chunk)
                take()
            decoder.close()
            take()
        finally:
            # Statements decoded before an error are kept, like rdflib's own parsers.
            target.flush()


class RdfThriftParser(_BinaryParser):
    """rdflib parser for RDF Thrift (format ``patchsync-rdf-thrift``; see the module docstring)."""

    codec = "rdf-thrift"


class RdfProtobufParser(_BinaryParser):
    """rdflib parser for RDF Protobuf (format ``patchsync-rdf-protobuf``; see the module docstring)."""

    codec = "rdf-protobuf"


class _BinarySerializer(Serializer):
    codec: ClassVar[str]

    def serialize(
        self,
        stream: IO[bytes],
        base: str | None = None,
        encoding: str | None = None,
        **kwargs: Any,
    ) -> None:
        found = jena.lookup(self.codec)
        encoder = found.encoder(
            FastRdflibTerms(),
            prefixed_names=bool(kwargs.get("prefixed_names", found.jena_prefixed_names)),
            values=bool(kwargs.get("values", False)),
        )
        store = self.store
        if kwargs.get("namespaces"):
            for prefix, iri in store.namespaces():
                encoder.namespace(prefix, iri)
        statement = encoder.statement
        if isinstance(store, ConjunctiveGraph):
            for s, p, o, ctx in store.quads((None, None, None, None)):
                # Dataset.quads yields graph names; ConjunctiveGraph.quads yields graphs.
                g: Node | None = ctx if ctx is None else getattr(ctx, "identifier", ctx)
                statement(s, p, o, None if g is None or g == DATASET_DEFAULT_GRAPH_ID else g)
                if encoder.pending_bytes() >= _FLUSH:
                    stream.write(encoder.take())
        else:
            for s, p, o in store.triples((None, None, None)):
                statement(s, p, o, None)
                if encoder.pending_bytes() >= _FLUSH:
                    stream.write(encoder.take())
        encoder.finish()
        stream.write(encoder.take())


class RdfThriftSerializer(_BinarySerializer):
    """rdflib serializer for RDF Thrift (format ``patchsync-rdf-thrift``; see the module docstring)."""

    codec = "rdf-thrift"


class RdfProtobufSerializer(_BinarySerializer):
    """rdflib serializer for RDF Protobuf (format ``patchsync-rdf-protobuf``; see the module docstring)."""

    codec = "rdf-protobuf"
