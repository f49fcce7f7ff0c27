"""The Jelly-Patch decoder: a sans-I/O state machine from bytes to events.

Feed it bytes with :meth:`PatchDecoder.feed`, say :meth:`PatchDecoder.close` when the input
is complete, and take events with :meth:`PatchDecoder.next_event` (h11 style: it answers
``NEED_DATA`` when it holds no complete frame, ``END`` when the closed stream is done) or
by iterating, which yields every event available now.

Rules checked here, besides the term rules in :mod:`.term_decoder` (all from
<https://w3id.org/jelly/dev/specification/patch/>):

* the options row comes first, is valid, and every repetition is identical;
* each row has exactly one field set; punctuation only in PUNCTUATED streams;
* the transaction rules of :mod:`patchsync.units` (``TC``/``TA`` follow a ``TX``, no
  nesting, a transaction ends inside its patch: a FRAME frame, a PUNCTUATED patch, the stream);
* header values are always set; ``PA`` has a value; TRIPLES rows ignore the graph.

Resource limits (:class:`~patchsync.options.Limits`, docs/design.md §1) are checked before the
allocation they bound: frame length, lookup sizes, quoted-triple nesting, and the number
and size of header rows in one patch (a consumer keeps a patch's headers until it ends).

A frame is decoded whole when it arrives, but its events are handed out before an error
found later in the same frame is raised, so a consumer can act on the complete units that
precede a bad row (docs/design.md §2). After an error the decoder stays failed.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from google.protobuf.message import DecodeError as ProtobufDecodeError

from patchsync._proto import patch_pb2
from patchsync.codec import backend
from patchsync.codec.decoder_state import DecoderState
from patchsync.codec.driver import END, NEED_DATA, ROW_BATCH, FramedDecoder
from patchsync.codec.framing import Framer
from patchsync.codec.term_decoder import RuleViolation, TermDecoder
from patchsync.errors import DecodeError
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
from patchsync.options import PATCH_VERSION, Limits, PatchOptions, StatementType, StreamType, name_table_too_small
from patchsync.terms import TermAdapter, default_adapter
from patchsync.units import QUIET, Kind, TransactionError, UnitTracker

__all__ = ["END", "NEED_DATA", "PatchDecoder", "PurePatchDecoder", "options_from_proto"]

T = TypeVar("T")

_new_tuple = tuple.__new__

_CHANGE = Kind.CHANGE
_CHANGE_QUIET = QUIET[Kind.CHANGE]  # states where a statement row changes nothing
# The row names of transaction rows in messages (Kind.TX.value is "TX", and so on).
_TX_KINDS: dict[str | None, Kind] = {
    "transaction_start": Kind.TX,
    "transaction_commit": Kind.TC,
    "transaction_abort": Kind.TA,
}
_TX_EVENTS: dict[str | None, type[TxStart | TxCommit | TxAbort]] = {
    "transaction_start": TxStart,
    "transaction_commit": TxCommit,
    "transaction_abort": TxAbort,
}


_CONTENT_ROWS = frozenset(
    {
        "statement_add",
        "statement_delete",
        "namespace_add",
        "namespace_delete",
        "transaction_start",
        "transaction_commit",
        "transaction_abort",
        "header",
    }
)


def options_from_proto(msg: Any, limits: Limits) -> PatchOptions:
    """Validate an ``RdfPatchOptions`` message; raises :class:`RuleViolation`."""
    if msg.statement_type not in (1, 2):
        raise RuleViolation(
            f"statement_type is {msg.statement_type} (it MUST be set to a defined value other than UNSPECIFIED)"
        )
    if msg.stream_type not in (1, 2, 3):
        raise RuleViolation(
            f"stream_type is {msg.stream_type} (it MUST be set to a defined value other than UNSPECIFIED)"
        )
    if msg.version == 0:
        raise RuleViolation("version tag is 0 (the version tag MUST be greater than 0)")
    if msg.version > PATCH_VERSION:
        raise RuleViolation(
            f"version tag {msg.version} is newer than the supported version {PATCH_VERSION} "
            "(consumers SHOULD reject versions greater than their own)"
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
    return PatchOptions(
        stream_type=StreamType(msg.stream_type),
        statement_type=StatementType(msg.statement_type),
        generalized_statements=msg.generalized_statements,
        rdf_star=msg.rdf_star,
        max_name_table_size=msg.max_name_table_size,
        max_prefix_table_size=msg.max_prefix_table_size,
        max_datatype_table_size=msg.max_datatype_table_size,
        version=msg.version,
    )


class PatchDecoder(FramedDecoder[Event], Generic[T]):
    """Decodes a Jelly-Patch byte stream into :mod:`patchsync.events`.

    ``adapter`` builds the terms (rdflib terms when omitted). ``source`` names the input
    in errors. ``framing`` is ``"auto"``, ``"delimited"`` or ``"single"``.
    """

    # Header rows in the current patch, and their limits. Class-level defaults keep
    # decoders pickled before these existed (tail snapshots) loadable.
    _headers = 0
    _max_headers = Limits().max_headers
    _max_header_bytes = Limits().max_header_bytes
    _framing = "auto"
    _spare: tuple[Any, PatchOptions, TermDecoder[Any]] | None = None

    _frame_type = patch_pb2.RdfPatchFrame
    #: The compiled core that decodes frames, or None: the pure-Python path only.
    _native: Any = backend.native()

    def __init__(
        self,
        adapter: TermAdapter[T] | None = None,
        *,
        source: str = "<stream>",
        limits: Limits | None = None,
        framing: str = "auto",
    ) -> None:
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.limits = limits or Limits()
        self._max_headers = self.limits.max_headers
        self._max_header_bytes = self.limits.max_header_bytes
        self._framing = framing
        # What restart() keeps for the next stream: its options row, options and term decoder.
        self._spare = None
        self._start(source)

    def restart(self, source: str = "<stream>") -> None:
        """Decode another stream from its start, exactly as a new decoder with this adapter,
        limits and framing would.

        Cheaper than a new decoder for many short streams (one per stream message): when
        the next stream's options row is the last one's, or differs only in lookup sizes,
        the term decoder is started over instead of built again.
        """
        if self._terms is not None and self._options_msg is not None and self.options is not None:
            self._spare = (self._options_msg, self.options, self._terms)
        self._start(source)

    def _start(self, source: str) -> None:
        self.source = source
        self._framer = Framer(source=source, max_frame_bytes=self.limits.max_frame_bytes, framing=self._framing)
        self.options: PatchOptions | None = None
        self._options_msg: Any = None
        self._terms: TermDecoder[T] | None = None
        self._quads = False
        self._stream_type: StreamType | None = None
        self._units = UnitTracker()  # where the stream stands in patches and transactions
        self._tx_seen = False
        super().__init__()
        self._rows = None
        self._row_next = 0
        self._headers = 0
        self.frames = 0
        self.patches = 0

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (between ``TX`` and its ``TC`` / ``TA``)."""
        return self._units.in_transaction

    # -- resumable state --------------------------------------------------------------

    @property
    def resumable(self) -> bool:
        """Whether :meth:`export_state` can be called: between frames, outside any patch."""
        return self.between_frames and not self._units.patch_open  # no patch (so no transaction) open

    def export_state(self) -> DecoderState[T]:
        """The state this decoder carries to the next patch (see :mod:`.decoder_state`).

        Raises ``ValueError`` unless :attr:`resumable`: inside a frame, a patch or a
        transaction, with events not yet taken, or after an error the state is not one a
        decoder can start from.
        """
        if not self.resumable:
            raise ValueError("the decoder is not at a frame boundary between patches")
        terms = self._terms
        return DecoderState(
            offset=self._framer.offset,
            frames=self.frames,
            patches=self.patches,
            tx_seen=self._tx_seen,
            options=self._options_msg.SerializeToString() if self._options_msg is not None else None,
            terms=terms.export_state() if terms is not None else None,
        )

    def restore_state(self, state: DecoderState[T]) -> None:
        """Continue from ``state`` (exported by a decoder of the same stream); a fresh decoder only.

        The next bytes fed must be those of the stream from ``state.offset`` on (the
        framing is then ``"delimited"``). The state is validated like the stream's own
        rows, against this decoder's limits: raises :class:`RuleViolation` or
        ``ValueError`` for a state no decoder could have exported.
        """
        if self.frames or self._framer.offset or self._framer.buffered or self.options is not None or self._queue:
            raise ValueError("restore_state() needs a decoder that was not fed yet")
        for name in ("offset", "frames", "patches"):
            value = getattr(state, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"{name} {value!r} is not a non-negative integer")
        if not isinstance(state.tx_seen, bool):
            raise ValueError("tx_seen is not a boolean")
        if (state.options is None) != (state.terms is None):
            raise ValueError("the options and the term state go together")
        self._framer = Framer(
            source=self.source,
            max_frame_bytes=self.limits.max_frame_bytes,
            framing="delimited",
            base_offset=state.offset,
            base_frame=state.frames,
        )
        self.frames = state.frames
        self.patches = state.patches
        self._tx_seen = state.tx_seen
        if state.options is not None and state.terms is not None:
            try:
                msg = patch_pb2.RdfPatchOptions.FromString(state.options)
            except (ProtobufDecodeError, TypeError) as exc:
                raise ValueError(f"options are not an RdfPatchOptions message: {exc}") from None
            # The same validation (and limits) as the options row of the stream itself.
            self._set_options(msg, state.offset, state.frames, 0)
            self._queue.clear()  # the options were announced before the state was taken
            assert self._terms is not None
            self._terms.restore_state(state.terms)

    @classmethod
    def from_state(
        cls,
        state: DecoderState[T],
        adapter: TermAdapter[T] | None = None,
        *,
        source: str = "<stream>",
        limits: Limits | None = None,
    ) -> PatchDecoder[T]:
        """A new decoder continuing from ``state`` (see :meth:`restore_state`)."""
        decoder: PatchDecoder[T] = cls(adapter, source=source, limits=limits, framing="delimited")
        decoder.restore_state(state)
        return decoder

    # -- decoding ---------------------------------------------------------------------

    def _error(self, rule: str, offset: int, row: int | None) -> DecodeError:
        return DecodeError(rule, source=self.source, offset=offset, frame=self.frames, row=row)

    def _finish(self) -> None:
        self._finished = True
        end = self._framer.offset
        patch_open = self._units.patch_open
        try:
            self._units.send(Kind.STREAM_END)
        except TransactionError as exc:
            self._pending_error = self._error(exc.text(), end, None)
            return
        if self._stream_type is StreamType.FLAT:
            self._queue.append(PatchEnd(end, self.frames, 0))
            self.patches += 1
        elif self._stream_type is StreamType.PUNCTUATED and patch_open:
            self._pending_error = self._error(
                "stream ends inside a patch (in PUNCTUATED streams a punctuation mark MUST end every patch)",
                end,
                None,
            )

    def _decode_rows(self, offset: int, rows: Any, start: int) -> None:
        if self._native is not None and type(rows) is self._native.Frame:
            self._native.decode_rows(self, rows, offset, start)
            return
        frame_index = self.frames
        stop = min(len(rows), start + ROW_BATCH)
        index: int | None = start
        terms = self._terms
        append = self._queue.append
        quads = self._quads
        units = self._units
        try:
            for index, row in enumerate(rows[start:stop], start):
                kind = row.WhichOneof("row")
                # Statements are nearly every row: decoded inline, the rest in _row().
                if (kind == "statement_add" or kind == "statement_delete") and terms is not None:
                    msg = getattr(row, kind)
                    s, p, o = terms.spo(msg)
                    g = terms.graph(msg) if quads else None
                    # tuple.__new__ skips the named tuple's Python-level constructor.
                    append(
                        _new_tuple(Add if kind == "statement_add" else Delete, (s, p, o, g, offset, frame_index, index))  # type: ignore[arg-type]
                    )
                    if units.state not in _CHANGE_QUIET:
                        units.send(_CHANGE)
                else:
                    self._row(row, kind, offset, frame_index, index)
                    terms = self._terms
                    quads = self._quads
            if stop < len(rows):
                self._row_next = stop
                return
        except RuleViolation as exc:
            self._pending_error = self._error(exc.rule, offset, index)
        except TransactionError as exc:
            self._pending_error = self._error(exc.text(), offset, index)
        else:
            self._end_frame(offset, frame_index, len(rows))
            return
        self._close_frame()

    def _end_frame(self, offset: int, frame_index: int, rows: int) -> None:
        """Every row of the frame is decoded: in a FRAME stream the frame's patch ends."""
        if self._stream_type is StreamType.FRAME:
            try:
                self._units.send(Kind.PATCH_END)
            except TransactionError as exc:
                # In FRAME streams a frame is a patch: transactions MUST NOT span frames.
                self._pending_error = self._error(exc.text("the end of a FRAME frame (one patch)"), offset, None)
            else:
                self._queue.append(PatchEnd(offset, frame_index, rows))
                self._headers = 0
                self.patches += 1
        self._close_frame()

    def _statement_row(self, row: Any, offset: int, frame: int, index: int) -> None:
        """A statement row from its protobuf message: the compiled core's way for rare terms.

        The same steps as the statement branch of :meth:`_decode_rows`, which inlines them.
        """
        kind = row.WhichOneof("row")
        msg = getattr(row, kind)
        terms = self._terms
        assert terms is not None
        s, p, o = terms.spo(msg)
        g = terms.graph(msg) if self._quads else None
        self._queue.append((Add if kind == "statement_add" else Delete)(s, p, o, g, offset, frame, index))
        if self._units.state not in _CHANGE_QUIET:
            self._units.send(_CHANGE)

    def _row(self, row: Any, kind: str | None, offset: int, frame: int, index: int) -> None:
        terms = self._terms
        if terms is None:
            if kind != "options":
                raise RuleViolation(
                    "the first row is not the options row (the patch stream options MUST be the first row in the stream)"
                    if kind is not None
                    else "row has no field set (a row MUST have exactly one field set)"
                )
            self._set_options(row.options, offset, frame, index)
            return
        queue = self._queue
        if kind == "name":
            entry = row.name
            terms.name_entry(entry.id, entry.value)
        elif kind == "prefix":
            entry = row.prefix
            terms.prefix_entry(entry.id, entry.value)
        elif kind == "datatype":
            entry = row.datatype
            terms.datatype_entry(entry.id, entry.value)
        elif kind == "namespace_add" or kind == "namespace_delete":
            self._namespace(kind, getattr(row, kind), terms, offset, frame, index)
        elif kind == "header":
            header = row.header
            field = header.WhichOneof("value")
            if field is None:
                raise RuleViolation(
                    "header row without a value (the value oneof MUST be set; no repeated terms in headers)"
                )
            self._headers += 1
            if self._headers > self._max_headers:
                raise RuleViolation(
                    f"more than {self._max_headers} header rows in one patch (this reader's limit of header rows)"
                )
            size = header.ByteSize()
            if size > self._max_header_bytes:
                raise RuleViolation(
                    f"header row of {size} bytes exceeds this reader's limit of {self._max_header_bytes} bytes"
                )
            value = terms.handlers[field](terms, getattr(header, field))
            self._units.send(Kind.HEADER)
            queue.append(Header(header.key, value, offset, frame, index))
        elif kind in _TX_KINDS:
            self._units.send(_TX_KINDS[kind])
            self._tx_seen = True
            queue.append(_TX_EVENTS[kind](offset, frame, index))
        elif kind == "punctuation":
            if self._stream_type is not StreamType.PUNCTUATED:
                raise RuleViolation(
                    "punctuation row in a stream that is not PUNCTUATED (punctuation MUST NOT appear in other stream types)"
                )
            try:
                self._units.send(Kind.PATCH_END)
            except TransactionError as exc:
                # PUNCTUATED transactions MUST NOT contain punctuation marks.
                raise RuleViolation(exc.text("punctuation")) from None
            queue.append(PatchEnd(offset, frame, index))
            self._headers = 0
            self.patches += 1
        elif kind == "options":
            if row.options != self._options_msg:
                raise RuleViolation(
                    "options row differs from the first one (repeated options MUST be identical to previous occurrences)"
                )
        else:
            raise RuleViolation("row has no field set (a row MUST have exactly one field set)")

    def _namespace(self, kind: str, ns: Any, terms: TermDecoder[T], offset: int, frame: int, index: int) -> None:
        # The value IRI is processed before the graph term (Jelly-Patch, "RDF terms").
        iri = terms.iri(ns.value) if ns.HasField("value") else None
        g = terms.graph(ns) if self._quads else None
        if kind == "namespace_add":
            if iri is None:
                raise RuleViolation(
                    "PA row without a namespace IRI (value is REQUIRED for the namespace add operation)"
                )
            self._queue.append(PrefixAdd(ns.name, iri, g, offset, frame, index))
        else:
            self._queue.append(PrefixDelete(ns.name, iri, g, offset, frame, index))
        self._units.send(_CHANGE)

    def _set_options(self, msg: Any, offset: int, frame: int, index: int) -> None:
        spare, self._spare = self._spare, None
        if spare is not None and msg == spare[0]:
            # The last stream's options row (see restart()): validated then.
            self._options_msg, options = spare[0], spare[1]
        else:
            options = options_from_proto(msg, self.limits)
            # A copy, so that holding it does not keep the whole first frame alive.
            self._options_msg = patch_pb2.RdfPatchOptions()
            self._options_msg.CopyFrom(msg)
        self.options = options
        self._quads = options.statement_type is StatementType.QUADS
        self._stream_type = options.stream_type
        terms = spare[2] if spare is not None else None
        if (
            terms is not None
            and terms.generalized == options.generalized_statements
            and terms.rdf_star == options.rdf_star
        ):
            terms.restart(
                max_names=options.max_name_table_size,
                max_prefixes=options.max_prefix_table_size,
                max_datatypes=options.max_datatype_table_size,
            )
        else:
            terms = TermDecoder(
                self.adapter,
                max_names=options.max_name_table_size,
                max_prefixes=options.max_prefix_table_size,
                max_datatypes=options.max_datatype_table_size,
                generalized=options.generalized_statements,
                rdf_star=options.rdf_star,
                max_nesting=self.limits.max_nesting,
                require_absolute_iris=self.limits.require_absolute_iris,
            )
        self._terms = terms
        self._queue.append(Options(options, offset, frame, index))


class PurePatchDecoder(PatchDecoder[T]):
    """A :class:`PatchDecoder` that never uses the compiled core: the reference decoder.

    What ``PATCHSYNC_PURE=1`` makes every decoder; the differential tests compare the two.
    """

    _native = None
