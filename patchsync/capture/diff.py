"""Patches computed from data: the difference of two datasets, and the inverse of a log.

:func:`diff` answers the minimal patch turning one rdflib dataset (or graph) into another:
one ``D`` per quad only in the old, one ``A`` per quad only in the new. Blank nodes are
compared by label, as RDF Patch does; with ``canonical=True`` each graph's blank nodes
are first relabelled by rdflib's canonicalization, so isomorphic data gives an empty diff,
and the patch names old blank nodes by their old labels so it applies to the old data.

:func:`reverse` inverts a log whose changes are all real changes (what
:class:`patchsync.capture.Recorder` writes): patches in reverse order, the rows of each
committed unit reversed with ``A``/``D`` and ``PA``/``PD`` swapped; aborted transactions
applied nothing, so they have no inverse. The inverse chains onto the log's head.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import rdflib
from rdflib import BNode, ConjunctiveGraph, Dataset, Graph, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync import formats
from patchsync.errors import DecodeError, UsageError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxCommit,
    TxStart,
)
from patchsync.terms import TermAdapter
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.units import EndOfPatch, read_units

Quad = tuple[Any, Any, Any, Any]


def read_dataset(path: str | os.PathLike[str]) -> Dataset:
    """An RDF file as an rdflib ``Dataset``, its format chosen by the extension.

    N-Quads, N-Triples, TriG and Turtle keep their blank node labels as written (RDF Patch
    names blank nodes by label, docs/design.md §1, "blank node labels"; see
    :mod:`patchsync.logs.rdf_labels`), so a diff of two files applies to a copy of the
    first. The other formats go through rdflib with literal normalization off; rdflib gives
    their blank nodes fresh labels, so compare them with ``canonical=True``.
    """
    from patchsync.logs.rdf_labels import read_labelled

    fmt = formats.require(path, None, formats.DIFF_INPUT, "RDF", nameable=False)
    ds = Dataset()
    if fmt.keeps_labels:
        labelled = read_labelled(path)
        for name, iri in labelled.prefixes.items():
            ds.bind(name, iri, override=True)
        for s_, p_, o_, g in labelled.quads:
            ds.add((s_, p_, o_, g if g is not None else DATASET_DEFAULT_GRAPH_ID))  # type: ignore[arg-type]
        return ds
    data = Path(path).read_bytes()
    saved = rdflib.NORMALIZE_LITERALS
    # Normalizing would rewrite lexical forms ("01"^^xsd:integer to "1"), and a patch
    # must carry the data exactly as written.
    rdflib.NORMALIZE_LITERALS = False
    try:
        ds.parse(data=data, format=fmt.rdflib_name, publicID=Path(path).resolve().as_uri())
    except Exception as exc:  # rdflib raises many unrelated types for bad input
        raise DecodeError(f"not valid {fmt.rdflib_name}: {exc}".splitlines()[0], source=str(path)) from None
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    return ds


def dataset_quads(graph: Graph, *, canonical: bool = False) -> tuple[set[Quad], dict[BNode, BNode]]:
    """The quads of ``graph`` (default graph as ``DATASET_DEFAULT_GRAPH_ID``).

    With ``canonical``, blank nodes are relabelled per graph by rdflib's canonicalization
    and the second result maps each canonical blank node back to the original.
    """
    graphs: list[tuple[Any, Graph]]
    if isinstance(graph, Dataset):
        graphs = [(c.identifier, c) for c in graph.graphs()]
    elif isinstance(graph, ConjunctiveGraph):
        # Still accepted from callers; its default graph has a blank node name of its own.
        default_id = graph.default_context.identifier
        graphs = [
            (DATASET_DEFAULT_GRAPH_ID if c.identifier == default_id else c.identifier, c) for c in graph.contexts()
        ]
    else:
        graphs = [(DATASET_DEFAULT_GRAPH_ID, graph)]
    quads: set[Quad] = set()
    back: dict[BNode, BNode] = {}
    for g, context in graphs:
        triples = list(context.triples((None, None, None)))
        if canonical:
            mapping = _canonical_labels(triples)
            back.update({c: b for b, c in mapping.items()})
            triples = [(mapping.get(s, s), p, mapping.get(o, o)) for s, p, o in triples]  # type: ignore[call-overload]
        quads.update((s, p, o, g) for s, p, o in triples)
    return quads, back


def _canonical_labels(triples: list[tuple[Any, Any, Any]]) -> dict[BNode, BNode]:
    """Canonical blank nodes for the blank nodes of ``triples`` (rdflib's algorithm)."""
    from rdflib.compare import _TripleCanonicalizer

    if not any(isinstance(t, BNode) for s, _, o in triples for t in (s, o)):
        return {}
    g = Graph()
    for t in triples:
        g.add(t)
    # The steps of rdflib's ``_TripleCanonicalizer.canonical_triples``, keeping the
    # node-to-label map that the public ``to_canonical_graph`` discards: without it the
    # patch could not name old blank nodes by their old labels. Checked against rdflib 7;
    # if a release renames these steps, fail with that name rather than a traceback.
    c = _TripleCanonicalizer(g)
    try:
        coloring = c._initial_color()
        coloring = c._refine(coloring, coloring[:])
        if not c._discrete(coloring):
            coloring = c._traces(coloring, stats=None, depth=[0])
    except AttributeError as exc:
        raise UsageError(f"canonical diffs need rdflib's canonicalizer steps ({exc}); use rdflib 7") from None
    labels: dict[BNode, BNode] = {}
    for color in coloring:
        node = color.nodes[0]
        if isinstance(node, BNode):
            labels[node] = BNode("cb" + color.hash_color())
    return labels


def diff(old: Graph, new: Graph, *, canonical: bool = False, prefixes: bool = False) -> list[Event]:
    """The minimal patch turning ``old`` into ``new`` (see the module docstring).

    ``prefixes`` also writes ``PD``/``PA`` rows for namespace bindings that differ. The
    result is one patch: ``TX``, deletions, additions, ``TC``, patch end (or nothing but the
    patch end when the inputs are equal).
    """
    old_quads, old_back = dataset_quads(old, canonical=canonical)
    new_quads, _ = dataset_quads(new, canonical=canonical)

    def in_old_terms(term: Any) -> Any:
        return old_back.get(term, term) if isinstance(term, BNode) else term

    namespaces = (dict(old.namespaces()), dict(new.namespaces())) if prefixes else ({}, {})
    return diff_quads(old_quads, new_quads, *namespaces, URIRef(uuid.uuid4().urn), rename=in_old_terms)


def diff_quads(
    old: set[Quad],
    new: set[Quad],
    old_prefixes: dict[str, Any],
    new_prefixes: dict[str, Any],
    patch_id: Any,
    *,
    rename: Any = None,
) -> list[Event]:
    """:func:`diff` over quads of any adapter's terms (N-Triples strings hold RDF-star and
    generalized statements, which rdflib cannot): one patch with id ``patch_id``, ``PD``/``PA``
    for prefixes that differ, then deletions and additions, each passed through ``rename``."""
    rows: list[Event] = []
    rows += [PrefixDelete(n, ns) for n, ns in sorted(old_prefixes.items()) if new_prefixes.get(n) != ns]
    rows += [PrefixAdd(n, ns) for n, ns in sorted(new_prefixes.items()) if old_prefixes.get(n) != ns]
    for kind, quads in ((Delete, old - new), (Add, new - old)):
        rows += [kind(*(map(rename, q) if rename else q)) for q in sorted(quads, key=_sort_key)]
    if not rows:
        return [PatchEnd()]
    return [Header("id", patch_id), TxStart(), *rows, TxCommit(), PatchEnd()]


def _sort_key(q: Quad) -> tuple[str, ...]:
    # Deterministic output makes diffs comparable and reviewable.
    return tuple(f"{type(t).__name__}:{t}" for t in (q[3], q[0], q[1], q[2]))


def reverse(events: Iterable[Event], adapter: TermAdapter[Any] | None = None) -> Iterator[Event]:
    """The inverse of a log of real changes (see the module docstring).

    ``events`` carry terms of ``adapter`` (rdflib's by default). Units are those the applier
    sees (:func:`patchsync.units.read_units`). Each output patch gets a fresh ``id``, a
    ``reverses`` header naming the patch it undoes and a ``prev``: the first one's is the
    log's head (its last patch's ``id``), so the inverse applies right after the log, and
    each later one's the output patch before it. A ``PD`` without the namespace IRI (RDF
    Patch text drops it) is inverted with the IRI the prefix had when the log is read from
    its start; when that is unknown a :class:`UsageError` is raised. Each inverted row keeps
    the position of the row it undoes.
    """
    adapter = adapter if adapter is not None else RdflibTerms()
    patches: list[tuple[Any, list[Event]]] = []
    bound: dict[tuple[str, Any], Any] = {}
    committed: list[Event] = []
    head: Any = None  # the id of the log's last patch that has one, as a term

    for item in read_units(events, adapter):
        if isinstance(item, EndOfPatch):
            original = item.patch.id_term
            head = original if original is not None else head
            if committed:
                patches.append((original, committed))
            committed = []
        elif item.committed:  # an aborted transaction applied nothing: no inverse
            for row in item.rows:
                if isinstance(row, PrefixDelete):
                    iri = row.iri if row.iri is not None else bound.get((row.name, row.g))
                    if iri is None:
                        raise UsageError(f"cannot reverse PD {row.name!r}: the namespace it removed is not in the log")
                    row = row._replace(iri=iri)
                    bound.pop((row.name, row.g), None)
                elif isinstance(row, PrefixAdd):
                    bound[row.name, row.g] = row.iri
                committed.append(row)

    prev: Any = head
    for original, rows in reversed(patches):
        new_id = adapter.iri(uuid.uuid4().urn)
        yield Header("id", new_id)
        if prev is not None:
            yield Header("prev", prev)
        if original is not None:
            yield Header("reverses", original)
        yield TxStart()
        for row in reversed(rows):
            yield _inverse(row)
        yield TxCommit()
        yield PatchEnd()
        prev = new_id


def _inverse(row: Event) -> Event:
    if isinstance(row, Add):
        return Delete(*row)
    if isinstance(row, Delete):
        return Add(*row)
    if isinstance(row, PrefixAdd):
        return PrefixDelete(*row)
    assert isinstance(row, PrefixDelete)  # only change rows are collected
    return PrefixAdd(*row)
