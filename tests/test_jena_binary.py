"""RDF Thrift and RDF Protobuf (Jena's RDF Binary): files Jena wrote, round trips, streaming.

``tests/data/upstream/jena/written`` holds files written by Apache Jena 4.5.0 from Jena's own
test data, each with the N-Quads Jena reads back from it; the decoders must see the same
statements. The round trips run the statements of both conformance suites (the Jelly-RDF
``.nq``/``.nt`` expectations and the RDF Patch texts of conformance/patch) through
both formats, with every writer option, and compare N-Quads with blank node labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchsync import formats
from patchsync.codec.jena import (
    FORMATS,
    RdfProtobufDecoder,
    RdfThriftDecoder,
    decode_bytes,
    encode_statements,
    lookup,
)
from patchsync.codec.jena.terms import decimal_lex, decimal_value, double_value, integer_value, java_double
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import DecodeError, FormatError
from patchsync.events import Add, Delete, Namespace, PrefixAdd, Statement
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

ROOT = Path(__file__).resolve().parent
JENA = ROOT / "data" / "upstream" / "jena" / "written"
JELLY_RDF = ROOT / "data" / "upstream" / "jelly-rdf"
PATCH_SUITE = ROOT.parent / "conformance" / "patch"
NAMES = ("rdf-thrift", "rdf-protobuf")

Quad = tuple[Any, Any, Any, Any]


def _quads(events: Any, adapter: NTriplesTerms) -> list[Quad]:
    default = adapter.default_graph()
    return [(e.s, e.p, e.o, None if e.g is None or e.g == default else e.g) for e in events if isinstance(e, Statement)]


# -- Jena's files ---------------------------------------------------------------------------

#: Jena's format names by file suffix, from the format registry.
SUFFIXES = {s: f.name for f in formats.FORMATS if f.name in FORMATS for s in f.suffixes}
JENA_FILES = sorted(p for p in JENA.iterdir() if p.suffix in SUFFIXES)


def test_jena_files_are_there() -> None:
    # 12 sources, four variants each: a missing file must not shrink the test silently.
    assert len(JENA_FILES) == 48


@pytest.mark.parametrize("path", JENA_FILES, ids=lambda p: p.name)
def test_jena_written_file_decodes_to_jena_graph(path: Path) -> None:
    adapter = NTriplesTerms()
    got = _quads(decode_bytes(SUFFIXES[path.suffix], path.read_bytes(), adapter, source=path.name), adapter)
    expected = read_statements((path.parent / (path.name + ".nq")).read_text(encoding="utf-8"), adapter)
    assert sorted(got, key=repr) == sorted(set(expected), key=repr)
    assert len(set(got)) == len(got)  # Jena writes each statement once


def test_jena_thrift_prefixed_names_and_values_are_read() -> None:
    """terms.values.rt uses prefix rows, prefixed names and value forms (checked, not assumed)."""
    data = (JENA / "terms.values.rt").read_bytes()
    events = list(decode_bytes("rt", data, NTriplesTerms()))
    names = {e.name: e.iri for e in events if isinstance(e, Namespace)}
    assert names["xsd"] == "<http://www.w3.org/2001/XMLSchema#>" and names[""] == "<http://example/>"
    objects = {e.p: e.o for e in events if isinstance(e, Statement)}
    xsd = "http://www.w3.org/2001/XMLSchema#"
    assert objects["<http://example/p12>"] == f'"123"^^<{xsd}integer>'  # xsd:long became a valInteger
    assert objects["<http://example/p20>"] == f'"5.0E7"^^<{xsd}double>'
    assert objects["<http://example/p17>"] == f'"0.005"^^<{xsd}decimal>'
    # Value forms are shorter than literals: the file really holds them.
    assert len(data) < len((JENA / "terms.rt").read_bytes())


# -- round trips ------------------------------------------------------------------------------


def _jelly_expectations() -> list[Path]:
    return sorted(p for p in JELLY_RDF.rglob("*") if p.suffix in (".nq", ".nt"))


def _patch_texts() -> list[Path]:
    return sorted(PATCH_SUITE.rglob("*.rdfp"))


def _round_trip(name: str, quads: list[Quad], namespaces: list[tuple[str, Any]], **options: Any) -> list[Quad]:
    adapter = NTriplesTerms()
    data = encode_statements(name, quads, adapter, namespaces=namespaces, **options)
    return _quads(decode_bytes(name, data, adapter), adapter)


OPTIONS = [
    {},
    {"values": True},
    {"repeat": True},
    {"prefixed_names": False},
    {"values": True, "repeat": True},
]


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_jelly_rdf_suite(name: str) -> None:
    files = _jelly_expectations()
    assert len(files) > 250
    adapter = NTriplesTerms()
    for path in files:
        quads = read_statements(path.read_text(encoding="utf-8"), adapter, source=str(path))
        for options in OPTIONS:
            assert _round_trip(name, quads, [], **options) == quads, (path, options)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_patch_suite(name: str) -> None:
    files = _patch_texts()
    assert len(files) > 100
    adapter = NTriplesTerms()
    checked = 0
    for path in files:
        try:
            events = read_rdfp(path.read_bytes(), adapter, source=str(path))
        except DecodeError:  # negative cases of the suite: nothing to round-trip
            continue
        quads = [(e.s, e.p, e.o, e.g) for e in events if isinstance(e, Add | Delete)]
        namespaces = [(e.name, e.iri) for e in events if isinstance(e, PrefixAdd)]
        for options in OPTIONS:
            data = encode_statements(name, quads, adapter, namespaces=namespaces, **options)
            decoded = list(decode_bytes(name, data, adapter))
            assert _quads(decoded, adapter) == [(s, p, o, g) for s, p, o, g in quads], (path, options)
            assert [(e.name, e.iri) for e in decoded if isinstance(e, Namespace)] == namespaces
        checked += 1
    assert checked > 80


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_rdflib_terms(name: str) -> None:
    from rdflib import BNode, Literal, URIRef
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
    from rdflib.namespace import XSD

    from patchsync.terms import TripleTerm

    ex = "http://example/"
    s, p, g = URIRef(ex + "s"), URIRef(ex + "p"), URIRef(ex + "g")
    objects = [
        Literal("x", lang="en"),
        Literal("01", datatype=XSD.integer),  # not canonical: stays a literal even with values=True
        Literal("-12", datatype=XSD.integer),
        Literal("1.50", datatype=XSD.decimal),
        Literal("4.565E8", datatype=XSD.double),
        Literal("1e3", datatype=XSD.double),
        Literal("abc", datatype=URIRef(ex + "dt")),
        BNode("b0"),
        TripleTerm(s, p, TripleTerm(BNode("x"), p, Literal(""))),
    ]
    quads = [(s, p, o, g if i % 2 else None) for i, o in enumerate(objects)]
    for options in OPTIONS:
        adapter = RdflibTerms()
        data = encode_statements(name, quads, adapter, namespaces=[("ex", URIRef(ex))], **options)
        got = [(e.s, e.p, e.o, e.g) for e in decode_bytes(name, data, adapter) if isinstance(e, Statement)]
        # Quads come back in their graph; triples (the default graph) with g None.
        assert got == quads, options
    # The default graph term of a dataset is written as a triple row.
    adapter = RdflibTerms()
    data = encode_statements(name, [(s, p, s, DATASET_DEFAULT_GRAPH_ID)], adapter)
    assert [e.g for e in decode_bytes(name, data, adapter) if isinstance(e, Statement)] == [None]


def test_writer_options_change_the_bytes() -> None:
    adapter = NTriplesTerms()
    ex = "http://example/"
    quads = [(f"<{ex}s>", f"<{ex}p>", f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>', None) for i in range(50)]
    ns = [("ex", f"<{ex}>")]
    plain = encode_statements("rt", quads, adapter, namespaces=ns, prefixed_names=False)
    prefixed = encode_statements("rt", quads, adapter, namespaces=ns)
    values = encode_statements("rt", quads, adapter, namespaces=ns, values=True)
    repeat = encode_statements("rt", quads, adapter, namespaces=ns, values=True, repeat=True)
    assert len(plain) > len(prefixed) > len(values) > len(repeat)
    assert b"http://example/s" in plain and b"http://example/s" not in prefixed.split(b"http://example/", 1)[1]


# -- streaming and positions ----------------------------------------------------------------


@pytest.mark.parametrize("decoder_type", [RdfThriftDecoder, RdfProtobufDecoder])
def test_byte_by_byte_feed_gives_the_same_events(decoder_type: type[Any]) -> None:
    name = "rt" if decoder_type is RdfThriftDecoder else "rpb"
    data = (JENA / f"writer-rt-23.values.{name}").read_bytes()
    whole = list(decode_bytes(name, data, NTriplesTerms()))
    decoder = decoder_type(NTriplesTerms())
    events: list[Any] = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        events.extend(decoder)
    assert not decoder.complete
    decoder.close()
    events.extend(decoder)
    assert decoder.complete
    assert events == whole
    assert decoder.rows == len(whole)


@pytest.mark.parametrize("name", NAMES)
def test_events_carry_row_offsets_and_indexes(name: str) -> None:
    adapter = NTriplesTerms()
    quads = [("<http://a>", "<http://b>", f'"{i}"', None) for i in range(3)]
    data = encode_statements(name, quads, adapter, namespaces=[("a", "<http://a/>")])
    events = list(decode_bytes(name, data, adapter))
    assert [e.row for e in events] == [0, 1, 2, 3]
    assert events[0].offset == 0 and all(e.frame == 0 for e in events)
    offsets = [e.offset for e in events]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4
    # Every row starts where the previous one ended: re-encoding from an offset gives a valid tail.
    tail = list(decode_bytes(name, data[offsets[2] :], adapter))
    assert [e.o for e in tail] == ['"1"', '"2"']


# -- value forms ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (123.6, "123.6"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (456.5e6, "4.565E8"),
        (50e-6, "5.0E-5"),
        (-2.5e-10, "-2.5E-10"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (float("inf"), "INF"),
        (float("nan"), "NaN"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


@pytest.mark.parametrize(
    ("value", "scale", "text"),
    [(150, 2, "1.50"), (5, 3, "0.005"), (-5, 3, "-0.005"), (5, 0, "5"), (5, -2, "500"), (0, 2, "0.00"), (0, -3, "0")],
)
def test_decimal_lex(value: int, scale: int, text: str) -> None:
    assert decimal_lex(value, scale) == text


def test_value_forms_only_when_lossless() -> None:
    assert integer_value("12") == 12 and integer_value("-9223372036854775808") == -(1 << 63)
    assert integer_value("012") is None and integer_value("+1") is None and integer_value("9223372036854775808") is None
    assert double_value("5.0E7") == 5e7 and double_value("123.6") == 123.6
    assert double_value("5e7") is None and double_value("INF") is None and double_value("1") is None
    assert decimal_value("1.50") == (150, 2) and decimal_value("-0.005") == (-5, 3)
    assert decimal_value("1") is None and decimal_value("-0.0") is None and decimal_value("+1.5") is None


def test_format_registry() -> None:
    assert lookup("rt") is lookup("rdf-thrift") and lookup("rpb") is FORMATS["rdf-protobuf"]
    assert SUFFIXES == {".rt": "rdf-thrift", ".rpb": "rdf-protobuf"}
    with pytest.raises(FormatError, match="unknown RDF Binary format 'ttl'"):
        lookup("ttl")


# -- Jena reads what we write ------------------------------------------------------------------

READ_BY_JENA = ROOT / "data" / "upstream" / "jena" / "read-by-jena"
JENA_SOURCE = JELLY_RDF / "to_jelly" / "quads_rdf_star" / "pos_004" / "in_000.nq"
JENA_NAMESPACES = [("ex", "<http://example.org/>"), ("xsd", "<http://www.w3.org/2001/XMLSchema#>")]


@pytest.mark.parametrize(
    "file",
    [
        "quads_rdf_star_pos_004.rt",
        "quads_rdf_star_pos_004-v.rt",
        "quads_rdf_star_pos_004.rpb",
        "quads_rdf_star_pos_004-v.rpb",
    ],
)
def test_writer_output_is_what_jena_read(file: str) -> None:
    """The vendored file is our writer's output that Jena 4.5.0 read back as ``<file>.nq``.

    The writer must still produce exactly those bytes, and what Jena read must be the source.
    """
    adapter = NTriplesTerms()
    quads = read_statements(JENA_SOURCE.read_text(encoding="utf-8"), adapter)
    name = SUFFIXES[Path(file).suffix]
    data = encode_statements(name, quads, adapter, namespaces=JENA_NAMESPACES, values="-v." in file)
    assert data == (READ_BY_JENA / file).read_bytes()
    jena_read = read_statements((READ_BY_JENA / (file + ".nq")).read_text(encoding="utf-8"), adapter)
    assert sorted(set(jena_read), key=repr) == sorted(set(quads), key=repr)


@pytest.mark.parametrize("name", NAMES)
def test_stream_larger_than_the_parse_window(name: str) -> None:
    """Rows are parsed from 1 MiB windows of the buffer; rows crossing a window edge are kept."""
    from .workloads.rdf_data import generate_quads

    adapter = NTriplesTerms()
    quads = [(s, p, o, g) for s, p, o, g in generate_quads(25_000)]
    data = encode_statements(name, quads, adapter, namespaces=[("ex", "<http://example.org/resource/>")])
    assert len(data) > 2 << 20
    assert _quads(decode_bytes(name, data, adapter), adapter) == quads
    decoder = lookup(name).decoder(adapter)
    got: list[Any] = []
    for i in range(0, len(data), 300_007):
        decoder.feed(data[i : i + 300_007])
        got.extend(decoder)
    decoder.close()
    got.extend(decoder)
    assert _quads(got, adapter) == quads and decoder.complete


@pytest.mark.parametrize("name", ["rt", "rpb"])
def test_read_dataset(name: str) -> None:
    from patchsync.codec.jena import read_dataset

    adapter = NTriplesTerms()
    path = JENA / f"stream-dataset.{name}"
    statements, namespaces = read_dataset(name, path.read_bytes(), adapter, source=path.name)
    expected = read_statements((path.parent / (path.name + ".nq")).read_text(encoding="utf-8"), adapter)
    assert sorted(statements, key=repr) == sorted(expected, key=repr) and any(g is None for *_, g in statements)
    assert namespaces == []  # the SSE dataset has no prefix map
    _, namespaces = read_dataset(name, (JENA / f"terms.{name}").read_bytes(), adapter)
    # Jena writes the graph's prefix map as prefix rows, in both formats.
    assert ("", "<http://example/>") in namespaces and ("xsd", "<http://www.w3.org/2001/XMLSchema#>") in namespaces
