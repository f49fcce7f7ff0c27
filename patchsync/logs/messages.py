"""RDF Message Logs: read and write a sequence of RDF Messages (docs/design.md §8).

An RDF Message (the RDF Messages draft, <https://w3c-cg.github.io/rsp/spec/messages>) is a dataset meant to be
taken whole; a message log holds them in order. Here a message is a list of quads of
N-Triples strings (``g`` is ``None`` in the default graph), as everywhere in :mod:`.rdf_files`,
so terms reach the output exactly as read. The formats (``formats.MESSAGES``):

- N-Triples, N-Quads, Turtle and TriG in message mode: a ``# @message`` comment line ends a
  message (:mod:`patchsync.codec.messages` cuts the text; the formats' own readers parse
  each piece). Turtle and TriG directives hold from where they appear to the end of the log,
  as in a plain document, so a message log stays a valid document of its format.
- Jelly-RDF: one frame is one message; an empty message is an empty frame.
- NDJSON-LD and YAML-LD (:mod:`.messages_json`): one JSON-LD document a line, or a YAML
  document, per message.

Blank nodes are scoped to their message. Readers keep labels as written, so a message log
written again as a message log keeps them; :func:`scope_labels` renames them apart (``_:x``
in message 3 becomes ``_:m3_x``) where messages are merged into one dataset.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from patchsync import formats
from patchsync.codec.messages import DELIMITER_LINE, split_messages
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.errors import DecodeError, FormatError, UsageError
from patchsync.events import FrameEnd, LogicalType, Namespace, RdfOptions, Statement
from patchsync.logs.rdf_files import nquads_lines, nt_quads, turtle_lines, write_jelly
from patchsync.options import Limits
from patchsync.terms.ntriples import NTriplesTerms

__all__ = [
    "Message",
    "MessageReader",
    "Quad",
    "convert_messages",
    "message_summary",
    "scope_labels",
    "write_messages",
]

Quad = tuple[str, str, str, str | None]
#: One RDF Message: its quads, in the order read.
Message = list[Quad]

_NT = NTriplesTerms()
_DEFAULT = _NT.default_graph()


class MessageReader:
    """The messages of a whole message log held in memory, in order, read lazily.

    Iterating yields each message (a :data:`Message`); :attr:`namespaces` holds the
    ``(prefix, IRI)`` pairs declared so far. A malformed message raises :class:`DecodeError`
    naming the source, the message number (from 1) and the line of the file; the messages
    before it have been yielded.
    """

    def __init__(self, data: bytes, fmt: str, *, source: str = "<stream>", limits: Limits | None = None) -> None:
        found = formats.get(fmt)
        if formats.MESSAGES not in found.roles:
            raise FormatError(
                f"{source}: {found.name} cannot hold a message log "
                f"(expected one of: {', '.join(formats.names(formats.MESSAGES))})"
            )
        self.data = data
        self.fmt = found.name
        self.source = source
        self.limits = limits
        self.namespaces: list[tuple[str, str]] = []

    def __iter__(self) -> Iterator[Message]:
        if self.fmt == "jelly":
            return self._jelly()
        if self.fmt in ("nt", "nq"):
            return self._nquads()
        if self.fmt in ("ttl", "trig"):
            return self._turtle()
        from patchsync.logs.messages_json import read_json_messages

        return read_json_messages(self._text(), self.fmt, self.source)

    def _text(self) -> str:
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not UTF-8 text: {exc.reason}", source=self.source, offset=exc.start) from None

    def _jelly(self) -> Iterator[Message]:
        decoder: RdfDecoder[str] = RdfDecoder(_NT, source=self.source, limits=self.limits)
        decoder.feed(self.data)
        decoder.close()
        current: Message = []
        for event in decoder:
            kind = type(event)
            if kind is Statement:
                assert isinstance(event, Statement)
                current.append((event.s, event.p, event.o, event.g or None))
            elif kind is FrameEnd:
                yield current
                current = []
            elif kind is Namespace:
                assert isinstance(event, Namespace)
                self.namespaces.append((event.name, _NT.unpack(event.iri)[1]))

    def _nquads(self) -> Iterator[Message]:
        number = 0
        for piece in split_messages(self._text()):
            try:
                quads = read_statements(piece.text, _NT, source=self.source)
            except DecodeError as exc:
                line = None if exc.line is None else piece.line + exc.line - 1
                raise DecodeError(exc.rule, source=self.source, message=number + 1, line=line) from None
            if self.fmt == "nt":
                named = next((i for i, q in enumerate(quads) if q[3] is not None), None)
                if named is not None:
                    line = piece.line + _statement_line(piece.text, named)
                    raise DecodeError(
                        "an N-Triples message cannot name a graph (use .nq)",
                        source=self.source,
                        message=number + 1,
                        line=line,
                    )
            if piece.leading and not quads:
                continue
            number += 1
            yield [(s, p, o, g or None) for s, p, o, g in quads]

    def _turtle(self) -> Iterator[Message]:
        from patchsync.logs.rdf_labels import read_turtle_family

        rdflib_name = formats.get(self.fmt).rdflib_name
        assert rdflib_name is not None
        base: str | None = Path(self.source).resolve().as_uri()
        prefixes: dict[str, str] = {}
        number = 0
        for piece in split_messages(self._text()):
            # The directives read so far, on one line before the piece: a directive holds
            # from where it appears to the end of the log.
            prologue = " ".join(f"@prefix {name}: {_NT.iri(iri)} ." for name, iri in prefixes.items())
            try:
                found = read_turtle_family(
                    (prologue + "\n" + piece.text).encode("utf-8"), rdflib_name, self.source, base or ""
                )
            except DecodeError as exc:
                line = None if exc.line is None else piece.line + max(exc.line - 2, 0)
                raise DecodeError(exc.rule, source=self.source, message=number + 1, line=line) from None
            except FormatError as exc:
                rule = str(exc).removeprefix(f"{self.source}: ")
                raise DecodeError(rule, source=self.source, message=number + 1, line=piece.line) from None
            for name, iri in found.prefixes.items():
                if prefixes.get(name) != str(iri):
                    prefixes[name] = str(iri)
                    if name:
                        self.namespaces.append((name, str(iri)))
            base = found.base
            if piece.leading and not found.quads:
                continue
            number += 1
            yield nt_quads(found.quads)


def _statement_line(text: str, index: int) -> int:
    """The line (from 0) of the ``index``-th statement of N-Triples ``text``."""
    seen = -1
    for number, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            seen += 1
            if seen == index:
                return number
    return 0


# -- writing -----------------------------------------------------------------------------


def write_messages(
    messages: Iterable[Sequence[Quad]],
    out: IO[bytes],
    fmt: str,
    *,
    namespaces: Iterable[tuple[str, str]] = (),
    frame_rows: int | None = None,
) -> int:
    """Write ``messages`` to ``out`` as a message log in ``fmt``; returns how many.

    Text formats put ``# @message`` before every message (so empty messages anywhere are
    kept) and declare ``namespaces`` once, at the top; Jelly-RDF writes one frame a message
    (a GRAPHS or DATASETS stream). Blank node labels are written as given: each message is
    its own scope.
    """
    found = formats.get(fmt)
    if formats.MESSAGES not in found.roles:
        raise FormatError(f"{found.name} cannot hold a message log")
    held = [list(m) for m in messages]
    declared = list(namespaces)
    if found.name == "jelly":
        if held:
            named = any(q[3] and q[3] != _DEFAULT for m in held for q in m)
            logical = LogicalType.DATASETS if named else LogicalType.GRAPHS
            write_jelly(held, declared, out, options=RdfOptions(logical_type=logical), frame_rows=frame_rows)
        return len(held)
    if found.name in ("ndjsonld", "yamlld"):
        from patchsync.logs.messages_json import write_json_messages

        out.write(write_json_messages(held, found.name).encode("utf-8"))
        return len(held)
    chunks: list[str] = []
    if found.name in ("ttl", "trig"):
        chunks.extend(turtle_lines([], declared, found.name))
    for message in held:
        chunks.append(DELIMITER_LINE)
        if found.name in ("ttl", "trig"):
            chunks.extend(turtle_lines(message, (), found.name))
        else:
            chunks.extend(nquads_lines(message, found.name == "nq"))
        if len(chunks) >= 4096:
            out.write("".join(chunks).encode("utf-8"))
            chunks.clear()
    out.write("".join(chunks).encode("utf-8"))
    return len(held)


# -- blank node scope --------------------------------------------------------------------


def _scoped(term: str, prefix: str) -> str:
    if term.startswith("_:"):
        return f"_:{prefix}{term[2:]}"
    if term.startswith("<<"):
        u = _NT.unpack(term)
        return _NT.triple(*(_scoped(t, prefix) for t in u[1:]))
    return term


def scope_labels(messages: Iterable[Sequence[Quad]], *, tag: str = "") -> Iterator[Message]:
    """The messages with blank node labels made distinct across messages.

    Every label of message ``n`` (from 1) gets the prefix ``<tag>m<n>_``: ``_:x`` in two
    messages becomes two nodes, and no renamed label can equal another (the number ends at the
    first ``_``; ``tag``, if given, must not contain ``m``). For merging messages into one
    dataset; a message log written as a message log keeps its labels, since each message is
    its own scope there.
    """
    for number, message in enumerate(messages, start=1):
        prefix = f"{tag}m{number}_"
        yield [
            (_scoped(s, prefix), _scoped(p, prefix), _scoped(o, prefix), None if g is None else _scoped(g, prefix))
            for s, p, o, g in message
        ]


# -- convert and inspect -----------------------------------------------------------------


def convert_messages(
    data: bytes,
    in_fmt: str,
    out: IO[bytes],
    out_fmt: str,
    *,
    source: str = "<stream>",
    in_messages: bool = True,
    out_messages: bool = True,
    frame_rows: int | None = None,
    limits: Limits | None = None,
) -> int:
    """Convert between message logs and plain RDF files; returns the messages read.

    The whole input is read (and so validated) before a byte is written. With ``in_messages``
    the input is a message log, else one message; with ``out_messages`` the output is a
    message log, else one dataset, the messages merged with :func:`scope_labels`.
    """
    if in_messages:
        reader = MessageReader(data, in_fmt, source=source, limits=limits)
        messages = list(reader)
        namespaces = reader.namespaces
    else:
        from patchsync.logs.rdf_files import read_rdf_bytes

        content = read_rdf_bytes(data, in_fmt, source=source, limits=limits)
        messages, namespaces = [content.quads], content.namespaces
    if out_messages:
        write_messages(messages, out, out_fmt, namespaces=namespaces, frame_rows=frame_rows)
        return len(messages)
    if formats.get(out_fmt).messages_only:
        raise UsageError(f"{out_fmt} is always a message log")
    from patchsync.logs.rdf_files import convert_rdf

    merged = [q for m in scope_labels(messages) for q in m]
    # Plain N-Quads of the merged dataset, converted on by the plain converter.
    plain = "".join(nquads_lines(merged, True)).encode("utf-8")
    convert_rdf(plain, "nq", out, out_fmt, source=source, frame_rows=frame_rows)
    return len(messages)


def message_summary(data: bytes, fmt: str, source: str, limits: Limits | None = None) -> dict[str, Any]:
    """Validate a message log and summarize it: messages, statements and message sizes."""
    reader = MessageReader(data, fmt, source=source, limits=limits)
    sizes = [len(message) for message in reader]
    summary: dict[str, Any] = {
        "file": source,
        "format": formats.get(fmt).name,
        "bytes": len(data),
        "messages": len(sizes),
        "statements": sum(sizes),
        "empty_messages": sizes.count(0),
    }
    if sizes:
        summary["message_size"] = {"min": min(sizes), "median": statistics.median(sizes), "max": max(sizes)}
    return summary
