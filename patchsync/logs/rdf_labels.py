"""RDF files read keeping their blank node labels (N-Quads, N-Triples, TriG, Turtle, and
Jena's RDF Thrift and RDF Protobuf).

RDF Patch names blank nodes by label: labels are system identifiers (docs/design.md §1, "blank node
labels"). A patch computed from a file therefore only applies to a copy of that file when
both are read with the labels as written; rdflib's parsers mint fresh labels per document.

N-Quads and N-Triples go through patchsync's own line reader. Turtle and TriG go through
rdflib's Notation3 parser with two hooks: a ``_:label`` becomes ``BNode(label)``, and a
blank node written without a label (``[]``, ``[ ... ]``, a list) gets ``anon<n>`` by its
order in the document, so the same bytes always give the same labels. A file that also
writes such a label itself is refused: one of the two labels could not be kept. RDF Thrift
and RDF Protobuf go through patchsync's decoder (:mod:`patchsync.codec.jena`), whose blank
nodes carry the labels written in the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import rdflib
from rdflib import BNode, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.plugins.parsers.notation3 import BadSyntax, RDFSink, SinkParser
from rdflib.plugins.parsers.trig import TrigSinkParser

from patchsync import formats
from patchsync.codec import jena
from patchsync.codec.nquads import read_statements
from patchsync.errors import DecodeError, FormatError
from patchsync.terms import TripleTerm
from patchsync.terms.rdflib_adapter import RdflibTerms

#: Formats read keeping labels, by extension, as rdflib names them.
LABELLED_FORMATS = {
    suffix: f.rdflib_name
    for f in formats.with_role(formats.FILE_TARGET)
    if f.keeps_labels and f.rdflib_name
    for suffix in f.suffixes
}

#: RDF Binary formats (also read keeping labels), by extension, as the format registry names them.
BINARY_FORMATS = {
    suffix: f.name for f in formats.FORMATS if f.keeps_labels and f.name in jena.FORMATS for suffix in f.suffixes
}

#: Labels given to blank nodes written without one: this prefix and a counter.
UNLABELLED_PREFIX = "anon"

Quad = tuple[Any, Any, Any, Any]


class LabelledRdf:
    """What :func:`read_labelled` found: quads (``g`` is ``None`` in the default graph),
    the prefixes the file declared and, for Turtle and TriG, the base IRI in force at its end."""

    __slots__ = ("base", "prefixes", "quads")

    def __init__(self, quads: list[Quad], prefixes: dict[str, URIRef], base: str | None = None) -> None:
        self.quads = quads
        self.prefixes = prefixes
        self.base = base


def read_labelled(path: str | os.PathLike[str], fmt: str | None = None) -> LabelledRdf:
    """Read ``path`` (format from ``fmt`` or its extension) keeping blank node labels.

    Raises :class:`DecodeError` for malformed input (naming the file and line) and
    :class:`FormatError` for a format without labels or a label that cannot be kept.
    """
    source = str(path)
    suffix = Path(path).suffix.lower()
    fmt = fmt or LABELLED_FORMATS.get(suffix) or BINARY_FORMATS.get(suffix, "")
    if fmt in BINARY_FORMATS.values():
        return _read_binary(Path(path).read_bytes(), fmt, source)
    if fmt not in LABELLED_FORMATS.values():
        kept = ", ".join([*LABELLED_FORMATS, *BINARY_FORMATS])
        raise FormatError(f"{source}: blank node labels are kept for {kept} files only")
    data = Path(path).read_bytes()
    if fmt in ("turtle", "trig"):
        return read_turtle_family(data, fmt, source, Path(path).resolve().as_uri())
    text = _text(data, source)
    if fmt in ("nt", "nquads"):
        adapter: Any = RdflibTerms()
        quads = read_statements(text, adapter, source=source)
        if fmt == "nt" and any(g is not None for *_, g in quads):
            raise DecodeError("an N-Triples file cannot name a graph (use .nq)", source=source)
        if any(type(t) is TripleTerm for q in quads for t in q):
            raise FormatError(f"{source}: quoted triples cannot be held in rdflib (it has no RDF-star terms)")
        return LabelledRdf(list(quads), {})
    raise AssertionError(fmt)  # every labelled format is handled above


def _text(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8 text ({exc.reason})", source=source, offset=exc.start) from None


def _read_binary(data: bytes, fmt: str, source: str) -> LabelledRdf:
    """An RDF Thrift or RDF Protobuf file: the decoder's blank nodes keep their labels."""
    adapter: Any = RdflibTerms()
    statements, declared = jena.read_dataset(fmt, data, adapter, source=source)
    if any(type(t) is TripleTerm for q in statements for t in q):
        raise FormatError(f"{source}: quoted triples cannot be held in rdflib (it has no RDF-star terms)")
    return LabelledRdf(list(statements), {name: URIRef(str(iri)) for name, iri in declared})


class _Named:
    """A graph name as the TriG parser's sink sees it (only its identifier is used)."""

    __slots__ = ("identifier",)

    def __init__(self, identifier: Any) -> None:
        self.identifier = identifier


class _Sink(RDFSink):  # method names are rdflib's
    """Collects statements as quads and numbers unlabelled blank nodes in document order."""

    def __init__(self) -> None:
        super().__init__(_Named(DATASET_DEFAULT_GRAPH_ID))  # type: ignore[arg-type]
        self.quads: list[Quad] = []
        self.generated: set[str] = set()

    def newGraph(self, identifier: Any) -> Any:
        return _Named(identifier)

    def newBlankNode(self, arg: Any = None, uri: str | None = None, why: Any = None) -> BNode:
        self.counter += 1
        label = f"{UNLABELLED_PREFIX}{self.counter}"
        self.generated.add(label)
        return BNode(label)

    def makeStatement(self, quadruple: Any, why: Any = None) -> None:
        f, p, s, o = quadruple
        s, p, o = (self.normalise(None, t) for t in (s, p, o))
        g = f.identifier if isinstance(f, _Named) else None
        self.quads.append((s, p, o, None if g == DATASET_DEFAULT_GRAPH_ID else g))


class _Labels:
    """Mixed into rdflib's parsers: ``_:label`` is ``BNode(label)``, one node per label."""

    written: set[str]

    def anonymousNode(self, ln: str) -> BNode:
        self.written.add(ln)
        return BNode(ln)


class _TurtleParser(_Labels, SinkParser):
    pass


class _TrigParser(_Labels, TrigSinkParser):
    pass


def read_turtle_family(data: bytes, fmt: str, source: str, base: str) -> LabelledRdf:
    """Turtle (``fmt`` ``"turtle"``) or TriG (``"trig"``) bytes, keeping blank node labels and
    lexical forms; ``base`` resolves relative IRIs. Also the reader behind
    :func:`patchsync.logs.rdf_files.read_rdf_bytes` for these formats."""
    text = _text(data, source)
    sink = _Sink()
    parser = (_TrigParser if fmt == "trig" else _TurtleParser)(sink, baseURI=base, turtle=True)
    parser.written = set()
    saved = rdflib.NORMALIZE_LITERALS
    # Normalizing would rewrite lexical forms ("01"^^xsd:integer to "1"), and a patch
    # must carry the data exactly as written.
    rdflib.NORMALIZE_LITERALS = False
    try:
        parser.loadBuf(text)
    except BadSyntax as exc:
        # str(exc) is "at line N of <uri>:", then "Bad syntax (why) at ^ in:", then context.
        lines = str(exc).splitlines()
        why = lines[1] if len(lines) > 1 else str(exc)
        raise DecodeError(f"not valid {fmt}: {why}", source=source, line=exc.lines + 1) from None
    except Exception as exc:  # rdflib raises many unrelated types for bad input
        raise DecodeError(f"not valid {fmt}: {exc}".splitlines()[0], source=source) from None
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    clash = sorted(parser.written & sink.generated)
    if clash:
        raise FormatError(
            f"{source}: the label _:{clash[0]} is written in the file and is also the label patchsync gives "
            f"an unlabelled blank node ([] or a list); rename it so both labels can be kept"
        )
    prefixes = {name: URIRef(iri) for name, iri in parser._bindings.items()}
    return LabelledRdf(sink.quads, prefixes, parser._baseURI)


__all__ = [
    "BINARY_FORMATS",
    "LABELLED_FORMATS",
    "UNLABELLED_PREFIX",
    "LabelledRdf",
    "read_labelled",
    "read_turtle_family",
]
