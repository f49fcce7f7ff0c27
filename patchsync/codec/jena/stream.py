"""The sans-I/O decoder and encoder shells both RDF Binary formats share.

:class:`BinaryDecoder` owns the input buffer, positions and errors; a format subclass
only reads one row at a time (``_read_row``). A row that is not complete yet raises
:class:`Short` with the buffer index known to be needed; the decoder then waits for that
many bytes (so a big row fed in small chunks is not re-parsed on every chunk) and retries
from the row's start. Rows are small and parsing one has no side effect before it is
complete: prefix declarations, REPEAT memory and events are committed by the subclass
only once the whole row has been read.

:class:`BinaryEncoder` turns statements and namespaces into row bytes through a format
subclass's term and row spellings, caching the bytes of each term.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from patchsync.codec.driver import ROW_BATCH, PullDecoder
from patchsync.codec.jena.terms import TermReader, TermWriter
from patchsync.codec.term_decoder import RuleViolation
from patchsync.errors import DecodeError, EncodeError, UsageError
from patchsync.events import FrameEnd, GraphEnd, GraphStart, Namespace, RdfEvent, Statement, StreamOptions
from patchsync.options import Limits
from patchsync.terms import DEFAULT_GRAPH, IRI, TermAdapter, default_adapter

T = TypeVar("T")

_CACHE_LIMIT = 1 << 16
_WINDOW = 1 << 20


class Short(Exception):
    """The buffer ends inside a row; ``need`` is a buffer index the row reaches at least."""

    def __init__(self, need: int) -> None:
        super().__init__(need)
        self.need = need


def stream_varint(
    buf: bytes, pos: int, end: int, long_rule: str = "malformed varint: longer than 10 bytes (bad varint)"
) -> tuple[int, int]:
    """A varint at ``pos`` of the stream: ``(value, next pos)``; :class:`Short` if the bytes
    held end inside it (more may come), ``long_rule`` broken past 10 bytes."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise Short(pos + 1)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= 10:
            raise RuleViolation(long_rule)


class BinaryDecoder(PullDecoder[RdfEvent], Generic[T]):
    """Decodes an RDF Binary byte stream into :class:`~patchsync.events.Statement` and
    :class:`~patchsync.events.Namespace` events.

    Feed bytes with :meth:`feed`, say :meth:`close` when the input is complete, and take
    events with ``next_event()`` (``NEED_DATA`` / ``END``) or by iterating. Events carry the
    byte offset of their row and the row index (``frame`` is always 0: these formats have
    no frames). ``g`` is ``None`` for triple rows; for quad rows it is the graph, the
    adapter's default-graph term when the quad has none (or names Jena's default graph).
    ``limits.max_frame_bytes`` bounds a row (and so every string), ``limits.max_nesting``
    the depth of triple terms, ``limits.max_prefix_table_size`` the distinct prefixes.
    Any term may stand in any position (the formats allow generalized statements, and
    Jena reads them); a consumer that needs RDF 1.1 positions checks them itself.
    """

    #: Name of the format in error messages.
    format_name = "RDF Binary"

    def __init__(
        self,
        adapter: TermAdapter[T] | None = None,
        *,
        source: str = "<stream>",
        limits: Limits | None = None,
    ) -> None:
        super().__init__()
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.source = source
        self.limits = limits or Limits()
        self.max_row = self.limits.max_frame_bytes
        self.terms: TermReader[T] = TermReader(self.adapter, self.limits)
        self.rows = 0
        self._buf = bytearray()
        self._pos = 0  # index of the next row's first byte in _buf
        self._base = 0  # absolute offset of _buf[0]
        self._need = 0  # absolute offset the buffer must reach before a retry
        self._closed = False
        #: Terms by their encoded bytes (formats whose term spans are known before parsing).
        self._term_cache: dict[bytes, Any] = {}

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Give the decoder more bytes of the stream."""
        if self._closed:
            raise UsageError("feed() after close()")
        self._buf += data

    def close(self) -> None:
        """Say that the stream is complete; a trailing partial row is then an error."""
        self._closed = True

    @property
    def offset(self) -> int:
        """Byte offset of the first row not decoded yet."""
        return self._base + self._pos

    @property
    def complete(self) -> bool:
        """Whether the closed input has been decoded to its end."""
        return self._finished

    def _read_row(self, buf: bytes, pos: int, end: int, offset: int, index: int) -> int:
        """Read the row at ``buf[pos]``, queue its events, answer the index after it.

        Raises :class:`Short` when ``buf`` ends first, ``RuleViolation`` for a broken rule.
        """
        raise NotImplementedError

    def _advance(self) -> bool:
        buf = self._buf
        if not self._closed and self._base + len(buf) < self._need:
            return False
        # Rows are parsed from an immutable copy of a window of the buffer: slices of bytes
        # are hashable (term caches key on them) and the buffer may grow meanwhile. The
        # window holds at least the row that last came up short.
        start = self._pos
        data = bytes(buf[start : start + max(_WINDOW, self._need - self._base - start)])
        whole = start + len(data) >= len(buf)  # running out of the window = out of input
        end = len(data)
        pos = 0
        progressed = False
        for _ in range(ROW_BATCH):
            if pos >= end:
                if not whole:
                    return True
                if self._closed:
                    self._finished = True
                    return True
                self._compact()
                return progressed
            offset = self._base + start + pos
            try:
                pos = self._read_row(data, pos, end, offset, self.rows)
            except Short as short:
                if short.need - pos > self.max_row:
                    self._fail(f"row of more than {self.max_row} bytes exceeds the limit (oversize row)", offset)
                    return True
                self._need = self._base + start + short.need
                if not whole:
                    return True  # the next window reaches the row's end
                if self._closed:
                    self._fail("the stream ends inside a row (truncated row)", offset)
                    return True
                self._compact()
                return progressed
            except RuleViolation as exc:
                self._fail(exc.rule, offset)
                return True
            except RecursionError:
                self._fail("terms nested too deeply", offset)
                return True
            self._pos = start + pos
            self.rows += 1
            progressed = True
        return True

    def _fail(self, rule: str, offset: int) -> None:
        # Raised once the events queued before it have been taken (PullDecoder).
        self._pending_error = DecodeError(
            f"{self.format_name}: {rule}", source=self.source, offset=offset, row=self.rows
        )

    def _compact(self) -> None:
        if self._pos > 1 << 20 and self._pos > len(self._buf) // 2:
            del self._buf[: self._pos]
            self._base += self._pos
            self._pos = 0

    # -- committing a decoded row ------------------------------------------------------

    def _statement(self, s: T, p: T, o: T, g: T | None, offset: int, index: int) -> None:
        self.terms.previous = [s, p, o, g]
        self._queue.append(Statement(s, p, o, g, offset, 0, index))

    def _prefix(self, prefix: str, uri: str, offset: int, index: int) -> None:
        self._queue.append(Namespace(prefix, self.terms.declare(prefix, uri), offset, 0, index))
        # Cached terms may be prefixed names spelled against the old declaration.
        self._term_cache.clear()


class BinaryEncoder(Generic[T]):
    """Writes RDF Binary rows; :meth:`take` hands over the bytes written so far.

    ``prefixed_names`` writes IRIs (and datatypes) under a declared namespace as prefixed
    names, as Jena's RDF Thrift writer does; ``values`` writes integers, doubles and
    decimals as value forms where that is lossless (Jena's ``RDF_THRIFT_VALUES`` /
    ``RDF_PROTO_VALUES``); ``repeat`` writes REPEAT for a term equal to the one at the same
    position of the previous row. Jena's writers never write REPEAT and its readers refuse
    it ("REPEAT not implemented"), so ``repeat`` is off by default.
    """

    def __init__(
        self,
        adapter: TermAdapter[T] | None = None,
        *,
        prefixed_names: bool = True,
        values: bool = False,
        repeat: bool = False,
        max_nesting: int = 64,
    ) -> None:
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.writer: TermWriter[T] = TermWriter(self.adapter, prefixed_names=prefixed_names, values=values)
        self.repeat = repeat
        self.max_nesting = max_nesting
        self.rows = 0
        self._out = bytearray()
        self._cache: dict[Any, bytes] = {}
        self._previous: list[Any] = [None, None, None, None]
        self._default_graph = self.adapter.default_graph()
        self._finished = False

    # -- format spellings (subclasses) ---------------------------------------------------

    def _spelled(self, spelling: tuple[Any, ...]) -> bytes:
        """Bytes of an ``RDF_Term`` for a :meth:`TermWriter.spell` answer (not a triple)."""
        raise NotImplementedError

    def _triple_term(self, s: bytes, p: bytes, o: bytes) -> bytes:
        raise NotImplementedError

    def _repeat_term(self) -> bytes:
        raise NotImplementedError

    def _triple_row(self, s: bytes, p: bytes, o: bytes) -> bytes:
        raise NotImplementedError

    def _quad_row(self, s: bytes, p: bytes, o: bytes, g: bytes) -> bytes:
        raise NotImplementedError

    def _prefix_row(self, prefix: str, uri: str) -> bytes:
        raise NotImplementedError

    # -- content -------------------------------------------------------------------------

    def namespace(self, name: str, iri: T) -> None:
        """Declare prefix ``name`` for namespace ``iri`` (a prefix row)."""
        self._check_open()
        u = self.adapter.unpack(iri)
        if u[0] != IRI:
            raise EncodeError(f"namespace {name!r} must be an IRI, not {iri!r}")
        self.writer.declare(name, u[1])
        self._cache.clear()  # spellings under the old prefixes are stale
        self._out += self._prefix_row(name, u[1])
        self.rows += 1

    def statement(self, s: T, p: T, o: T, g: T | None = None) -> None:
        """A triple (``g`` ``None`` or the default graph) or a quad in named graph ``g``."""
        self._check_open()
        if g is not None and (g == self._default_graph or self.adapter.unpack(g)[0] == DEFAULT_GRAPH):
            g = None
        parts = (s, p, o) if g is None else (s, p, o, g)
        previous = self._previous
        encoded = []
        for position, term in enumerate(parts):
            if self.repeat and previous[position] is not None and previous[position] == term:
                encoded.append(self._repeat_term())
            else:
                encoded.append(self._term(term, 0))
        if g is None:
            self._out += self._triple_row(*encoded)
            self._previous = [s, p, o, None]
        else:
            self._out += self._quad_row(*encoded)
            self._previous = [s, p, o, g]
        self.rows += 1

    def send(self, event: RdfEvent) -> None:
        """Encode one decoder event: statements and namespaces; framing events are ignored."""
        if type(event) is Statement:
            self.statement(event.s, event.p, event.o, event.g)
        elif type(event) is Namespace:
            self.namespace(event.name, event.iri)
        elif type(event) not in (StreamOptions, FrameEnd, GraphStart, GraphEnd):
            raise EncodeError(f"not an RDF event: {event!r}")

    def take(self) -> bytes:
        """The bytes written since the last call."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def pending_bytes(self) -> int:
        """How many bytes :meth:`take` would hand over now."""
        return len(self._out)

    def finish(self) -> None:
        """End the stream (these formats have no trailer); later writes are refused."""
        self._finished = True

    # -- internals ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._finished:
            raise EncodeError("write after finish()")

    def _term(self, term: T, depth: int) -> bytes:
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        spelling = self.writer.spell(term)
        if spelling[0] == "triple":
            if depth >= self.max_nesting:
                raise EncodeError(f"triple terms nested deeper than {self.max_nesting}")
            data = self._triple_term(*(self._term(part, depth + 1) for part in spelling[1:]))
        else:
            data = self._spelled(spelling)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[term] = data
        return data


def utf8(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates are an :class:`EncodeError`."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodeError(f"string is not valid Unicode text ({exc.reason}): {text[:60]!r}") from None


def encode_all(
    encoder: BinaryEncoder[T],
    statements: Iterable[tuple[T, T, T, T | None]],
    namespaces: Iterable[tuple[str, T]] = (),
) -> bytes:
    """Prefix rows for ``namespaces``, then every statement ``(s, p, o, g)``: the stream's bytes."""
    out = bytearray()
    for name, iri in namespaces:
        encoder.namespace(name, iri)
    for s, p, o, g in statements:
        encoder.statement(s, p, o, g)
        if encoder.pending_bytes() >= 1 << 20:
            out += encoder.take()
    encoder.finish()
    out += encoder.take()
    return bytes(out)


__all__ = ["BinaryDecoder", "BinaryEncoder", "Short", "encode_all", "utf8"]
