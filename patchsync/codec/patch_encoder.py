"""The Jelly-Patch encoder: events or method calls in, delimited frame bytes out.

Sans-I/O like the decoder: every call appends to an internal buffer and
:meth:`PatchEncoder.take` hands over the bytes completed so far, each frame whole, so an
adapter can write every frame with a single ``write`` (docs/design.md §6).

Frames end at a patch end in FRAME and PUNCTUATED streams (so a tailing reader sees each
patch as soon as it is committed), when ``max_frame_rows`` or ``max_frame_bytes`` is
reached in PUNCTUATED and FLAT streams, and at :meth:`PatchEncoder.finish`. The encoder
refuses to write an invalid stream: transaction misuse, a named graph in a TRIPLES
stream, or a feature the options do not declare raise :class:`EncodeError`.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any, Generic, TypeVar

from patchsync._proto import patch_pb2
from patchsync.codec import backend, wire
from patchsync.codec.frame_buffer import FrameBuffer
from patchsync.codec.term_encoder import TermEncoder
from patchsync.errors import EncodeError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    Options,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms import DEFAULT_GRAPH, IRI, TermAdapter, default_adapter
from patchsync.units import Kind, TransactionError, UnitTracker

T = TypeVar("T")

DEFAULT_FRAME_ROWS = 1024
DEFAULT_FRAME_BYTES = 1 << 20


def options_proto(options: PatchOptions) -> Any:
    """The ``RdfPatchOptions`` protobuf message for ``options``."""
    return patch_pb2.RdfPatchOptions(
        statement_type=int(options.statement_type),  # type: ignore[arg-type]
        stream_type=int(options.stream_type),  # type: ignore[arg-type]
        generalized_statements=options.generalized_statements,
        rdf_star=options.rdf_star,
        max_name_table_size=options.max_name_table_size,
        max_prefix_table_size=options.max_prefix_table_size,
        max_datatype_table_size=options.max_datatype_table_size,
        version=options.version,
    )


@functools.lru_cache(maxsize=64)
def options_row(options: PatchOptions) -> bytes:
    """The options row of a stream with ``options`` (its serialized protobuf is a few
    microseconds, and one-patch messages start a stream each)."""
    return wire.ld(wire.ROW_OPTIONS, options_proto(options).SerializeToString())


class PatchEncoder(Generic[T]):
    """Writes a Jelly-Patch stream.

    ``append=True`` starts a stream that continues an existing log (docs/design.md §6): the
    options row is repeated and nothing is written relative to the earlier lookup or
    repeated-term state, so the concatenated file still decodes.

    Common statement rows are written by the compiled core when it is built
    (patchsync/codec/backend.py), byte for byte what the Python code below writes;
    :class:`PurePatchEncoder` always runs the Python code.
    """

    _native: Any = backend.native()

    def __init__(
        self,
        options: PatchOptions | None = None,
        adapter: TermAdapter[T] | None = None,
        *,
        max_frame_rows: int = DEFAULT_FRAME_ROWS,
        max_frame_bytes: int = DEFAULT_FRAME_BYTES,
        delimited: bool = True,
        append: bool = False,
    ) -> None:
        self.options = options or PatchOptions()
        if max_frame_rows < 1:
            raise EncodeError("max_frame_rows must be at least 1")
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.max_frame_rows = max_frame_rows
        self.max_frame_bytes = max_frame_bytes
        self.delimited = delimited
        self._quads = self.options.statement_type is StatementType.QUADS
        self._stream_type = self.options.stream_type
        self._frames = FrameBuffer(delimited=delimited)
        # The compiled core's TermEncoder keeps the same state in C fields its row writer reads.
        terms_type = TermEncoder if self._native is None else self._native.TermEncoder
        self._terms: TermEncoder[T] = terms_type(
            self.adapter,
            # The buffer's own method, not ours: no cycle, so a dropped encoder is freed at once.
            self._frames.add,
            entry_tags=(wire.ROW_NAME, wire.ROW_PREFIX, wire.ROW_DATATYPE),
            max_names=self.options.max_name_table_size,
            max_prefixes=self.options.max_prefix_table_size,
            max_datatypes=self.options.max_datatype_table_size,
            generalized=self.options.generalized_statements,
            rdf_star=self.options.rdf_star,
            fresh=not append,
        )
        self._default_graph = self.adapter.default_graph()
        self._units = UnitTracker()  # the transaction rules (patchsync.units)
        self._finished = False
        self.patches_written = 0
        self._fresh = not append
        self._emit_row(options_row(self.options))

    def restart(self, options: PatchOptions) -> None:
        """Start another stream from its start, exactly as a new encoder of this encoder's
        adapter, framing and frame bounds with ``options`` (and ``append=False``) would,
        whatever this one wrote or failed on before.

        Cheaper than a new encoder for many short streams (one per message): the term
        encoder is emptied, not built again, and keeps its caches.
        """
        if not self._fresh:
            raise EncodeError("restart() starts a stream from its start: not for an encoder made with append=True")
        self.options = options
        self._quads = options.statement_type is StatementType.QUADS
        self._stream_type = options.stream_type
        self._frames.reset()
        self._terms.restart(
            max_names=options.max_name_table_size,
            max_prefixes=options.max_prefix_table_size,
            max_datatypes=options.max_datatype_table_size,
            generalized=options.generalized_statements,
            rdf_star=options.rdf_star,
        )
        self._units = UnitTracker()
        self._finished = False
        self.patches_written = 0
        self._emit_row(options_row(options))

    # -- output -------------------------------------------------------------------------

    def take(self) -> bytes:
        """The bytes of all frames completed since the last call."""
        return self._frames.take()

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (between ``TX`` and its ``TC`` / ``TA``)."""
        return self._units.in_transaction

    # -- content ------------------------------------------------------------------------

    def header(self, key: str, value: T) -> None:
        """``H key value``."""
        self._begin()
        t = self._terms
        body = wire.ld_str(wire.HEADER_KEY, key) if key else b""
        body += t.guarded(lambda: t.term(value, wire.H_TAGS, "h"))
        self._content(wire.ld(wire.ROW_HEADER, body))
        self._units.send(Kind.HEADER)

    def tx_start(self) -> None:
        """``TX``."""
        self._begin()
        self._unit(Kind.TX)
        self._content(wire.ROW_TX_START)

    def tx_commit(self) -> None:
        """``TC``."""
        self._begin()
        self._unit(Kind.TC)
        self._content(wire.ROW_TX_COMMIT)

    def tx_abort(self) -> None:
        """``TA``."""
        self._begin()
        self._unit(Kind.TA)
        self._content(wire.ROW_TX_ABORT)

    def add(self, s: T, p: T, o: T, g: T | None = None) -> None:
        """``A s p o [g]``."""
        self._statement(wire.ROW_ADD, s, p, o, g)

    def delete(self, s: T, p: T, o: T, g: T | None = None) -> None:
        """``D s p o [g]``."""
        self._statement(wire.ROW_DELETE, s, p, o, g)

    def _statement(self, row_tag: bytes, s: T, p: T, o: T, g: T | None) -> None:
        native = self._native
        if native is not None and native.patch_statement(self, row_tag, s, p, o, g):
            return  # the compiled core wrote it (every other row: the code below)
        self._begin()
        t = self._terms
        graph = self._graph(g)
        if t.may_overflow:
            body = t.guarded(partial(t.statement, s, p, o, graph, self._quads))
        else:
            body = t.statement(s, p, o, graph, self._quads)
        self._content(wire.ld(row_tag, body))
        self._units.send(Kind.CHANGE)

    def prefix_add(self, name: str, iri: T, g: T | None = None) -> None:
        """``PA name iri [g]``."""
        self._namespace(wire.ROW_NS_ADD, name, iri, g)

    def prefix_delete(self, name: str, iri: T | None = None, g: T | None = None) -> None:
        """``PD name [iri] [g]``."""
        self._namespace(wire.ROW_NS_DELETE, name, iri, g)

    def end_patch(self) -> None:
        """End the current patch (a no-op in FLAT streams, which are one patch)."""
        if self._finished:
            raise EncodeError("end_patch() after finish()")
        if self._stream_type is StreamType.FLAT:
            return
        self._unit(Kind.PATCH_END)
        if self._stream_type is StreamType.PUNCTUATED:
            self._emit_row(wire.ROW_PUNCTUATION)
        self._flush_frame()
        self.patches_written += 1

    def finish(self) -> None:
        """End the stream: flush the last frame. Required for FLAT streams."""
        if self._finished:
            return
        try:
            self._units.check(Kind.STREAM_END)
        except TransactionError as exc:
            raise EncodeError(exc.text()) from None
        if self._stream_type is StreamType.FLAT:
            self.patches_written += 1
            self._flush_frame()
        elif self._units.patch_open:
            raise EncodeError("the stream ends inside a patch: call end_patch() first")
        elif self._frames.rows and self._frames.frames == 0 and self._stream_type is StreamType.PUNCTUATED:
            # An empty PUNCTUATED stream still carries its options.
            self._flush_frame()
        self._units.send(Kind.STREAM_END)
        self._finished = True

    def send(self, event: Event) -> None:
        """Encode one event (positions are ignored; options must match this encoder's)."""
        # type(event) in each test, not once in a variable: mypy then knows the event's type.
        if type(event) is Add:
            self.add(event.s, event.p, event.o, event.g)
        elif type(event) is Delete:
            self.delete(event.s, event.p, event.o, event.g)
        elif type(event) is Header:
            self.header(event.key, event.value)
        elif type(event) is TxStart:
            self.tx_start()
        elif type(event) is TxCommit:
            self.tx_commit()
        elif type(event) is TxAbort:
            self.tx_abort()
        elif type(event) is PrefixAdd:
            self.prefix_add(event.name, event.iri, event.g)
        elif type(event) is PrefixDelete:
            self.prefix_delete(event.name, event.iri, event.g)
        elif type(event) is PatchEnd:
            self.end_patch()
        elif type(event) is Options:
            pass  # the encoder writes its own options row
        else:
            raise EncodeError(f"not a patch event: {event!r}")

    # -- internals ----------------------------------------------------------------------

    def _begin(self) -> None:
        if self._finished:
            raise EncodeError("write after finish()")
        self._terms.begin_row()

    def _graph(self, g: T | None) -> T | None:
        if not self._quads:
            if g is not None and self._terms.unpack(g)[0] != DEFAULT_GRAPH:
                raise EncodeError("a TRIPLES stream cannot carry a statement in a named graph")
            return None
        if g is None:
            return self._default_graph
        return g

    def _namespace(self, row_tag: bytes, name: str, iri: T | None, g: T | None) -> None:
        self._begin()
        t = self._terms
        head = wire.ld_str(wire.NS_NAME, name) if name else b""
        value: str | None = None
        if iri is not None:
            u = t.unpack(iri)
            if u[0] != IRI:
                raise EncodeError(f"namespace {name!r} must be an IRI, not {iri!r}")
            value = u[1]
        elif row_tag == wire.ROW_NS_ADD:
            raise EncodeError(f"PA {name!r} needs a namespace IRI")
        graph = self._graph(g)

        def build() -> bytes:
            # The value IRI is written (and its lookups updated) before the graph.
            body = b"" if value is None else wire.ld(wire.NS_VALUE, t.iri(value))
            if graph is not None:
                body += t.graph_field(graph, wire.NS_G_TAGS)
            return body

        self._content(wire.ld(row_tag, head + t.guarded(build)))
        self._units.send(Kind.CHANGE)

    def _unit(self, kind: Kind) -> None:
        """Take a transaction row or a patch end through the transaction rules."""
        try:
            self._units.send(kind)
        except TransactionError as exc:
            raise EncodeError(exc.text()) from None

    def _content(self, row: bytes) -> None:
        self._emit_row(row)
        if self._stream_type is not StreamType.FRAME and (
            len(self._frames.rows) >= self.max_frame_rows or self._frames.size >= self.max_frame_bytes
        ):
            # Lookup entries stay valid across frames, so any row boundary will do.
            self._flush_frame()

    def _emit_row(self, row: bytes) -> None:
        self._frames.add(row)

    def _flush_frame(self) -> None:
        # A FRAME stream writes every patch as a frame, an empty patch included.
        self._frames.flush(force=self._stream_type is StreamType.FRAME)

    @property
    def rows_written(self) -> int:
        """Rows written so far, options and lookup entries included."""
        return self._frames.rows_written


class PurePatchEncoder(PatchEncoder[T]):
    """:class:`PatchEncoder` on the pure-Python code only (what ``PATCHSYNC_PURE=1`` selects)."""

    _native = None
