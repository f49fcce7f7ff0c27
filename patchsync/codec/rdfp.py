"""RDF Patch text (``.rdfp``): a sans-I/O reader and a writer (<https://afs.github.io/rdf-delta/rdf-patch.html>).

The reader has the shape of :class:`~patchsync.codec.patch_decoder.PatchDecoder`: feed it
bytes, close it, and take events with ``next_event`` (``NEED_DATA`` / ``END``) or by
iterating. Rows are::

    H key value .            key: a keyword or a quoted string; value: any term
    TX .   TC .   TA .       transactions (``TB`` is read as ``TX``, as Jena does)
    PA name ns [g] .         name: keyword or quoted string; ns: <iri> or a quoted string
    PD name [g] .
    A s p o [g] .   D s p o [g] .
    Z .                      end of a patch (Jena's RDFChanges.segment())

Decisions where the spec is open, following what Apache Jena's reader accepts:

* The terminating ``.`` is required on every row (Jena's reader requires it too).
* The reader is line based: one row per line, as the spec's preferred style and every
  known writer produce. Jena's tokenizer would also let a row span lines; we do not.
  A comment may follow the dot. Blank lines and ``#`` comment lines are skipped, CRLF
  line ends and a leading UTF-8 byte order mark are accepted, a stray CR is an error.
* Terms may be in any position (generalized statements), as in Jena; the text format
  has no options row to say otherwise, so a target that cannot store them decides.
* Rows outside a transaction are allowed (docs/design.md §2: they form an implicit transaction).
* A ``Z`` row ends a patch; at the end of the stream, content after the last ``Z`` forms
  a final patch. So the writer's ``Z`` after every patch, the last one included, reads
  back as exactly the patches written, and a Jena file without any ``Z`` is one patch.

Positions: ``offset`` is the byte offset of the row's line, ``frame`` is 0 and ``row`` is
the 1-based line number. The final ``PatchEnd`` (and an error found at the end of the
stream) points just past the input: the stream length and the next line number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from patchsync.codec.driver import PullDecoder
from patchsync.codec.term_decoder import RuleViolation, check_absolute_iri
from patchsync.errors import DecodeError, EncodeError, UsageError
from patchsync.events import (
    ROW_CODES,
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
from patchsync.options import Limits
from patchsync.terms import DEFAULT_GRAPH, IRI, TermAdapter, default_adapter
from patchsync.terms.ntriples import (
    BNODE_LABEL,
    IRI_EXCLUDED,
    PN_PREFIX,
    LazyPattern,
    TermSyntaxError,
    format_iri,
    format_string,
    format_term,
    scan_iriref,
    scan_string,
    scan_term,
    skip_ws,
)
from patchsync.units import KIND_OF, Kind, TransactionError, UnitTracker

T = TypeVar("T")

_BOM = b"\xef\xbb\xbf"
_IRI_CACHE_LIMIT = 4096

# The fast path: an A or D row of unescaped IRIs, blank nodes and literals, spaced the
# preferred way, which is nearly every row real writers produce. Anything else (escapes,
# quoted triples, comments, odd spacing, errors) takes the general scanner.
_PLAIN_TERM = (
    "(?:<(?!_:)([^" + IRI_EXCLUDED + "]*)>|_:(" + BNODE_LABEL + ')|"([^"\\\\\r\n]*)"'
    "(?:@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)|\\^\\^<(?!_:)([^" + IRI_EXCLUDED + "]*)>)?)"
)
_PLAIN_STATEMENT = LazyPattern(
    "[ \\t]*([AD])[ \\t]+" + "[ \\t]+".join([_PLAIN_TERM] * 3) + "(?:[ \\t]+" + _PLAIN_TERM + ")?[ \\t]*\\.[ \\t]*"
)
# Row codes (PatchCodes in Jena); TB is Jena's alternative spelling of TX.
_CODES = frozenset({"H", "TX", "TB", "TC", "TA", "PA", "PD", "A", "D", "Z"})
# The control rows: their kind for the transaction rules, their event and their name in errors.
_CONTROL: dict[str, tuple[Kind, type[TxStart | TxCommit | TxAbort | PatchEnd], str]] = {
    "TX": (Kind.TX, TxStart, "TX"),
    "TB": (Kind.TX, TxStart, "TB (TX)"),
    "TC": (Kind.TC, TxCommit, "TC"),
    "TA": (Kind.TA, TxAbort, "TA"),
    "Z": (Kind.PATCH_END, PatchEnd, "Z (end of patch)"),
}
_CHANGE = Kind.CHANGE


class RdfPatchTextReader(PullDecoder[Event], Generic[T]):
    """Reads RDF Patch text into :mod:`patchsync.events` (see the module docstring).

    ``adapter`` builds the terms (rdflib terms when omitted); ``source`` names the input
    in errors. ``limits.max_frame_bytes`` caps the length of one line,
    ``limits.max_nesting`` the quoted-triple depth, and ``limits.max_headers`` /
    ``limits.max_header_bytes`` the number of ``H`` rows in one patch and the length of
    one. After a ``DecodeError`` the reader stays failed and raises it again.
    """

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
        # Terms are built through this one: it refuses relative IRIs when the limit asks.
        self._builder: Any = _AbsoluteIris(self.adapter) if self.limits.require_absolute_iris else self.adapter
        self._buf = bytearray()
        self._start = 0  # index in _buf of the next unread line
        self._scan = 0  # index in _buf from which to look for the next newline
        self._base = 0  # stream offset of _buf[0]
        self._line = 1  # number of the next line
        self._closed = False
        self._units = UnitTracker()  # the transaction rules (patchsync.units)
        self._tx_line = 0  # line of the last TX, named in errors
        self._iris: dict[str, T] = {}
        self._headers = 0  # H rows since the last Z
        self.patches = 0

    # -- input ------------------------------------------------------------------------

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Give the reader more bytes of the stream."""
        if self._closed:
            raise UsageError("feed() after close()")
        self._buf += data

    def close(self) -> None:
        """Say that the stream is complete; a last line without a newline is then read."""
        self._closed = True

    @property
    def offset(self) -> int:
        """Byte offset just past the last line taken from the input."""
        return self._base + self._start

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (between ``TX`` and its ``TC`` / ``TA``)."""
        return self._units.in_transaction

    # -- output -----------------------------------------------------------------------

    def _advance(self) -> bool:
        line = self._next_line()
        if line is None:
            if not self._closed:
                return False
            self._finish()
            return True
        event = self._row(*line)
        if event is not None:
            self._queue.append(event)
        return True

    # -- lines ------------------------------------------------------------------------

    def _error(self, rule: str, offset: int, line: int) -> DecodeError:
        return DecodeError(rule, source=self.source, offset=offset, line=line)

    def _next_line(self) -> tuple[str, int, int] | None:
        """(text without its line end, stream offset, line number) of the next line."""
        buf = self._buf
        start = self._start
        nl = buf.find(b"\n", self._scan)
        if nl < 0:
            end = len(buf)
            if end - start > self.limits.max_frame_bytes:
                raise self._error(
                    f"line longer than the limit of {self.limits.max_frame_bytes} bytes", self._base + start, self._line
                )
            if not self._closed or end == start:
                self._scan = end
                return None
            stop = after = end
        else:
            stop, after = nl, nl + 1
            # The same limit when the whole line arrived in one piece (a large feed).
            if stop - start > self.limits.max_frame_bytes:
                raise self._error(
                    f"line longer than the limit of {self.limits.max_frame_bytes} bytes", self._base + start, self._line
                )
        offset = self._base + start
        number = self._line
        raw = buf[start:stop]
        self._start = self._scan = after
        self._line += 1
        if after > 1 << 16 and after * 2 > len(buf):
            # Drop consumed lines so that a long stream does not keep its whole prefix.
            del buf[:after]
            self._base += after
            self._start = self._scan = 0
        if offset == 0 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self._error(f"invalid UTF-8 at byte {exc.start} of the line", offset, number) from None
        if text.endswith("\r"):
            text = text[:-1]
        return text, offset, number

    def _finish(self) -> None:
        self._finished = True
        end = self._base + self._start
        patch_open = self._units.patch_open
        try:
            self._units.send(Kind.STREAM_END)
        except TransactionError as exc:
            raise self._error(
                f"{exc.text()}; the open transaction started on line {self._tx_line}", end, self._line
            ) from None
        if patch_open:
            self._queue.append(PatchEnd(end, 0, self._line))
            self.patches += 1

    # -- rows -------------------------------------------------------------------------

    def _row(self, text: str, offset: int, number: int) -> Event | None:
        try:
            return self._parse(text, offset, number)
        except TermSyntaxError as exc:
            raise self._error(f"{exc.message} (column {exc.pos + 1})", offset, number) from None
        except RuleViolation as exc:
            raise self._error(exc.rule, offset, number) from None
        except (ValueError, RecursionError) as exc:
            # The adapter refused a term (rdflib rejects some language tags, for one).
            raise self._error(f"term rejected by the term adapter: {exc}", offset, number) from None

    def _parse(self, line: str, offset: int, number: int) -> Event | None:
        m = _PLAIN_STATEMENT.pattern.fullmatch(line)
        if m is not None:
            return self._plain_statement(m, offset, number)
        pos = skip_ws(line, 0)
        n = len(line)
        if pos == n or line[pos] == "#":
            return None
        end = pos
        while end < n and line[end].isascii() and line[end].isalpha():
            end += 1
        code = line[pos:end]
        if not code or (end < n and (line[end].isalnum() or line[end] in "_-:")):
            # Up to the next space or tab: str.split() would also cut at \x1c-\x1f, which
            # IRIs and this reader do not take for spaces, and find nothing to quote.
            word = line[pos:].split(" ", 1)[0].split("\t", 1)[0][:20]
            raise TermSyntaxError(f"a row starts with a row code (H, TX, TC, TA, PA, PD, A, D, Z), not {word!r}", pos)
        if code not in _CODES:
            raise TermSyntaxError(f"unknown row code {code!r}", pos)
        if code == "A" or code == "D":
            terms, _ = self._terms(line, end, 3, 4, code)
            g = terms[3] if len(terms) == 4 else None
            self._units.send(_CHANGE)
            return (Add if code == "A" else Delete)(terms[0], terms[1], terms[2], g, offset, 0, number)
        if code == "H":
            self._headers += 1
            limits = self.limits
            if self._headers > limits.max_headers:
                raise TermSyntaxError(
                    f"more than {limits.max_headers} H rows in one patch (this reader's limit of header rows)", pos
                )
            size = len(line.encode("utf-8"))
            if size > limits.max_header_bytes:
                raise TermSyntaxError(
                    f"H row of {size} bytes exceeds this reader's limit of {limits.max_header_bytes} bytes", pos
                )
            pos = skip_ws(line, end)
            key, pos = self._keyword(line, pos, "a header key")
            terms, _ = self._terms(line, pos, 1, 1, "H")
            self._units.send(Kind.HEADER)
            return Header(key, terms[0], offset, 0, number)
        if code == "PA" or code == "PD":
            pos = skip_ws(line, end)
            name, pos = self._keyword(line, pos, "a prefix name")
            if code == "PD":
                terms, _ = self._terms(line, pos, 0, 1, code)
                self._units.send(_CHANGE)
                return PrefixDelete(name, None, terms[0] if terms else None, offset, 0, number)
            iri, pos = self._namespace(line, skip_ws(line, pos))
            terms, _ = self._terms(line, pos, 0, 1, code)
            self._units.send(_CHANGE)
            return PrefixAdd(name, iri, terms[0] if terms else None, offset, 0, number)
        self._terms(line, end, 0, 0, code)
        return self._control(code, offset, number)

    def _plain_statement(self, m: re.Match[str], offset: int, number: int) -> Event:
        # Groups per term: IRI, blank node label, lexical form, language, datatype.
        groups = m.groups()
        adapter = self.adapter
        builder = self._builder
        iris = self._iris
        terms: list[T | None] = []
        for i in range(1, 21, 5):
            iri, label, lex, lang, dt = groups[i : i + 5]
            if iri is not None:
                term = iris.get(iri)
                if term is None:
                    if len(iris) >= _IRI_CACHE_LIMIT:
                        iris.clear()
                    term = iris[iri] = builder.iri(iri)
                terms.append(term)
            elif label is not None:
                terms.append(adapter.bnode(label))
            elif lex is not None:
                terms.append(adapter.literal(lex, lang, dt))
            else:
                terms.append(None)  # the optional graph
        self._units.send(_CHANGE)
        kind = Add if groups[0] == "A" else Delete
        return kind(terms[0], terms[1], terms[2], terms[3], offset, 0, number)

    def _control(self, code: str, offset: int, number: int) -> Event:
        kind, event, name = _CONTROL[code]
        try:
            self._units.send(kind)
        except TransactionError as exc:
            raise self._error(
                f"{exc.text(name)}; the open transaction started on line {self._tx_line}"
                if kind is Kind.TX or kind is Kind.PATCH_END
                else exc.text(name),
                offset,
                number,
            ) from None
        if kind is Kind.TX:
            self._tx_line = number
        elif kind is Kind.PATCH_END:
            self._headers = 0
            self.patches += 1
        return event(offset, 0, number)

    def _terms(self, line: str, pos: int, low: int, high: int, what: str) -> tuple[list[T], int]:
        """Read ``low`` to ``high`` terms, then the terminating dot and the line's end."""
        terms: list[T] = []
        n = len(line)
        max_nesting = self.limits.max_nesting
        while True:
            pos = skip_ws(line, pos)
            if pos >= n or line[pos] == "#":
                raise TermSyntaxError("missing '.' at the end of the row (every row ends with a DOT)", pos)
            if line[pos] == "." and not line[pos + 1 : pos + 2].isdigit():
                break
            if len(terms) == high:
                raise TermSyntaxError(f"{what} row has too many terms (expected {_arity(low, high)})", pos)
            term, pos = scan_term(line, pos, self._builder, max_nesting=max_nesting)
            terms.append(term)
        if len(terms) < low:
            raise TermSyntaxError(f"{what} row has {len(terms)} terms (expected {_arity(low, high)})", pos)
        pos = skip_ws(line, pos + 1)
        if pos < n and line[pos] != "#":
            raise TermSyntaxError("unexpected text after the row's final '.' (one row per line)", pos)
        return terms, pos

    def _keyword(self, line: str, pos: int, what: str) -> tuple[str, int]:
        if line.startswith('"', pos):
            return scan_string(line, pos)
        m = PN_PREFIX.match(line, pos)
        if m is None:
            raise TermSyntaxError(f"expected {what}: a keyword or a quoted string", pos)
        return m.group(), m.end()

    def _namespace(self, line: str, pos: int) -> tuple[T, int]:
        # Jena writes the namespace as a quoted string; the spec's other example uses <iri>.
        if line.startswith('"', pos):
            value, pos = scan_string(line, pos)
        elif line.startswith("<", pos) and not line.startswith("<<", pos):
            value, pos, is_bnode = scan_iriref(line, pos)
            if is_bnode:
                raise TermSyntaxError("a PA namespace must be an IRI, not a blank node", pos)
        else:
            raise TermSyntaxError("expected the PA namespace as <iri> or a quoted string", pos)
        return self._builder.iri(value), pos


class _AbsoluteIris:
    """A term adapter that refuses relative IRIs (``Limits.require_absolute_iris``)."""

    def __init__(self, adapter: TermAdapter[Any]) -> None:
        self._iri = adapter.iri
        self.bnode = adapter.bnode
        self.literal = adapter.literal
        self.triple = adapter.triple
        self.default_graph = adapter.default_graph
        self.unpack = adapter.unpack

    def iri(self, value: str) -> Any:
        check_absolute_iri(value)
        return self._iri(value)


def _arity(low: int, high: int) -> str:
    return str(low) if low == high else f"{low} or {high}"


def read_rdfp(data: bytes | str, adapter: TermAdapter[Any] | None = None, *, source: str = "<stream>") -> list[Event]:
    """All events of a complete RDF Patch text; raises ``DecodeError`` on bad input."""
    if isinstance(data, str):
        # surrogatepass: a lone surrogate becomes invalid UTF-8, reported as a DecodeError.
        data = data.encode("utf-8", "surrogatepass")
    reader: RdfPatchTextReader[Any] = RdfPatchTextReader(adapter, source=source)
    reader.feed(data)
    reader.close()
    return list(reader)


class RdfPatchTextWriter(Generic[T]):
    """Writes events as RDF Patch text in the spec's preferred style.

    One row per line, single spaces, `` .`` terminator, prefix names quoted and namespaces
    as ``<iri>`` (as in the Jena-made test files), header keys bare when they are
    keywords. ``segments=True`` writes ``Z .`` at every ``PatchEnd``, the last one included,
    so that a tailing reader sees each patch end at once and the text reads back as the
    same list of patches; ``segments=False`` writes one flat patch (``PatchEnd`` writes
    nothing). The text format has no slot for the IRI a Jelly-Patch ``PD`` may carry, so
    it is dropped; a default-graph term is written by omitting the graph. ``Options``
    events are ignored. Transaction misuse raises :class:`EncodeError`, so the output
    always reads back.

    ``canonical=True`` says the terms are N-Triples strings as an ``NTriplesTerms`` builder
    made them (a decoder's output with that adapter): they are written as they are, not
    parsed and formatted again to the same text (for a large literal, most of the cost).
    """

    def __init__(
        self, adapter: TermAdapter[T] | None = None, *, segments: bool = True, canonical: bool = False
    ) -> None:
        self.adapter: TermAdapter[T] = adapter if adapter is not None else default_adapter()
        self.segments = segments
        self._canonical = canonical
        self._out: list[str] = []
        self._units = UnitTracker()  # the transaction rules (patchsync.units)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (between ``TX`` and its ``TC`` / ``TA``)."""
        return self._units.in_transaction

    def take(self) -> str:
        """The text produced since the previous ``take``."""
        text = "".join(self._out)
        self._out.clear()
        return text

    def send(self, event: Event) -> None:
        """Write one event."""
        if isinstance(event, (Add, Delete)):
            s, p, o = self._term(event.s), self._term(event.p), self._term(event.o)
            line = ROW_CODES[type(event)] + " " + s + " " + p + " " + o + self._graph(event.g) + " .\n"
        elif isinstance(event, Header):
            key = event.key if PN_PREFIX.fullmatch(event.key) else format_string(event.key)
            line = "H " + key + " " + self._term(event.value) + " .\n"
        elif isinstance(event, PrefixAdd):
            u = self.adapter.unpack(event.iri) if event.iri is not None else None
            if u is None or u[0] != IRI:
                raise EncodeError(f"PA {event.name!r} needs a namespace IRI, not {event.iri!r}")
            line = "PA " + format_string(event.name) + " " + format_iri(u[1]) + self._graph(event.g) + " .\n"
        elif isinstance(event, PrefixDelete):
            line = "PD " + format_string(event.name) + self._graph(event.g) + " .\n"
        elif isinstance(event, (TxStart, TxCommit, TxAbort)):
            line = _CONTROL_LINES[type(event)]
        elif isinstance(event, PatchEnd):
            line = "Z .\n" if self.segments else ""
        elif isinstance(event, Options):
            return
        else:
            raise EncodeError(f"not a patch event: {event!r}")
        # The row is checked against the transaction rules only once it could be written.
        try:
            self._units.send(KIND_OF[type(event)])
        except TransactionError as exc:
            raise EncodeError(exc.text()) from None
        if line:
            self._out.append(line)

    def _term(self, term: T) -> str:
        if self._canonical and isinstance(term, str):
            return term
        return format_term(self.adapter, term)

    def _graph(self, g: T | None) -> str:
        if g is None:
            return ""
        if self._canonical and isinstance(g, str):
            return " " + g if g else ""
        u = self.adapter.unpack(g)
        if u[0] == DEFAULT_GRAPH:
            return ""
        return " " + format_term(self.adapter, g)


_CONTROL_LINES: dict[type, str] = {kind: ROW_CODES[kind] + " .\n" for kind in (TxStart, TxCommit, TxAbort)}


def write_rdfp(
    events: Iterable[Event], adapter: TermAdapter[Any] | None = None, *, segments: bool = True, canonical: bool = False
) -> str:
    """RDF Patch text for ``events`` (see :class:`RdfPatchTextWriter`)."""
    writer: RdfPatchTextWriter[Any] = RdfPatchTextWriter(adapter, segments=segments, canonical=canonical)
    for event in events:
        writer.send(event)
    return writer.take()
