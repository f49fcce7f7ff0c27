"""File adapters for RDF datasets: Jelly-RDF (``.jelly``) and the text formats.

Used by ``patchsync convert`` and ``patchsync inspect``. Statements travel between formats
as N-Triples term strings (:class:`~patchsync.terms.ntriples.NTriplesTerms`), which keep
lexical forms and blank node labels exactly, and can hold RDF-star and generalized
statements. N-Triples and N-Quads are read and written by patchsync itself (rdflib reads
neither quoted triples nor generalized statements); Turtle and TriG go through rdflib.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from patchsync import formats
from patchsync._proto import rdf_pb2
from patchsync.codec import jena
from patchsync.codec.framing import Framer
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.errors import DecodeError, FormatError, UsageError
from patchsync.events import (
    FrameEnd,
    GraphStart,
    LogicalType,
    Namespace,
    PhysicalType,
    RdfOptions,
    Statement,
    StreamOptions,
)
from patchsync.options import Limits
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, Unpacked
from patchsync.terms.ntriples import NTriplesTerms

__all__ = [
    "RDF_FORMATS",
    "RdfContent",
    "binary_summary",
    "convert_rdf",
    "jelly_summary",
    "nquads_lines",
    "nt_quads",
    "rdf_format_of",
    "read_rdf_bytes",
    "read_rdf_quads",
    "turtle_lines",
    "write_jelly",
]

#: RDF formats ``convert`` reads and writes, by file extension (from :mod:`patchsync.formats`).
RDF_FORMATS = {suffix: f.name for f in formats.with_role(formats.RDF_CONVERT) for suffix in f.suffixes}

_NT = NTriplesTerms()
_DEFAULT = _NT.default_graph()

Quad = tuple[str, str, str, str | None]


def rdf_format_of(path: str | os.PathLike[str], given: str | None = None) -> str | None:
    """The RDF format named by ``given`` or by the extension; ``None`` if it is not one."""
    found = formats.find(path, given, formats.RDF_CONVERT)
    return found.name if found is not None else None


# -- reading ----------------------------------------------------------------------------


def _rdflib_name(fmt: str) -> str:
    found = formats.by_name(fmt)
    assert found is not None and found.rdflib_name is not None, fmt
    return found.rdflib_name


def _nt_term(u: Unpacked, unpack: Any) -> str:
    """An rdflib term (already unpacked) as an N-Triples string."""
    kind = u[0]
    if kind == TRIPLE:
        return _NT.triple(*(_nt_term(unpack(t), unpack) for t in u[1:]))
    if kind == LITERAL:
        return _NT.literal(u[1], u[2], u[3])
    if kind == BNODE:
        return _NT.bnode(u[1])
    if len(u) == 1:
        return _DEFAULT
    return _NT.iri(u[1])


def _read_turtle_family(data: bytes, fmt: str, source: str) -> tuple[list[Quad], list[tuple[str, str]]]:
    # rdflib's parser with patchsync's hooks (:mod:`.rdf_labels`): labels and lexical forms as
    # written, so a TriG file gives the terms the same data gives as N-Quads. Imported here:
    # rdflib is slow to import and most commands never read Turtle.
    from patchsync.logs.rdf_labels import read_turtle_family

    found = read_turtle_family(data, _rdflib_name(fmt), source, Path(source).resolve().as_uri())
    return nt_quads(found.quads), [(prefix, str(iri)) for prefix, iri in found.prefixes.items() if prefix]


def nt_quads(quads: Iterable[tuple[Any, Any, Any, Any]]) -> list[Quad]:
    """rdflib quads (``g`` ``None`` in the default graph) as N-Triples strings."""
    from patchsync.terms.rdflib_adapter import RdflibTerms

    unpack = RdflibTerms().unpack
    return [
        (
            _nt_term(unpack(s), unpack),
            _nt_term(unpack(p), unpack),
            _nt_term(unpack(o), unpack),
            None if g is None else _nt_term(unpack(g), unpack),
        )
        for s, p, o, g in quads
    ]


def _decode_jelly(data: bytes, source: str, limits: Limits | None) -> Iterator[Any]:
    decoder: RdfDecoder[str] = RdfDecoder(_NT, source=source, limits=limits)
    decoder.feed(data)
    decoder.close()
    return iter(decoder)


def _term_features(term: str, position: str) -> tuple[bool, bool]:
    """(RDF-star, generalized) for one N-Triples term string in ``position`` (s, p, o, g)."""
    if term.startswith("<<"):
        u = _NT.unpack(term)
        star, generalized = True, position in "pg"
        for inner, pos in zip(u[1:], "spo", strict=True):
            _, inner_generalized = _term_features(inner, pos)
            generalized = generalized or inner_generalized
        return star, generalized
    first = term[:1]
    if position == "p":
        return False, first != "<"
    if position in "sg":
        return False, first == '"'
    return False, False


def _features(quads: Iterable[Quad]) -> tuple[bool, bool, bool]:
    """Whether statements use named graphs, RDF-star, generalized positions."""
    named = star = generalized = False
    for s, p, o, g in quads:
        terms = ((s, "s"), (p, "p"), (o, "o"), (g, "g")) if g else ((s, "s"), (p, "p"), (o, "o"))
        named = named or bool(g)
        for term, position in terms:
            term_star, term_generalized = _term_features(term, position)
            star = star or term_star
            generalized = generalized or term_generalized
    return named, star, generalized


# -- writing -----------------------------------------------------------------------------


def nquads_lines(quads: Iterable[Quad], with_graphs: bool) -> Iterator[str]:
    for s, p, o, g in quads:
        if g and g != _DEFAULT:
            if not with_graphs:
                raise UsageError(f"a statement in graph {g} cannot be written to N-Triples or Turtle: use .nq or .trig")
            yield f"{s} {p} {o} {g} .\n"
        else:
            yield f"{s} {p} {o} .\n"


#: A Turtle prefix name (``PN_PREFIX``, or empty); other namespace names are not written.
_PREFIX_NAME = re.compile(r"(?:[^\W\d_](?:[\w.-]*[\w-])?)?")


def turtle_lines(quads: list[Quad], namespaces: Iterable[tuple[str, str]], fmt: str) -> Iterator[str]:
    """Turtle or TriG in the subset the file target writes: prefixes, then one triple per
    line, each named graph as a block. N-Triples terms are Turtle terms, so blank node labels
    and lexical forms reach the file as read (rdflib's serializer renames blank nodes)."""
    _, star, generalized = _features(quads)
    if star or generalized:
        raise UsageError(f"{fmt} cannot hold RDF-star or generalized statements: write .nq or .jelly")
    for name, iri in namespaces:
        if _PREFIX_NAME.fullmatch(name):
            yield f"@prefix {name}: {_NT.iri(iri)} .\n"
    by_graph: dict[str | None, list[str]] = {}
    for s, p, o, g in quads:
        graph = g if g and g != _DEFAULT else None
        if graph is not None and fmt != "trig":
            raise UsageError(f"a statement in graph {graph} cannot be written to N-Triples or Turtle: use .nq or .trig")
        by_graph.setdefault(graph, []).append(f"{s} {p} {o} .\n")
    for graph, triples in by_graph.items():
        if graph is None:
            yield from triples
        else:
            yield f"{graph} {{\n"
            yield from ("  " + t for t in triples)
            yield "}\n"


class RdfContent:
    """What an RDF file holds: statements as N-Triples strings (``g`` is ``None`` in the
    default graph) grouped in frames (one frame unless the input is Jelly-RDF), the
    namespaces it declared as ``(prefix, IRI)``, and Jelly-RDF's stream options."""

    __slots__ = ("frames", "namespaces", "options")

    def __init__(
        self, frames: list[list[Quad]], namespaces: list[tuple[str, str]], options: RdfOptions | None = None
    ) -> None:
        self.frames = frames
        self.namespaces = namespaces
        self.options = options

    @property
    def quads(self) -> list[Quad]:
        """Every statement, frames joined."""
        return [q for frame in self.frames for q in frame]


def read_rdf_bytes(data: bytes, fmt: str, *, source: str = "<stream>", limits: Limits | None = None) -> RdfContent:
    """Read a whole RDF file of any ``convert`` format (:data:`RDF_FORMATS`) held in memory.

    Blank node labels and lexical forms are kept as written wherever the format keeps them
    (``Format.keeps_labels``): all of them. Turtle and TriG go through rdflib's parser with
    :mod:`patchsync.logs.rdf_labels`' hooks, which also leave literals unnormalized; a blank
    node written without a label gets ``anon<n>`` by its order in the file. Raises :class:`DecodeError` for bad input.
    """
    options: RdfOptions | None = None
    namespaces: list[tuple[str, str]] = []
    frames: list[list[Quad]]
    if fmt == "jelly":
        frames, current = [], []
        for event in _decode_jelly(data, source, limits):
            kind = type(event)
            if kind is Statement:
                current.append((event.s, event.p, event.o, event.g or None))
            elif kind is FrameEnd:
                frames.append(current)
                current = []
            elif kind is StreamOptions:
                options = event.options
            elif kind is Namespace:
                namespaces.append((event.name, _NT.unpack(event.iri)[1]))
        if not frames or current:
            frames.append(current)
    elif fmt in ("nt", "nq"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not UTF-8 text: {exc.reason}", source=source, offset=exc.start) from None
        frames = [[(s, p, o, g or None) for s, p, o, g in read_statements(text, _NT, source=source)]]
    elif fmt in ("ttl", "trig"):  # through rdflib's parser
        quads, namespaces = _read_turtle_family(data, fmt, source)
        frames = [quads]
    elif fmt in jena.FORMATS:
        statements, declared = jena.read_dataset(fmt, data, _NT, source=source, limits=limits)
        frames = [statements]
        namespaces = [(name, _NT.unpack(iri)[1]) for name, iri in declared]
    else:
        raise FormatError(
            f"unknown RDF format {fmt!r} (expected one of: {', '.join(formats.names(formats.RDF_CONVERT))})"
        )
    return RdfContent(frames, namespaces, options)


def read_rdf_quads(path: str | os.PathLike[str], fmt: str | None = None, *, limits: Limits | None = None) -> RdfContent:
    """Read the RDF file at ``path`` (format named by ``fmt`` or by its extension; any
    format with the ``convert`` role) into quads: the one reader of RDF files by format,
    for ``convert``, ``--base`` snapshots and anything else that loads RDF data.

    Raises :class:`FormatError` when the format is not known and :class:`DecodeError`
    (naming the file) for bad input.
    """
    found = formats.require(path, fmt, formats.RDF_CONVERT, "RDF")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return read_rdf_bytes(data, found.name, source=str(path), limits=limits)


def convert_rdf(
    data: bytes,
    in_fmt: str,
    out: IO[bytes],
    out_fmt: str,
    *,
    source: str = "<stream>",
    physical: str | None = None,
    frame_rows: int | None = None,
    limits: Limits | None = None,
) -> int:
    """Convert ``data`` from ``in_fmt`` to ``out_fmt`` (see :data:`RDF_FORMATS`); returns
    the number of statements written.

    Jelly to Jelly keeps the input's options (except ``physical``) and its frames. A text
    input written as Jelly gets TRIPLES or QUADS (whether it names graphs) unless
    ``physical`` (``triples``, ``quads``, ``graphs``) says otherwise, and declares RDF-star
    and generalized statements exactly when they occur.
    """
    content = read_rdf_bytes(data, in_fmt, source=source, limits=limits)
    options, namespaces, frames = content.options, content.namespaces, content.frames
    every = [q for frame in frames for q in frame]
    if out_fmt == "jelly":
        write_jelly(frames, namespaces, out, options=options, physical=physical, frame_rows=frame_rows)
    elif out_fmt in ("nt", "nq"):
        buffer: list[str] = []
        for line in nquads_lines(every, out_fmt == "nq"):
            buffer.append(line)
            if len(buffer) >= 4096:
                out.write("".join(buffer).encode("utf-8"))
                buffer.clear()
        out.write("".join(buffer).encode("utf-8"))
    elif out_fmt in ("ttl", "trig"):
        out.write("".join(turtle_lines(every, namespaces, out_fmt)).encode("utf-8"))
    elif out_fmt in jena.FORMATS:
        out.write(write_rdf_binary(out_fmt, every, namespaces))
    else:
        raise FormatError(f"unknown RDF format {out_fmt!r}")
    return len(every)


def write_jelly(
    frames: Iterable[Iterable[Quad]],
    namespaces: Iterable[tuple[str, str]],
    out: IO[bytes],
    *,
    options: RdfOptions | None = None,
    physical: str | None = None,
    frame_rows: int | None = None,
) -> None:
    """Write statements (N-Triples strings, grouped in frames) as Jelly-RDF.

    ``options`` (a Jelly input's) are kept except ``physical``; without them the stream gets
    TRIPLES or QUADS (whether a statement names a graph) and declares RDF-star and generalized
    statements exactly when they occur. ``namespaces`` are ``(prefix, IRI)``.
    """
    held = [list(frame) for frame in frames]
    declared = list(namespaces)
    named, star, generalized = _features(q for frame in held for q in frame)
    chosen = (physical or ("quads" if named else "triples")).upper()
    grouped = options is not None and options.grouped
    base = options or RdfOptions()
    options = RdfOptions(
        physical_type=PhysicalType[chosen],
        logical_type=base.logical_type if options is not None else LogicalType.UNSPECIFIED,
        generalized_statements=base.generalized_statements or generalized,
        rdf_star=base.rdf_star or star,
        max_name_table_size=base.max_name_table_size,
        max_prefix_table_size=base.max_prefix_table_size,
        max_datatype_table_size=base.max_datatype_table_size,
        stream_name=base.stream_name,
        version=2 if declared else base.version,
    )
    encoder: RdfEncoder[str] = RdfEncoder(options, _NT, max_frame_rows=frame_rows or 1024)
    for name, iri in declared:
        encoder.namespace(name, _NT.iri(iri))
    for frame in held:
        for s, p, o, g in frame:
            encoder.statement(s, p, o, g)
            if encoder.pending_bytes() >= 1 << 20:
                out.write(encoder.take())
        if grouped:
            encoder.end_frame()
    encoder.finish()
    out.write(encoder.take())


def write_rdf_binary(fmt: str, quads: Iterable[Quad], namespaces: Iterable[tuple[str, str]]) -> bytes:
    """Quads of N-Triples strings (``g`` ``None`` or ``""`` for the default graph) as Jena's
    RDF Thrift or RDF Protobuf, with prefixed names where Jena's own writer uses them."""
    found = jena.lookup(fmt)
    return jena.encode_statements(
        fmt,
        ((s, p, o, g or None) for s, p, o, g in quads),
        _NT,
        namespaces=[(name, _NT.iri(iri)) for name, iri in namespaces],
        prefixed_names=found.jena_prefixed_names,
    )


# -- inspect -----------------------------------------------------------------------------


def jelly_summary(data: bytes, source: str, limits: Limits | None = None) -> dict[str, Any]:
    """Validate a Jelly-RDF stream and summarize it (options, frames, rows, lookups)."""
    options: RdfOptions | None = None
    statements = graphs = namespaces = 0
    frames = 0
    for event in _decode_jelly(data, source, limits):
        kind = type(event)
        if kind is Statement:
            statements += 1
        elif kind is FrameEnd:
            frames += 1
        elif kind is StreamOptions:
            options = event.options
        elif kind is Namespace:
            namespaces += 1
        elif kind is GraphStart:
            graphs += 1
    # Lookup rows are encoding, not content: count them straight from the frames.
    rows: Counter[str] = Counter()
    framer = Framer(source=source)
    framer.feed(data)
    framer.close()
    metadata: dict[str, str] = {}
    while (item := framer.next_frame()) is not None:
        frame = rdf_pb2.RdfStreamFrame.FromString(item[1])
        for row in frame.rows:
            rows[row.WhichOneof("row") or "empty"] += 1
        for key, value in frame.metadata.items():
            # Metadata is bytes; shown as text where it is UTF-8 (a snapshot's position is JSON).
            metadata.setdefault(key, value.decode("utf-8", errors="backslashreplace"))
    summary: dict[str, Any] = {
        "file": source,
        "format": "jelly",
        "bytes": len(data),
        "frames": frames,
        "statements": statements,
        "graph_starts": graphs,
        "namespaces": namespaces,
        "rows": dict(sorted(rows.items())),
    }
    if metadata:
        summary["metadata"] = metadata
    if options is not None:
        summary["options"] = {
            "physical_type": options.physical_type.name,
            "logical_type": options.logical_type,
            "grouped": options.grouped,
            "generalized_statements": options.generalized_statements,
            "rdf_star": options.rdf_star,
            "max_name_table_size": options.max_name_table_size,
            "max_prefix_table_size": options.max_prefix_table_size,
            "max_datatype_table_size": options.max_datatype_table_size,
            "stream_name": options.stream_name,
            "version": options.version,
        }
    return summary


#: Names of term kinds in :func:`binary_summary`, by the kind :meth:`NTriplesTerms.unpack` gives.
_TERM_KINDS = {IRI: "iri", BNODE: "bnode", TRIPLE: "triple_term", DEFAULT_GRAPH: "default_graph"}


def _term_kind(term: str) -> str:
    u = _NT.unpack(term)
    if u[0] == LITERAL:
        return "literal_lang" if u[2] else "literal_typed" if u[3] else "literal_simple"
    return _TERM_KINDS[u[0]]


def binary_summary(data: bytes, fmt: str, source: str, limits: Limits | None = None) -> dict[str, Any]:
    """Validate an RDF Thrift or RDF Protobuf stream and summarize it: rows by kind
    (``triple``, ``quad``, ``prefix``), the prefixes declared, and the kinds of the terms
    in each position (``s``, ``p``, ``o``, ``g``; a quad's default graph is ``default_graph``)."""
    rows: Counter[str] = Counter()
    terms: dict[str, Counter[str]] = {position: Counter() for position in "spog"}
    prefixes: dict[str, str] = {}
    for event in jena.decode_bytes(fmt, data, _NT, source=source, limits=limits):
        if type(event) is Statement:
            rows["triple" if event.g is None else "quad"] += 1
            for position, term in zip("spog", event[:4], strict=True):
                if term is not None:
                    terms[position][_term_kind(term)] += 1
        elif type(event) is Namespace:
            rows["prefix"] += 1
            prefixes[event.name] = _NT.unpack(event.iri)[1]
    return {
        "file": source,
        "format": jena.lookup(fmt).name,
        "bytes": len(data),
        "statements": rows["triple"] + rows["quad"],
        "rows": dict(sorted(rows.items())),
        "prefixes": prefixes,
        "terms": {position: dict(sorted(kinds.items())) for position, kinds in terms.items() if kinds},
    }
