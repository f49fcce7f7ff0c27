"""The Jelly-RDF decoder and encoder: spec rules, positions in errors, round trips.

Rule tests build streams row by row with the generated protobuf classes, so each one
breaks exactly one rule of ``shared/specs/jelly-rdf-spec.txt`` (quoted in the test name or
comment) and checks that the decoder names it with its position.
"""

from __future__ import annotations

from typing import Any

import pytest
from rdflib import BNode, Literal, URIRef

from patchsync._proto import rdf_pb2 as pb
from patchsync.codec.framing import encode_varint
from patchsync.codec.rdf_decoder import END, NEED_DATA, RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.errors import DecodeError, EncodeError, UsageError
from patchsync.events import (
    FrameEnd,
    GraphEnd,
    GraphStart,
    LogicalType,
    Namespace,
    PhysicalType,
    RdfOptions,
    Statement,
    StreamOptions,
    base_logical_type,
)
from patchsync.options import Limits
from patchsync.terms import TripleTerm
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

NT = NTriplesTerms()


def options_row(**kwargs: Any) -> pb.RdfStreamRow:
    fields: dict[str, Any] = {
        "physical_type": pb.PHYSICAL_STREAM_TYPE_TRIPLES,
        "max_name_table_size": 8,
        "max_prefix_table_size": 0,
        "max_datatype_table_size": 4,
        "version": 1,
    }
    fields.update(kwargs)
    return pb.RdfStreamRow(options=pb.RdfStreamOptions(**fields))


def name(value: str, entry_id: int = 0) -> pb.RdfStreamRow:
    return pb.RdfStreamRow(name=pb.RdfNameEntry(id=entry_id, value=value))


def iri(name_id: int = 0, prefix_id: int = 0) -> pb.RdfIri:
    return pb.RdfIri(prefix_id=prefix_id, name_id=name_id)


def triple(**kwargs: Any) -> pb.RdfStreamRow:
    return pb.RdfStreamRow(triple=pb.RdfTriple(**kwargs))


def quad(**kwargs: Any) -> pb.RdfStreamRow:
    return pb.RdfStreamRow(quad=pb.RdfQuad(**kwargs))


def stream(*frames: list[pb.RdfStreamRow]) -> bytes:
    out = b""
    for rows in frames:
        body = pb.RdfStreamFrame(rows=rows).SerializeToString()
        out += encode_varint(len(body)) + body
    return out


def decode(data: bytes, adapter: Any = NT, **kwargs: Any) -> list[Any]:
    decoder: RdfDecoder[Any] = RdfDecoder(adapter, source="t.jelly", **kwargs)
    decoder.feed(data)
    decoder.close()
    return list(decoder)


def statements(events: list[Any]) -> list[tuple[Any, ...]]:
    return [(e.s, e.p, e.o, e.g) for e in events if type(e) is Statement]


# Three names and a triple using them: the smallest valid TRIPLES stream body.
ABC = [name("http://x/a"), name("http://x/b"), name("http://x/c"), triple(s_iri=iri(1), p_iri=iri(), o_iri=iri())]


def test_a_valid_stream_decodes_with_positions() -> None:
    events = decode(stream([options_row(), *ABC]))
    assert type(events[0]) is StreamOptions and events[0].options.physical_type is PhysicalType.TRIPLES
    st = events[1]
    assert (st.s, st.p, st.o, st.g) == ("<http://x/a>", "<http://x/b>", "<http://x/c>", None)
    assert (st.offset, st.frame, st.row) == (0, 0, 4)
    assert events[-1] == FrameEnd(0, 0, 5)


def test_repeated_terms_carry_across_frames() -> None:
    # Spec, "Repeated terms": they MAY occur in the first statement row of a frame.
    data = stream([options_row(), *ABC], [triple()])
    assert statements(decode(data)) == [("<http://x/a>", "<http://x/b>", "<http://x/c>", None)] * 2


def test_decoder_waits_for_a_partial_frame() -> None:
    data = stream([options_row(), *ABC], [triple()])
    decoder: RdfDecoder[str] = RdfDecoder(NT)
    decoder.feed(data[:-2])
    events = list(decoder)
    assert decoder.next_event() is NEED_DATA
    decoder.feed(data[-2:])
    decoder.close()
    events += list(decoder)
    assert decoder.next_event() is END
    assert len(statements(events)) == 2


def test_truncated_stream_is_an_error_once_closed() -> None:
    data = stream([options_row(), *ABC])
    with pytest.raises(DecodeError, match="truncated"):
        decode(data[:-1])


def test_non_delimited_single_frame() -> None:
    # Spec, "Delimited variant": files SHOULD be delimited; one bare frame is accepted too.
    body = pb.RdfStreamFrame(rows=[options_row(), *ABC]).SerializeToString()
    assert len(statements(decode(body))) == 1


@pytest.mark.parametrize(
    ("rows", "rule"),
    [
        ([*ABC], "MUST be the first row"),
        ([options_row(physical_type=0)], "UNSPECIFIED MUST NOT be used"),
        ([options_row(version=0)], "MUST be greater than 0"),
        ([options_row(version=3)], "SHOULD throw an error if the version tag is greater"),
        ([options_row(logical_type=5)], "base type"),
        ([options_row(max_name_table_size=7)], "at least 8"),
        ([options_row(max_name_table_size=10_000_000)], "lookup size too large"),
        ([options_row(), options_row(version=2)], "MUST be identical"),
        ([options_row(), pb.RdfStreamRow()], "no field set"),
        (
            [
                options_row(),
                *ABC[:3],
                quad(s_iri=iri(1), p_iri=iri(), o_iri=iri(), g_default_graph=pb.RdfDefaultGraph()),
            ],
            "MUST NOT contain quad rows",
        ),
        (
            [options_row(), pb.RdfStreamRow(graph_start=pb.RdfGraphStart(g_default_graph=pb.RdfDefaultGraph()))],
            "MUST NOT contain graph_start",
        ),
        ([options_row(), *ABC[:3], triple(p_iri=iri(2), o_iri=iri(3))], "MUST NOT occur in the first statement row"),
        (
            [options_row(), *ABC[:3], triple(s_iri=iri(1), p_iri=iri(2), o_literal=pb.RdfLiteral(lex="x", datatype=0))],
            "MUST be greater than 0",
        ),
        ([options_row(), *ABC[:3], triple(s_iri=iri(1), p_iri=iri(2), o_iri=iri(9))], "outside the lookup"),
        ([options_row(), *ABC[:3], triple(s_iri=iri(1), p_iri=iri(2), o_iri=iri(1, 1))], "outside the lookup"),
        ([options_row(), pb.RdfStreamRow(prefix=pb.RdfPrefixEntry(value="http://"))], "MUST NOT be used"),
        (
            [options_row(), *ABC[:3], triple(s_literal=pb.RdfLiteral(lex="x"), p_iri=iri(2), o_iri=iri(3))],
            "generalized_statements",
        ),
        ([options_row(), *ABC[:3], triple(s_iri=iri(1), p_iri=iri(2), o_triple_term=pb.RdfTriple())], "rdf_star"),
    ],
)
def test_rule_violations_name_the_rule_and_position(rows: list[pb.RdfStreamRow], rule: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode(stream(rows))
    err = info.value
    assert rule in err.rule
    assert err.source == "t.jelly" and err.offset == 0 and err.frame == 0
    assert err.row is not None and 0 <= err.row < len(rows)


def test_repeated_term_in_quoted_triple_is_refused() -> None:
    # Spec, "Quoted triples": repeated terms MUST NOT be used in quoted triples.
    inner = pb.RdfTriple(s_iri=iri(1), p_iri=iri(2))
    rows = [options_row(rdf_star=True), *ABC[:3], triple(s_iri=iri(1), p_iri=iri(2), o_triple_term=inner)]
    with pytest.raises(DecodeError, match="MUST NOT occur in quoted triples"):
        decode(stream(rows))


GRAPH_OPTIONS = options_row(physical_type=pb.PHYSICAL_STREAM_TYPE_GRAPHS)
G_START = pb.RdfStreamRow(graph_start=pb.RdfGraphStart(g_iri=iri(1)))
G_END = pb.RdfStreamRow(graph_end=pb.RdfGraphEnd())


@pytest.mark.parametrize(
    ("rows", "rule"),
    [
        ([GRAPH_OPTIONS, *ABC], "triples MUST NOT occur outside of a graph"),
        ([GRAPH_OPTIONS, *ABC[:3], G_START, G_START], "MUST NOT occur inside another graph"),
        ([GRAPH_OPTIONS, G_END], "MUST NOT occur outside a graph"),
        ([GRAPH_OPTIONS, pb.RdfStreamRow(graph_start=pb.RdfGraphStart())], "exactly one field"),
    ],
)
def test_graphs_stream_rules(rows: list[pb.RdfStreamRow], rule: str) -> None:
    with pytest.raises(DecodeError, match=rule):
        decode(stream(rows))


def test_graph_spans_frames() -> None:
    # Spec: "A graph MAY span more than one stream frame."
    data = stream([GRAPH_OPTIONS, *ABC[:3], G_START, ABC[3]], [triple(), G_END])
    events = decode(data)
    assert [type(e) for e in events] == [
        StreamOptions,
        GraphStart,
        Statement,
        FrameEnd,
        Statement,
        GraphEnd,
        FrameEnd,
    ]
    assert {e.g for e in events if type(e) is Statement} == {"<http://x/a>"}


def test_events_before_a_bad_row_are_handed_out_first() -> None:
    decoder: RdfDecoder[str] = RdfDecoder(NT)
    decoder.feed(stream([options_row(), *ABC, triple(s_iri=iri(7))]))
    decoder.close()
    assert type(decoder.next_event()) is StreamOptions
    assert type(decoder.next_event()) is Statement
    with pytest.raises(DecodeError) as info:
        decoder.next_event()
    assert info.value.row == 5
    with pytest.raises(DecodeError):  # a failed decoder stays failed
        decoder.next_event()


def test_frame_limit_is_checked_before_allocating() -> None:
    data = encode_varint(1 << 30) + b"\x0a"
    with pytest.raises(DecodeError, match="exceeds the limit"):
        decode(data, limits=Limits(max_frame_bytes=1024))


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode(b"\x05\xff\xff\xff\xff\xff")


def test_logical_type_base_is_value_mod_10() -> None:
    # Spec, "Version compatibility and base types".
    assert base_logical_type(LogicalType.TIMESTAMPED_NAMED_GRAPHS) == LogicalType.DATASETS
    assert base_logical_type(LogicalType.SUBJECT_GRAPHS) == LogicalType.GRAPHS
    assert RdfOptions(logical_type=114).grouped and not RdfOptions(logical_type=2).grouped


# -- encoder ---------------------------------------------------------------------------------

TERMS = RdflibTerms()
EX = "http://example.org/"
SAMPLE = [
    (
        URIRef(EX + "s"),
        URIRef(EX + "p"),
        Literal("01", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer")),
        None,
    ),
    (URIRef(EX + "s"), URIRef(EX + "p"), Literal("hi", lang="en"), URIRef(EX + "g")),
    (BNode("b1"), URIRef(EX + "q#x"), Literal("plain"), BNode("g2")),
    (BNode("b1"), URIRef(EX + "q#x"), URIRef(EX + "o"), URIRef(EX + "g")),
]


def roundtrip(options: RdfOptions, rows: list[tuple[Any, ...]], **kwargs: Any) -> list[Any]:
    encoder: RdfEncoder[Any] = RdfEncoder(options, TERMS, **kwargs)
    for s, p, o, g in rows:
        encoder.statement(s, p, o, g)
    encoder.finish()
    return decode(encoder.take(), TERMS)


@pytest.mark.parametrize("physical", [PhysicalType.QUADS, PhysicalType.GRAPHS])
@pytest.mark.parametrize("prefixes", [0, 1, 150])
def test_quads_round_trip(physical: PhysicalType, prefixes: int) -> None:
    options = RdfOptions(physical_type=physical, max_prefix_table_size=prefixes)
    default = TERMS.default_graph()
    expected = [(s, p, o, default if g is None else g) for s, p, o, g in SAMPLE]
    assert statements(roundtrip(options, SAMPLE, max_frame_rows=2)) == expected


def test_triples_round_trip_and_lexical_forms_are_kept() -> None:
    rows = [(s, p, o, None) for s, p, o, _ in SAMPLE]
    assert statements(roundtrip(RdfOptions(physical_type=PhysicalType.TRIPLES), rows)) == rows


def test_lookup_eviction_round_trips() -> None:
    # More distinct names than the table holds: LRU eviction must keep the decoder in step.
    rows = [
        (URIRef(f"{EX}s{i % 37}"), URIRef(f"{EX}p{i % 11}"), URIRef(f"http://o{i % 13}/x"), None) for i in range(500)
    ]
    options = RdfOptions(physical_type=PhysicalType.TRIPLES, max_name_table_size=8, max_prefix_table_size=2)
    assert statements(roundtrip(options, rows)) == rows


def test_rdf_star_and_generalized_round_trip() -> None:
    qt = TripleTerm(URIRef(EX + "a"), URIRef(EX + "b"), TripleTerm(Literal("x"), BNode("p"), URIRef(EX + "c")))
    rows = [(qt, URIRef(EX + "says"), Literal("y"), None), (Literal("s"), BNode("p"), qt, None)]
    options = RdfOptions(physical_type=PhysicalType.TRIPLES, rdf_star=True, generalized_statements=True)
    assert statements(roundtrip(options, rows)) == rows


def test_encoder_refuses_undeclared_features() -> None:
    qt = TripleTerm(URIRef(EX + "a"), URIRef(EX + "b"), URIRef(EX + "c"))
    with pytest.raises(EncodeError, match="rdf_star"):
        roundtrip(RdfOptions(), [(qt, URIRef(EX + "p"), URIRef(EX + "o"), None)])
    with pytest.raises(EncodeError, match="generalized"):
        roundtrip(RdfOptions(), [(Literal("s"), URIRef(EX + "p"), URIRef(EX + "o"), None)])
    with pytest.raises(EncodeError, match="named graph"):
        roundtrip(RdfOptions(physical_type=PhysicalType.TRIPLES), [SAMPLE[1]])
    with pytest.raises(EncodeError, match="max_datatype_table_size is 0"):
        roundtrip(RdfOptions(max_datatype_table_size=0), [SAMPLE[0]])


def test_options_are_validated() -> None:
    with pytest.raises(UsageError):
        RdfOptions(max_name_table_size=7)
    with pytest.raises(UsageError):
        RdfOptions(logical_type=7)


def test_grouped_frames_and_namespaces() -> None:
    options = RdfOptions(physical_type=PhysicalType.GRAPHS, logical_type=LogicalType.DATASETS, version=2)
    encoder: RdfEncoder[Any] = RdfEncoder(options, TERMS, max_frame_rows=1)
    encoder.namespace("ex", URIRef(EX))
    encoder.statement(*SAMPLE[1])
    encoder.end_frame()
    encoder.end_frame()  # an empty RDF Message is a frame too
    encoder.statement(*SAMPLE[3])
    encoder.finish()
    events = decode(encoder.take(), TERMS)
    assert [(e.name, e.iri) for e in events if type(e) is Namespace] == [("ex", URIRef(EX))]
    # grouped streams are never cut at max_frame_rows: three frames, one per message
    assert sum(1 for e in events if type(e) is FrameEnd) == 3
    assert [e.g for e in events if type(e) is Statement] == [URIRef(EX + "g")] * 2


def test_namespace_needs_version_2() -> None:
    encoder: RdfEncoder[Any] = RdfEncoder(RdfOptions(), TERMS)
    with pytest.raises(EncodeError, match="version 2"):
        encoder.namespace("ex", URIRef(EX))


def test_non_delimited_output() -> None:
    encoder: RdfEncoder[Any] = RdfEncoder(RdfOptions(), TERMS, delimited=False)
    encoder.statement(*SAMPLE[1])
    encoder.finish()
    data = encoder.take()
    assert data[0] == 0x0A  # the bare frame starts with its rows tag
    assert len(statements(decode(data, TERMS))) == 1


def test_grouped_reading_yields_one_message_per_frame() -> None:
    # rdf-messages.txt 1.1: a frame read in grouped mode is one RDF Message (may be empty).
    from patchsync.codec.rdf_decoder import messages

    data = stream([options_row(), *ABC], [], [triple()])
    groups = list(messages(decode(data)))
    assert [len(g) for g in groups] == [1, 0, 1]
