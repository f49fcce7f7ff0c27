"""Writing a target's current state: N-Quads natively, other RDF formats through rdflib."""

from __future__ import annotations

from typing import IO, Any

from patchsync import formats
from patchsync.apply.target import DumpableTarget, dumpable
from patchsync.errors import FormatError

#: Output formats of ``patchsync dump`` and the rdflib serializer each one uses (``None``:
#: written by patchsync itself).
DUMP_FORMATS: dict[str, str | None] = {
    "nq": None,
    "nt": None,
    "trig": "trig",
    "ttl": "turtle",
    "rdf-thrift": None,
    "rdf-protobuf": None,
}


def write_dump(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    """Write every quad of ``target`` to ``out`` in ``fmt``; returns the number of quads.

    ``nq`` and ``nt`` are written straight from the stored N-Triples text (any term,
    including RDF-star quoted triples). ``nt`` and ``ttl`` hold one graph, so a target
    with quads in named graphs fails with :class:`FormatError` rather than merging them.
    """
    if fmt not in DUMP_FORMATS:
        raise FormatError(f"unknown dump format {fmt!r} (expected one of: {', '.join(DUMP_FORMATS)})")
    target = dumpable(target)
    found = formats.by_name(fmt)
    single_graph = found is not None and not found.graphs
    if fmt in ("rdf-thrift", "rdf-protobuf"):
        from patchsync.logs.rdf_files import write_rdf_binary

        quads = list(target.quads())
        from patchsync.terms.ntriples import NTriplesTerms

        nt = NTriplesTerms()
        namespaces = sorted(target.namespaces().items())
        declared = [(prefix, nt.unpack(iri)[1]) for (graph, prefix), iri in namespaces if not graph]
        out.write(write_rdf_binary(fmt, quads, declared))
        return len(quads)
    if DUMP_FORMATS[fmt] is None:
        n = 0
        for s, p, o, g in target.quads():
            if g and single_graph:
                raise FormatError(f"the target has quads in the named graph {g}; dump it as nq or trig")
            out.write(f"{s} {p} {o} {g} .\n".encode() if g else f"{s} {p} {o} .\n".encode())
            n += 1
        return n
    return _via_rdflib(target, fmt, out)


def _via_rdflib(target: DumpableTarget, fmt: str, out: IO[bytes]) -> int:
    from rdflib import Dataset
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    from patchsync.terms.ntriples import NTriplesTerms, scan_term
    from patchsync.terms.rdflib_adapter import RdflibTerms

    nt = NTriplesTerms()
    rd: Any = RdflibTerms()
    ds = Dataset()
    n = 0
    for s, p, o, g in target.quads():
        if g and fmt == "ttl":
            raise FormatError(f"the target has quads in the named graph {g}; dump it as nq or trig")
        if s.startswith("<<") or o.startswith("<<"):
            raise FormatError(f"{fmt} output through rdflib cannot hold RDF-star quoted triples; dump as nq")
        terms: list[Any] = [scan_term(t, 0, rd)[0] for t in (s, p, o)]
        graph: Any = scan_term(g, 0, rd)[0] if g else DATASET_DEFAULT_GRAPH_ID
        ds.add((terms[0], terms[1], terms[2], graph))
        n += 1
    try:
        for (graph, prefix), iri in sorted(target.namespaces().items()):
            if not graph:
                u = nt.unpack(iri)
                ds.bind(prefix, u[1], override=True, replace=True)
        data = ds.serialize(format=DUMP_FORMATS[fmt] or fmt)
    except Exception as exc:
        # rdflib raises bare Exceptions for terms Turtle cannot spell (an IRI with a space,
        # say), which N-Quads stores escaped; the user gets one line, not a traceback.
        reason = str(exc).encode("unicode_escape").decode("ascii")
        raise FormatError(f"{fmt} output through rdflib cannot write this data ({reason}); dump as nq") from None
    out.write(data.encode("utf-8") if isinstance(data, str) else data)
    return n
