"""The Jelly-RDF decoder: a sans-I/O state machine from bytes to RDF events.

Same shape as :class:`~patchsync.codec.patch_decoder.PatchDecoder`: :meth:`RdfDecoder.feed`
bytes, :meth:`RdfDecoder.close` when the input is complete, then take events with
:meth:`RdfDecoder.next_event` (``NEED_DATA`` / ``END``) or by iterating. Framing (delimited
or one bare frame), lookups, IRI/literal/blank node/quoted triple decoding and repeated
terms are the shared :mod:`.framing` and :mod:`.term_decoder` code.

Rules checked here (<https://w3id.org/jelly/dev/specification/serialization/>), besides the term and lookup rules:

* the options row comes first ("MUST be the first row"), has a physical type ("MUST NOT
  be UNSPECIFIED"), a version tag in 1..2 ("SHOULD throw if greater", "if zero"), a
  logical type whose base type is 1-4, a name table of at least 8 entries, and lookup
  sizes within this reader's limits; a repeated options row is identical;
* every row has a field set; triple rows only in TRIPLES/GRAPHS, quad rows only in QUADS,
  graph start/end only in GRAPHS ("MUST NOT appear in streams of type other than ...");
* in GRAPHS streams: no triple outside a graph, no graph start inside a graph, no graph
  end outside a graph, and a graph start names its graph (no repeated term).

Lenient where the spec allows it: a logical type that does not match the physical type
is accepted ("MAY throw"), a graph still open at the end of the stream is not an error,
and namespace declarations are read in version 1 streams too.

Every frame ends with a :class:`~patchsync.events.FrameEnd` event; grouped readers
treat each frame as one RDF Message. Events of a frame that precede a bad row are handed
out before the error is raised; after an error the decoder stays failed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from patchsync._proto import rdf_pb2
from patchsync.codec import backend
from patchsync.codec.driver import END, NEED_DATA, ROW_BATCH, FramedDecoder
from patchsync.codec.framing import Framer
from patchsync.codec.term_decoder import RuleViolation, TermDecoder
from patchsync.errors import DecodeError
from patchsync.events import (
    RDF_VERSION,
    FrameEnd,
    GraphEnd,
    GraphStart,
    Namespace,
    PhysicalType,
    RdfEvent,
    RdfOptions,
    Statement,
    StreamOptions,
    base_logical_type,
)
from patchsync.options import Limits, name_table_too_small
from patchsync.terms import TermAdapter, default_adapter

__all__ = ["END", "NEED_DATA", "PureRdfDecoder", "RdfDecoder", "messages", "options_from_proto"]

T = TypeVar("T")

_new_tuple = tuple.__new__

# Which row kinds each physical type forbids, with the rule's text.
_FORBIDDEN: dict[int, dict[str, str]] = {
    PhysicalType.TRIPLES: {
        "quad": "a quad row in a TRIPLES stream (PHYSICAL_STREAM_TYPE_TRIPLES MUST NOT contain quad rows)",
        "graph_start": "a graph_start row in a TRIPLES stream (it MUST NOT contain graph_start rows)",
        "graph_end": "a graph_end row in a TRIPLES stream (it MUST NOT contain graph_end rows)",
    },
    PhysicalType.QUADS: {
        "triple": "a triple row in a QUADS stream (PHYSICAL_STREAM_TYPE_QUADS MUST NOT contain triple rows)",
        "graph_start": "a graph_start row in a QUADS stream (it MUST NOT contain graph_start rows)",
        "graph_end": "a graph_end row in a QUADS stream (it MUST NOT contain graph_end rows)",
    },
    PhysicalType.GRAPHS: {
        "quad": "a quad row in a GRAPHS stream (PHYSICAL_STREAM_TYPE_GRAPHS MUST NOT contain quad rows)",
    },
}


class _RowViolation(RuleViolation):
    """A rule violation that already knows its row index (raised by the inline loop)."""

    def __init__(self, rule: str, row: int) -> None:
        super().__init__(rule)
        self.row = row


def options_from_proto(msg: Any, limits: Limits) -> RdfOptions:
    """Validate an ``RdfStreamOptions`` message; raises :class:`RuleViolation`."""
    if msg.physical_type not in (1, 2, 3):
        raise RuleViolation(
            f"physical_type is {msg.physical_type} (the physical type MUST be set; UNSPECIFIED MUST NOT be used)"
        )
    if msg.version == 0:
        raise RuleViolation("version tag is 0 (the version tag MUST be greater than 0)")
    if msg.version > RDF_VERSION:
        raise RuleViolation(
            f"version tag {msg.version} is newer than the supported version {RDF_VERSION} "
            "(consumers SHOULD throw an error if the version tag is greater than their own)"
        )
    logical = msg.logical_type
    if logical != 0 and base_logical_type(logical) not in (1, 2, 3, 4):
        raise RuleViolation(
            f"logical_type {logical} has no base type (the base type, value mod 10, MUST be one of 1-4)"
        )
    broken = name_table_too_small(msg.max_name_table_size)
    if broken:
        raise RuleViolation(broken)
    for field, limit in (
        ("max_name_table_size", limits.max_name_table_size),
        ("max_prefix_table_size", limits.max_prefix_table_size),
        ("max_datatype_table_size", limits.max_datatype_table_size),
    ):
        value = getattr(msg, field)
        if value > limit:
            raise RuleViolation(f"{field} {value} exceeds this reader's limit of {limit} (lookup size too large)")
    return RdfOptions(
        physical_type=PhysicalType(msg.physical_type),
        logical_type=logical,
        generalized_statements=msg.generalized_statements,
        rdf_star=msg.rdf_star,
        max_name_table_size=msg.max_name_table_size,
        max_prefix_table_size=msg.max_prefix_table_size,
        max_datatype_table_size=msg.max_datatype_table_size,
        stream_name=msg.stream_name,
        version=msg.version,
    )


def messages(events: Iterable[RdfEvent]) -> Iterator[list[Statement]]:
    """Grouped reading: the statements of each frame, one list per RDF Message.

    Every frame yields a list, an empty frame an empty one (an empty RDF Message). Blank
    node labels are passed on as the stream wrote them; a consumer that treats messages
    as separate "worlds" (<https://w3c-cg.github.io/rsp/spec/messages>, §1.2 "Scope of RDF Messages") scopes them per message.
    """
    current: list[Statement] = []
    for event in events:
        kind = type(event)
        if kind is Statement:
            current.append(event)  # type: ignore[arg-type]
        elif kind is FrameEnd:
            yield current
            current = []


class RdfDecoder(FramedDecoder[RdfEvent], Generic[T]):
    """Decodes a Jelly-RDF byte stream into :mod:`patchsync.events`.

    ``adapter`` builds the terms (rdflib terms when omitted). ``source`` names the input
    in errors. ``framing`` is ``"auto"``, ``"delimited"`` or ``"single"`` (one bare frame).
    """

    _frame_type = rdf_pb2.RdfStreamFrame
    #: The compiled core that decodes frames, or None: the pure-Python path only.
    _native: Any = backend.native()
    _native_rdf = True

    def __init__(
        self,
        adapter: TermAdapter[T] | None = None,
        *,
        source: str = "<stream>",
        limits: Limits | None = None,
        framing: str = "auto",
    ) -> None:
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.source = source
        self.limits = limits or Limits()
        self._framer = Framer(source=source, max_frame_bytes=self.limits.max_frame_bytes, framing=framing)
        self.options: RdfOptions | None = None
        self._options_msg: Any = None
        self._terms: TermDecoder[T] | None = None
        self._physical = 0
        self._forbidden: dict[str, str] = {}
        self._graph: Any = None  # the open graph of a GRAPHS stream
        self._in_graph = False
        super().__init__()
        self.frames = 0

    # -- decoding ---------------------------------------------------------------------

    def _error(self, rule: str, offset: int, row: int | None) -> DecodeError:
        return DecodeError(rule, source=self.source, offset=offset, frame=self.frames, row=row)

    def _decode_rows(self, offset: int, rows: Any, start: int) -> None:
        if self._native is not None and type(rows) is self._native.Frame:
            self._native.decode_rdf_rows(self, rows, offset, start)
            return
        frame_index = self.frames
        stop = min(len(rows), start + ROW_BATCH)
        batch = rows[start:stop]
        index = start
        try:
            first = start
            if self._terms is not None and self._physical != PhysicalType.GRAPHS:
                first = self._fast_rows(self._terms, batch, offset, frame_index, start)
            for index in range(first, stop):
                self._row(batch[index - start], offset, frame_index, index)
            if stop < len(rows):
                self._row_next = stop
                return
            self._queue.append(FrameEnd(offset, frame_index, len(rows)))
        except _RowViolation as exc:
            self._pending_error = self._error(exc.rule, offset, exc.row)
        except RuleViolation as exc:
            self._pending_error = self._error(exc.rule, offset, index)
        self._close_frame()

    def _fast_rows(self, terms: TermDecoder[T], rows: Any, offset: int, frame: int, base: int) -> int:
        """Decode statement and lookup rows of a TRIPLES/QUADS stream inline (hot path).

        ``rows`` is a batch whose first row has index ``base`` in the frame. Returns the
        frame index of the first row it leaves to :meth:`_row`, which handles every other
        row kind and all errors; ``base + len(rows)`` when it decoded the whole batch.
        """
        append = self._queue.append
        spo = terms.spo
        statement_kind = "quad" if self._physical == PhysicalType.QUADS else "triple"
        graph = terms.graph
        quads = statement_kind == "quad"
        name_entry = terms.name_entry
        index = base
        try:
            for index, row in enumerate(rows, base):
                kind = row.WhichOneof("row")
                if kind == statement_kind:
                    msg = row.quad if quads else row.triple
                    s, p, o = spo(msg)
                    g = graph(msg) if quads else None
                    # tuple.__new__ skips the named tuple's Python-level constructor.
                    append(_new_tuple(Statement, (s, p, o, g, offset, frame, index)))
                elif kind == "name":
                    entry = row.name
                    name_entry(entry.id, entry.value)
                else:
                    return index
        except RuleViolation as exc:
            raise _RowViolation(exc.rule, index) from None
        return base + len(rows)

    def _row(self, row: Any, offset: int, frame: int, index: int) -> None:
        kind = row.WhichOneof("row")
        terms = self._terms
        if terms is None:
            if kind != "options":
                raise RuleViolation(
                    "the first row is not the options row (the stream options header MUST be the first row in the stream)"
                    if kind is not None
                    else "row has no field set (a stream row has exactly one field set)"
                )
            self._set_options(row.options, offset, frame, index)
            return
        forbidden = self._forbidden.get(kind or "")
        if forbidden is not None:
            raise RuleViolation(forbidden)
        queue = self._queue
        if kind == "triple":
            s, p, o = terms.spo(row.triple)
            if self._physical == PhysicalType.GRAPHS:
                if not self._in_graph:
                    raise RuleViolation(
                        "triple outside a graph in a GRAPHS stream (triples MUST NOT occur outside of a graph)"
                    )
                g = self._graph
            else:
                g = None
            queue.append(_new_tuple(Statement, (s, p, o, g, offset, frame, index)))
        elif kind == "quad":
            msg = row.quad
            s, p, o = terms.spo(msg)
            g = terms.graph(msg)
            queue.append(_new_tuple(Statement, (s, p, o, g, offset, frame, index)))
        elif kind == "name":
            terms.name_entry(row.name.id, row.name.value)
        elif kind == "prefix":
            terms.prefix_entry(row.prefix.id, row.prefix.value)
        elif kind == "datatype":
            terms.datatype_entry(row.datatype.id, row.datatype.value)
        elif kind == "graph_start":
            if self._in_graph:
                raise RuleViolation("graph_start inside a graph (a graph start MUST NOT occur inside another graph)")
            start = row.graph_start
            field = start.WhichOneof("graph")
            if field is None:
                raise RuleViolation(
                    "graph_start names no graph (exactly one field in RdfGraphStart MUST be set; no repeated terms)"
                )
            self._graph = terms.handlers[field](terms, getattr(start, field))
            self._in_graph = True
            queue.append(GraphStart(self._graph, offset, frame, index))
        elif kind == "graph_end":
            if not self._in_graph:
                raise RuleViolation("graph_end outside a graph (a graph end MUST NOT occur outside a graph)")
            self._in_graph = False
            self._graph = None
            queue.append(GraphEnd(offset, frame, index))
        elif kind == "namespace":
            ns = row.namespace
            if not ns.HasField("value"):
                raise RuleViolation("namespace declaration without an IRI (RdfNamespaceDeclaration.value is required)")
            queue.append(Namespace(ns.name, terms.iri(ns.value), offset, frame, index))
        elif kind == "options":
            if row.options != self._options_msg:
                raise RuleViolation(
                    "options row differs from the first one (repeated options MUST be identical to all previous occurrences)"
                )
        else:
            raise RuleViolation("row has no field set (a stream row has exactly one field set)")

    def _set_options(self, msg: Any, offset: int, frame: int, index: int) -> None:
        options = options_from_proto(msg, self.limits)
        self.options = options
        # A copy, so that holding it does not keep the whole first frame alive.
        self._options_msg = rdf_pb2.RdfStreamOptions()
        self._options_msg.CopyFrom(msg)
        self._physical = int(options.physical_type)
        self._forbidden = _FORBIDDEN[self._physical]
        self._terms = TermDecoder(
            self.adapter,
            max_names=options.max_name_table_size,
            max_prefixes=options.max_prefix_table_size,
            max_datatypes=options.max_datatype_table_size,
            generalized=options.generalized_statements,
            rdf_star=options.rdf_star,
            max_nesting=self.limits.max_nesting,
        )
        self._queue.append(StreamOptions(options, offset, frame, index))


class PureRdfDecoder(RdfDecoder[T]):
    """An :class:`RdfDecoder` that never uses the compiled core: the reference decoder.

    What ``PATCHSYNC_PURE=1`` makes every decoder; the differential tests compare the two.
    """

    _native = None
