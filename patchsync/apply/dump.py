"""Writing a target's current state: N-Quads, N-Triples, Jelly-RDF and Jena's binary formats natively,
Turtle and TriG through rdflib."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

from patchsync import formats
from patchsync.apply.target import DumpableTarget, dumpable
from patchsync.errors import FormatError


def _declared(target: DumpableTarget) -> list[tuple[str, str]]:
    """The target's default-graph prefixes as ``(prefix, IRI)``."""
    from patchsync.terms.ntriples import NTriplesTerms

    nt = NTriplesTerms()
    return [(prefix, nt.unpack(iri)[1]) for (graph, prefix), iri in sorted(target.namespaces().items()) if not graph]


def _named_graph(g: str) -> FormatError:
    return FormatError(f"the target has quads in the named graph {g}; dump it as nq or trig")


def _lines(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    # Straight from the stored N-Triples text, so any term (RDF-star included) is written.
    if not formats.get(fmt).graphs:
        # Decided before the first line: a refused dump writes nothing (on standard output too).
        named = next((g for _, _, _, g in target.quads() if g), None)
        if named is not None:
            raise _named_graph(named)
    n = 0
    for s, p, o, g in target.quads():
        out.write(f"{s} {p} {o} {g} .\n".encode() if g else f"{s} {p} {o} .\n".encode())
        n += 1
    return n


def _jelly(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    from patchsync.logs.rdf_files import write_jelly

    quads = [(s, p, o, g or None) for s, p, o, g in target.quads()]
    write_jelly([quads], _declared(target), out)
    return len(quads)


def _jena(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    from patchsync.logs.rdf_files import write_rdf_binary

    quads = list(target.quads())
    out.write(write_rdf_binary(fmt, quads, _declared(target)))
    return len(quads)


#: How ``patchsync dump`` writes each format with the ``dump`` role in :mod:`patchsync.formats`
#: (a test checks the two agree); the rest go through rdflib's serializer.
_WRITERS: dict[str, Callable[[DumpableTarget, str, IO[bytes]], int]] = {
    "jelly": _jelly,
    "nq": _lines,
    "nt": _lines,
    "rdf-thrift": _jena,
    "rdf-protobuf": _jena,
}


def write_dump(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    """Write every quad of ``target`` to ``out`` in ``fmt`` (a format with the ``dump`` role
    in :mod:`patchsync.formats`); returns the number of quads.

    ``jelly``, ``nq`` and ``nt`` are written from the stored N-Triples text (any term,
    including RDF-star quoted triples). ``nt`` and ``ttl`` hold one graph, so a target
    with quads in named graphs fails with :class:`FormatError` rather than merging them.
    """
    if fmt not in formats.names(formats.DUMP):
        raise FormatError(f"unknown dump format {fmt!r} (expected one of: {', '.join(formats.names(formats.DUMP))})")
    return _WRITERS.get(fmt, _via_rdflib)(dumpable(target), fmt, out)


def _via_rdflib(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    found = formats.get(fmt)
    from rdflib import Dataset
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    from patchsync.terms.ntriples import scan_term
    from patchsync.terms.rdflib_adapter import RdflibTerms

    rd: Any = RdflibTerms()
    ds = Dataset()
    n = 0
    for s, p, o, g in target.quads():
        if g and not found.graphs:
            raise _named_graph(g)
        if s.startswith("<<") or o.startswith("<<"):
            raise FormatError(f"{fmt} output through rdflib cannot hold RDF-star quoted triples; dump as nq")
        terms: list[Any] = [scan_term(t, 0, rd)[0] for t in (s, p, o)]
        graph: Any = scan_term(g, 0, rd)[0] if g else DATASET_DEFAULT_GRAPH_ID
        ds.add((terms[0], terms[1], terms[2], graph))
        n += 1
    try:
        for prefix, iri in _declared(target):
            ds.bind(prefix, iri, override=True, replace=True)
        data = ds.serialize(format=found.rdflib_name or fmt)
    except Exception as exc:
        # rdflib raises bare Exceptions for terms Turtle cannot spell (an IRI with a space,
        # say), which N-Quads stores escaped; the user gets one line, not a traceback.
        reason = str(exc).encode("unicode_escape").decode("ascii")
        raise FormatError(f"{fmt} output through rdflib cannot write this data ({reason}); dump as nq") from None
    out.write(data.encode("utf-8") if isinstance(data, str) else data)
    return n
