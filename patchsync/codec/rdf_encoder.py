"""The Jelly-RDF encoder: statements in, delimited (or one bare) frame bytes out.

Sans-I/O like :class:`~patchsync.codec.patch_encoder.PatchEncoder`: calls append rows to
the current frame and :meth:`RdfEncoder.take` hands over the bytes of completed frames.
Lookups, IRI splitting, the 0-id rules and repeated terms are the shared
:class:`~patchsync.codec.term_encoder.TermEncoder`.

Frames: :meth:`RdfEncoder.end_frame` ends one explicitly (one RDF Message in grouped
streams). In flat streams (logical type FLAT_* or UNSPECIFIED) the encoder also cuts a
frame every ``max_frame_rows`` rows or ``max_frame_bytes`` bytes, which keeps frames below
the 1 MB the spec recommends; grouped streams are never cut behind the caller's back.

In GRAPHS streams :meth:`RdfEncoder.statement` opens and closes graphs as the graph of
consecutive statements changes, and :meth:`RdfEncoder.end_frame` closes the open graph,
so every frame is self-contained. The encoder refuses to write an invalid stream: a
feature the options do not declare, a named graph in a TRIPLES stream, or a typed literal
without a datatype lookup raise :class:`~patchsync.errors.EncodeError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any, Generic, TypeVar

from patchsync._proto import rdf_pb2
from patchsync.codec import backend, wire
from patchsync.codec.frame_buffer import FrameBuffer
from patchsync.codec.term_encoder import TermEncoder
from patchsync.errors import EncodeError
from patchsync.events import (
    FrameEnd,
    GraphEnd,
    GraphStart,
    Namespace,
    PhysicalType,
    RdfEvent,
    RdfOptions,
    Statement,
    StreamOptions,
    is_grouped,
)
from patchsync.terms import DEFAULT_GRAPH, IRI, TermAdapter, default_adapter

__all__ = ["PureRdfEncoder", "RdfEncoder", "encode_statements", "options_proto"]

T = TypeVar("T")

DEFAULT_FRAME_ROWS = 1024
DEFAULT_FRAME_BYTES = 1 << 20

# RdfStreamRow fields (proto/rdf.proto).
ROW_OPTIONS = wire.tag(1, 2)
ROW_TRIPLE = wire.tag(2, 2)
ROW_QUAD = wire.tag(3, 2)
ROW_GRAPH_START = wire.tag(4, 2)
ROW_GRAPH_END = wire.ld(wire.tag(5, 2), b"")
ROW_NAMESPACE = wire.tag(6, 2)
ROW_NAME = wire.tag(9, 2)
ROW_PREFIX = wire.tag(10, 2)
ROW_DATATYPE = wire.tag(11, 2)
# RdfGraphStart's oneof in TermEncoder order: iri, bnode, literal, default graph.
GRAPH_START_TAGS = (wire.tag(1, 2), wire.tag(2, 2), wire.tag(4, 2), wire.tag(3, 2))
# RdfNamespaceDeclaration fields.
NS_NAME = wire.tag(1, 2)
NS_VALUE = wire.tag(2, 2)


def options_proto(options: RdfOptions) -> Any:
    """The ``RdfStreamOptions`` protobuf message for ``options``."""
    return rdf_pb2.RdfStreamOptions(
        stream_name=options.stream_name,
        physical_type=int(options.physical_type),  # type: ignore[arg-type]
        generalized_statements=options.generalized_statements,
        rdf_star=options.rdf_star,
        max_name_table_size=options.max_name_table_size,
        max_prefix_table_size=options.max_prefix_table_size,
        max_datatype_table_size=options.max_datatype_table_size,
        logical_type=int(options.logical_type),  # type: ignore[arg-type]
        version=options.version,
    )


class RdfEncoder(Generic[T]):
    """Writes a Jelly-RDF stream (see the module docstring).

    ``delimited=False`` writes the non-delimited variant: exactly one bare frame, so
    :meth:`end_frame` may be called at most once with content after it.

    Common statement rows are written by the compiled core when it is built
    (patchsync/codec/backend.py), byte for byte what the Python code writes;
    :class:`PureRdfEncoder` always runs the Python code.
    """

    _native: Any = backend.native()

    def __init__(
        self,
        options: RdfOptions | None = None,
        adapter: TermAdapter[T] | None = None,
        *,
        max_frame_rows: int = DEFAULT_FRAME_ROWS,
        max_frame_bytes: int = DEFAULT_FRAME_BYTES,
        delimited: bool = True,
    ) -> None:
        self.options = options or RdfOptions()
        if max_frame_rows < 1:
            raise EncodeError("max_frame_rows must be at least 1")
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.max_frame_rows = max_frame_rows
        self.max_frame_bytes = max_frame_bytes
        self.delimited = delimited
        self._physical = self.options.physical_type
        self._auto_frames = not is_grouped(self.options.logical_type)
        self._frames = FrameBuffer(delimited=delimited)
        # The compiled core's TermEncoder keeps the same state in C fields its row writer reads.
        terms_type = TermEncoder if self._native is None else self._native.TermEncoder
        self._terms: TermEncoder[T] = terms_type(
            self.adapter,
            # The buffer's own method, not ours: no cycle, so a dropped encoder is freed at once.
            self._frames.add,
            entry_tags=(ROW_NAME, ROW_PREFIX, ROW_DATATYPE),
            max_names=self.options.max_name_table_size,
            max_prefixes=self.options.max_prefix_table_size,
            max_datatypes=self.options.max_datatype_table_size,
            generalized=self.options.generalized_statements,
            rdf_star=self.options.rdf_star,
        )
        self._graph: Any = None
        self._in_graph = False
        self._finished = False
        self.content_rows = 0
        self._emit_row(wire.ld(ROW_OPTIONS, options_proto(self.options).SerializeToString()))

    # -- output -------------------------------------------------------------------------

    def take(self) -> bytes:
        """The bytes of all frames completed since the last call."""
        return self._frames.take()

    def pending_bytes(self) -> int:
        """How many bytes of completed frames :meth:`take` would hand over now."""
        return len(self._frames.out)

    # -- content ------------------------------------------------------------------------

    def statement(self, s: T, p: T, o: T, g: T | None = None) -> None:
        """A triple (``g`` ``None`` or the default graph in TRIPLES streams) or a quad."""
        native = self._native
        if native is not None and native.rdf_encoder_statement(self, s, p, o, g):
            return  # the compiled core wrote it (every other row: the code below)
        if self._finished:
            raise EncodeError("write after finish()")
        t = self._terms
        t.begin_row()
        physical = self._physical
        if physical == PhysicalType.QUADS:
            if g is None:
                g = self.adapter.default_graph()
            body = (
                t.guarded(partial(t.statement, s, p, o, g, True)) if t.may_overflow else t.statement(s, p, o, g, True)
            )
            self._content(wire.ld(ROW_QUAD, body))
            return
        if physical == PhysicalType.TRIPLES:
            if g is not None and t.unpack(g)[0] != DEFAULT_GRAPH:
                raise EncodeError("a TRIPLES stream cannot carry a statement in a named graph")
        else:
            if g is None:
                g = self.adapter.default_graph()
            if not self._in_graph or g != self._graph:
                self._open_graph(g)
                t.begin_row()
        native = self._native
        if native is not None and native.rdf_statement(t, self._frames, ROW_TRIPLE, s, p, o, None, False):
            self._after_content()
            return
        if t.may_overflow:
            body = t.guarded(partial(t.statement, s, p, o, None, False))
        else:
            body = t.statement(s, p, o, None, False)
        self._content(wire.ld(ROW_TRIPLE, body))

    def triple(self, s: T, p: T, o: T) -> None:
        """A triple (in GRAPHS streams: in the open graph, or the default graph)."""
        if self._physical == PhysicalType.GRAPHS and self._in_graph:
            self.statement(s, p, o, self._graph)
        else:
            self.statement(s, p, o, None)

    def quad(self, s: T, p: T, o: T, g: T) -> None:
        """A quad (``g`` is the adapter's default-graph term for the default graph)."""
        self.statement(s, p, o, g)

    def graph_start(self, g: T) -> None:
        """Open graph ``g`` (GRAPHS streams), closing the open graph first."""
        if self._physical != PhysicalType.GRAPHS:
            raise EncodeError("graph_start is only allowed in GRAPHS streams")
        self._open_graph(g)

    def graph_end(self) -> None:
        """Close the open graph (GRAPHS streams)."""
        if not self._in_graph:
            raise EncodeError("graph_end without an open graph")
        self._in_graph = False
        self._graph = None
        self._content(ROW_GRAPH_END)

    def namespace(self, name: str, iri: T) -> None:
        """Declare prefix ``name`` for ``iri`` (Jelly-RDF 1.1: needs version 2)."""
        if self._finished:
            raise EncodeError("write after finish()")
        if self.options.version < 2:
            raise EncodeError("namespace declarations need a version 2 (Jelly 1.1) stream")
        t = self._terms
        t.begin_row()
        u = t.unpack(iri)
        if u[0] != IRI:
            raise EncodeError(f"namespace {name!r} must be an IRI, not {iri!r}")
        head = wire.ld_str(NS_NAME, name) if name else b""
        value: str = u[1]
        body = t.guarded(lambda: wire.ld(NS_VALUE, t.iri(value)))
        self._content(wire.ld(ROW_NAMESPACE, head + body))

    def end_frame(self) -> None:
        """End the current frame (one RDF Message); an empty frame is written too."""
        if self._finished:
            raise EncodeError("end_frame() after finish()")
        if self._in_graph:
            self.graph_end()
        self._flush_frame(force=True)

    def finish(self) -> None:
        """End the stream: close the open graph and flush the last frame."""
        if self._finished:
            return
        if self._in_graph:
            self.graph_end()
        if self._frames.rows:
            self._flush_frame(force=True)
        self._finished = True

    def send(self, event: RdfEvent) -> None:
        """Encode one decoder event (positions are ignored; options are this encoder's)."""
        # type(event) in each test, not once in a variable: mypy then knows the event's type.
        if type(event) is Statement:
            self.statement(event.s, event.p, event.o, event.g)
        elif type(event) is GraphStart:
            self.graph_start(event.g)
        elif type(event) is GraphEnd:
            self.graph_end()
        elif type(event) is Namespace:
            self.namespace(event.name, event.iri)
        elif type(event) is FrameEnd:
            self.end_frame()
        elif type(event) is StreamOptions:
            pass  # the encoder writes its own options row
        else:
            raise EncodeError(f"not a Jelly-RDF event: {event!r}")

    # -- internals ----------------------------------------------------------------------

    def _open_graph(self, g: T) -> None:
        if self._finished:
            raise EncodeError("write after finish()")
        if self._in_graph:
            self.graph_end()
        t = self._terms
        t.begin_row()
        body = t.term(g, GRAPH_START_TAGS, "g")
        self._graph = g
        self._in_graph = True
        self._content(wire.ld(ROW_GRAPH_START, body))

    def _content(self, row: bytes) -> None:
        self._emit_row(row)
        self._after_content()

    def _after_content(self) -> None:
        self.content_rows += 1
        if self._auto_frames and (
            len(self._frames.rows) >= self.max_frame_rows or self._frames.size >= self.max_frame_bytes
        ):
            # Lookup entries and repeated terms stay valid across frames: any row will do.
            self._flush_frame(force=False)

    def _emit_row(self, row: bytes) -> None:
        self._frames.add(row)

    def _flush_frame(self, *, force: bool) -> None:
        self._frames.flush(force=force)

    @property
    def rows_written(self) -> int:
        """Rows written so far, options and lookup entries included."""
        return self._frames.rows_written


class PureRdfEncoder(RdfEncoder[T]):
    """:class:`RdfEncoder` on the pure-Python code only (what ``PATCHSYNC_PURE=1`` selects)."""

    _native = None


def encode_statements(
    statements: Iterable[tuple[T, T, T, T | None]],
    options: RdfOptions | None = None,
    adapter: TermAdapter[T] | None = None,
    **kwargs: Any,
) -> bytes:
    """A whole Jelly-RDF stream holding ``statements`` ``(s, p, o, g)`` (``g`` ``None`` for
    the default graph); ``kwargs`` go to :class:`RdfEncoder`."""
    encoder: RdfEncoder[T] = RdfEncoder(options, adapter, **kwargs)
    out = bytearray()
    for s, p, o, g in statements:
        encoder.statement(s, p, o, g)
        if encoder.pending_bytes() >= 1 << 20:
            out += encoder.take()
    encoder.finish()
    out += encoder.take()
    return bytes(out)
