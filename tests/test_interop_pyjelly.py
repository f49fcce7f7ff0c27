"""Interoperability with pyjelly (a test-only dependency), both ways.

Files we write must parse in pyjelly to the same statements, and files pyjelly writes must
parse in ours, over the upstream conformance inputs and a generated dataset of 100k quads
with every term kind. Statements are compared as N-Triples strings under ordered
isomorphism (same order, one blank node bijection), as the conformance suite does.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyjelly")

from pyjelly.integrations.generic import generic_sink as pj
from pyjelly.integrations.generic.parse import parse_jelly_flat
from pyjelly.integrations.generic.serialize import flat_stream_to_file
from rdflib import BNode, Dataset

from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_encoder import encode_statements
from patchsync.conformance.rdf import decode_frames, ordered_isomorphism_error
from patchsync.events import PhysicalType, RdfOptions
from patchsync.terms import BNODE, IRI, LITERAL, TRIPLE
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import RDF_SUITE
from .workloads.rdf_data import generate_quads

NT = NTriplesTerms()
SUITE = RDF_SUITE
Quad = tuple[str, str, str, str | None]


def from_pyjelly(term: Any) -> str | None:
    """A pyjelly generic term as an N-Triples string (``None`` for the default graph)."""
    if term is pj.DefaultGraph:
        return None
    if isinstance(term, pj.IRI):
        return NT.iri(term._iri)
    if isinstance(term, pj.BlankNode):
        return NT.bnode(term._identifier)
    if isinstance(term, pj.Literal):
        return NT.literal(term._lex, term._langtag, term._datatype)
    if isinstance(term, pj.Triple):
        return NT.triple(*(from_pyjelly(t) or "" for t in term))
    raise TypeError(f"unexpected pyjelly term {term!r}")


def to_pyjelly(term: str) -> Any:
    u = NT.unpack(term)
    if u[0] == IRI:
        return pj.IRI(u[1])
    if u[0] == BNODE:
        return pj.BlankNode(u[1])
    if u[0] == LITERAL:
        return pj.Literal(u[1], u[2], u[3])
    if u[0] == TRIPLE:
        return pj.Triple(*(to_pyjelly(t) for t in u[1:]))
    return pj.DefaultGraph


def pyjelly_read(data: bytes) -> list[Quad]:
    out: list[Quad] = []
    for st in parse_jelly_flat(io.BytesIO(data)):
        if isinstance(st, pj.Quad):
            out.append((from_pyjelly(st.s), from_pyjelly(st.p), from_pyjelly(st.o), from_pyjelly(st.g)))  # type: ignore[arg-type]
        elif isinstance(st, pj.Triple):
            out.append((from_pyjelly(st.s), from_pyjelly(st.p), from_pyjelly(st.o), None))  # type: ignore[arg-type]
    return out


def pyjelly_write(statements: Iterable[Quad], quads: bool) -> bytes:
    def items() -> Iterator[Any]:
        for s, p, o, g in statements:
            terms = (to_pyjelly(s), to_pyjelly(p), to_pyjelly(o))
            yield pj.Quad(*terms, pj.DefaultGraph if g is None else to_pyjelly(g)) if quads else pj.Triple(*terms)

    out = io.BytesIO()
    flat_stream_to_file(items(), out)
    return out.getvalue()


def ours_read(data: bytes) -> list[Quad]:
    _, frames = decode_frames(data, "<test>")
    return [q for frame in frames for q in frame]


def assert_same(actual: list[Quad], expected: list[Quad]) -> None:
    problem = ordered_isomorphism_error(actual, expected)
    assert problem is None, problem


def _from_jelly_inputs() -> list[Path]:
    return sorted((SUITE / "from_jelly").glob("*/pos_*/in.jelly"))


def _to_jelly_cases() -> list[Path]:
    return sorted(p.parent for p in (SUITE / "to_jelly").glob("*/pos_*/out.jelly"))


@pytest.mark.parametrize("path", _from_jelly_inputs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_both_decoders_agree_and_pyjelly_reads_what_we_rewrite(path: Path) -> None:
    data = path.read_bytes()
    ours = ours_read(data)
    assert_same(ours, pyjelly_read(data))
    options, _ = decode_frames(data, path.name)
    assert options is not None
    rewritten = encode_statements(ours, options, NT)
    assert_same(pyjelly_read(rewritten), ours)


@pytest.mark.parametrize("case", _to_jelly_cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_we_read_what_pyjelly_writes_from_the_to_jelly_inputs(case: Path) -> None:
    inputs: list[Quad] = []
    for path in sorted(case.glob("in_*.n*")):
        inputs += read_statements(path.read_text(encoding="utf-8"), NT)
    quads = any(path.suffix == ".nq" for path in case.glob("in_*"))
    assert_same(ours_read(pyjelly_write(inputs, quads)), inputs)


GENERATED = 100_000


@pytest.fixture(scope="module")
def generated() -> list[Quad]:
    return list(generate_quads(GENERATED))


@pytest.mark.slow
@pytest.mark.parametrize("physical", [PhysicalType.QUADS, PhysicalType.GRAPHS])
def test_generated_dataset_we_write_pyjelly_reads(generated: list[Quad], physical: PhysicalType) -> None:
    data = encode_statements(generated, RdfOptions(physical_type=physical), NT)
    # GRAPHS streams open a graph at each change of graph, so the order is kept too.
    assert_same(pyjelly_read(data), generated)


@pytest.mark.slow
def test_generated_dataset_pyjelly_writes_we_read(generated: list[Quad]) -> None:
    assert_same(ours_read(pyjelly_write(generated, True)), generated)


@pytest.mark.slow
def test_generated_dataset_through_both_rdflib_plugins(generated: list[Quad], tmp_path: Path) -> None:
    # rdflib path: our serializer -> pyjelly's parser, pyjelly's serializer -> our parser.
    sample = generated[:20_000]
    nq = "".join(f"{s} {p} {o}{' ' + g if g else ''} .\n" for s, p, o, g in sample)
    ds = Dataset()
    ds.parse(data=nq, format="nquads")
    ours_file, theirs_file = tmp_path / "ours.jelly", tmp_path / "theirs.jelly"
    ds.serialize(destination=str(ours_file), format="patchsync-jelly")
    ds.serialize(destination=str(theirs_file), format="jelly")
    a, b = Dataset(), Dataset()
    a.parse(str(ours_file), format="jelly")
    b.parse(str(theirs_file), format="patchsync-jelly")

    def ground(d: Dataset) -> set[tuple[Any, ...]]:
        # Statements without blank nodes must match exactly; the rest are counted.
        return {q for q in d.quads((None, None, None, None)) if not any(isinstance(t, BNode) for t in q)}

    expected = len(list(ds.quads((None, None, None, None))))
    for parsed in (a, b):
        assert len(list(parsed.quads((None, None, None, None)))) == expected
        assert ground(parsed) == ground(ds)
