"""Jelly-Patch encoder and decoder: round trips, compression rules and error reporting.

Spec references are to the Jelly-Patch specification (JP) and the Jelly-RDF specification (JR).
"""

from __future__ import annotations

import contextlib
import itertools

import pytest
from rdflib import BNode, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync import (
    Add,
    DecodeError,
    Delete,
    EncodeError,
    Header,
    PatchDecoder,
    PatchEncoder,
    PatchEnd,
    PatchOptions,
    PrefixAdd,
    PrefixDelete,
    StatementType,
    StreamType,
    TripleTerm,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync._proto import patch_pb2
from patchsync.codec.framing import encode_varint

from .helpers import content, decode, encode, patches

EX = "http://example.org/"
XSD_INT = URIRef("http://www.w3.org/2001/XMLSchema#integer")
G1 = URIRef(EX + "g1")


def ex(name: str) -> URIRef:
    return URIRef(EX + name)


def sample_patches(quads: bool) -> list[list[object]]:
    """Three patches using every row kind, with graphs when ``quads``."""
    g = G1 if quads else None
    dg = DATASET_DEFAULT_GRAPH_ID if quads else None
    quoted = TripleTerm(ex("s"), ex("p"), TripleTerm(BNode("q"), ex("p"), Literal("deep")))
    return [
        [
            Header("id", URIRef("uuid:00000000-0000-0000-0000-000000000001")),
            Header("label", Literal("chrząszcz", lang="pl")),
            TxStart(),
            PrefixAdd("ex", URIRef(EX), g),
            Add(ex("s"), ex("p"), ex("o"), g),
            Add(ex("s"), ex("p"), Literal("01", datatype=XSD_INT, normalize=False), g),
            Add(BNode("b1"), ex("p"), BNode("b2"), dg),
            Delete(ex("s"), ex("p"), ex("o"), g),
            Add(quoted, ex("says"), Literal('x\ny "quoted"'), g),
            TxCommit(),
        ],
        [
            Header("id", URIRef("uuid:00000000-0000-0000-0000-000000000002")),
            Header("prev", URIRef("uuid:00000000-0000-0000-0000-000000000001")),
            TxStart(),
            Delete(BNode("b1"), ex("p"), BNode("b2"), dg),
            PrefixDelete("ex", None, g),
            TxAbort(),
            Add(ex("outside"), ex("tx"), Literal(""), g),
        ],
        [],
    ]


def as_stream(groups: list[list[object]]) -> list[object]:
    out: list[object] = []
    for group in groups:
        out.extend(group)
        out.append(PatchEnd())
    return out


CASES = list(itertools.product(StreamType, StatementType))


@pytest.mark.parametrize(("stream_type", "statement_type"), CASES, ids=lambda v: v.name)
def test_round_trip_all_stream_and_statement_types(stream_type: StreamType, statement_type: StatementType) -> None:
    quads = statement_type is StatementType.QUADS
    options = PatchOptions(stream_type=stream_type, statement_type=statement_type, rdf_star=True)
    groups = sample_patches(quads)
    data = encode(as_stream(groups), options)
    events = decode(data, source="rt.jellyp")
    assert events[0].options == options  # type: ignore[union-attr]
    got = patches(events)
    if stream_type is StreamType.FLAT:
        # JP "Patch stream types": in FLAT the entire stream is a single patch.
        assert got == [[e for g in groups for e in g]]
    else:
        assert got == [list(g) for g in groups]


@pytest.mark.parametrize(
    ("stream_type", "statement_type"),
    [c for c in CASES if c[0] is not StreamType.FRAME],  # FRAME puts one whole patch in a frame
    ids=lambda v: v.name,
)
def test_one_row_frames_and_tiny_lookups_round_trip(stream_type: StreamType, statement_type: StatementType) -> None:
    """Lookup entries, 0-ids and repeated terms survive frame boundaries and LRU eviction."""
    quads = statement_type is StatementType.QUADS
    options = PatchOptions(
        stream_type=stream_type,
        statement_type=statement_type,
        max_name_table_size=8,
        max_prefix_table_size=4,
        max_datatype_table_size=1,
    )
    rows = []
    for i in range(200):
        g = URIRef(f"http://g{i % 3}.example/") if quads else None
        o = Literal(str(i), datatype=URIRef(f"http://dt.example/t{i % 3}"), normalize=False)
        rows.append(Add(URIRef(f"http://s{i % 7}.example/n{i % 11}"), ex(f"p{i % 5}"), o, g))
    data = encode([*rows, PatchEnd()], options, max_frame_rows=1)
    assert patches(decode(data)) == [rows]


def test_repeated_terms_cost_no_bytes() -> None:
    """JR "Repeated terms": a term equal to the previous one in its position is omitted."""
    options = PatchOptions(statement_type=StatementType.TRIPLES)
    one = encode([Add(ex("s"), ex("p"), ex("o")), PatchEnd()], options)
    two = encode([Add(ex("s"), ex("p"), ex("o")), Delete(ex("s"), ex("p"), ex("o")), PatchEnd()], options)
    # The delete repeats all three terms: its row is an empty RdfQuad (3 bytes framed).
    assert len(two) - len(one) == 4
    frame = patch_pb2.RdfPatchFrame.FromString(two[1:])
    deletes = [r for r in frame.rows if r.WhichOneof("row") == "statement_delete"]
    assert deletes[0].statement_delete.ListFields() == []


def test_lookup_entries_use_zero_ids_when_sequential() -> None:
    """JR lookups: an entry id of 0 means previous + 1, so sequential ids are not written."""
    data = encode([Add(ex("a"), ex("b"), ex("c")), PatchEnd()], PatchOptions())
    frame = patch_pb2.RdfPatchFrame.FromString(data[1:])
    names = [r.name for r in frame.rows if r.WhichOneof("row") == "name"]
    assert [n.value for n in names] == ["a", "b", "c"]
    assert [n.id for n in names] == [0, 0, 0]
    iris = next(r.statement_add for r in frame.rows if r.WhichOneof("row") == "statement_add")
    # prefix 1 given once then repeated with 0; names 1, 2, 3 all follow previous + 1.
    assert (iris.s_iri.prefix_id, iris.s_iri.name_id) == (1, 0)
    assert (iris.p_iri.prefix_id, iris.p_iri.name_id) == (0, 0)


def test_non_delimited_single_frame_is_read() -> None:
    options = PatchOptions(stream_type=StreamType.FLAT)
    events = [Add(ex("s"), ex("p"), ex("o"), G1), PatchEnd()]
    data = encode(events, options, delimited=False)
    assert patches(decode(data)) == [[Add(ex("s"), ex("p"), ex("o"), G1)]]


def test_byte_at_a_time_yields_the_same_events() -> None:
    options = PatchOptions(rdf_star=True)
    data = encode(as_stream(sample_patches(True)), options, max_frame_rows=3)
    whole = decode(data)
    decoder = PatchDecoder()
    pieces = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        pieces.extend(decoder)
    decoder.close()
    pieces.extend(decoder)
    assert pieces == whole  # positions included


def test_events_carry_frame_offsets_and_rows() -> None:
    options = PatchOptions(stream_type=StreamType.FRAME, statement_type=StatementType.TRIPLES)
    data = encode([Add(ex("s"), ex("p"), ex("o")), PatchEnd(), Delete(ex("s"), ex("p"), ex("o")), PatchEnd()], options)
    events = decode(data)
    adds = [e for e in events if type(e) is Add]
    deletes = [e for e in events if type(e) is Delete]
    assert (adds[0].offset, adds[0].frame) == (0, 0)
    assert deletes[0].frame == 1 and deletes[0].row == 0
    assert deletes[0].offset > 0 and data[deletes[0].offset :] and deletes[0].offset < len(data)


def test_append_mode_stream_decodes_as_one_log() -> None:
    """docs/design.md §6: an appended stream must not depend on earlier lookup or repeated-term state."""
    options = PatchOptions(statement_type=StatementType.TRIPLES, max_name_table_size=8)
    first = [Add(ex(f"s{i}"), ex("p"), ex(f"o{i}")) for i in range(20)]
    second = [Add(ex(f"s{i}"), ex("p"), ex(f"o{i}")) for i in range(15, 30)]
    data = encode([*first, PatchEnd()], options) + encode([*second, PatchEnd()], options, append=True)
    assert patches(decode(data)) == [first, second]
    # Without append mode the concatenation would be misread: the 0-ids and the repeated
    # predicate refer to state the second writer did not know about.
    wrong = encode([*first, PatchEnd()], options) + encode([*second, PatchEnd()], options)
    with contextlib.suppress(DecodeError):
        assert patches(decode(wrong)) != [first, second]


@pytest.mark.parametrize(
    ("options", "call", "message"),
    [
        (PatchOptions(), lambda e: e.tx_commit(), "TC without an open transaction"),
        (PatchOptions(), lambda e: (e.tx_start(), e.tx_start()), "TX while a transaction is open"),
        (
            PatchOptions(statement_type=StatementType.TRIPLES),
            lambda e: e.add(ex("s"), ex("p"), ex("o"), G1),
            "TRIPLES stream cannot carry",
        ),
        (PatchOptions(), lambda e: e.add(TripleTerm(ex("s"), ex("p"), ex("o")), ex("p"), ex("o")), "rdf_star"),
        (PatchOptions(), lambda e: e.add(Literal("s"), ex("p"), ex("o")), "generalized"),
        (PatchOptions(), lambda e: e.add(ex("s"), BNode("p"), ex("o")), "generalized"),
        (
            PatchOptions(max_datatype_table_size=0),
            lambda e: e.add(ex("s"), ex("p"), Literal("1", datatype=XSD_INT)),
            "max_datatype_table_size is 0",
        ),
        (PatchOptions(stream_type=StreamType.FRAME), lambda e: (e.tx_start(), e.end_patch()), "inside a transaction"),
        (PatchOptions(), lambda e: e.add("not a term", ex("p"), ex("o")), "not an RDF term"),
        (PatchOptions(), lambda e: e.prefix_add("x", Literal("http://x/")), "must be an IRI"),
    ],
)
def test_encoder_refuses_invalid_streams(options: PatchOptions, call: object, message: str) -> None:
    encoder: PatchEncoder[object] = PatchEncoder(options)
    with pytest.raises(EncodeError, match=message):
        call(encoder)  # type: ignore[operator]


def frame_bytes(*rows: patch_pb2.RdfPatchRow) -> bytes:
    data = patch_pb2.RdfPatchFrame(rows=list(rows)).SerializeToString()
    return encode_varint(len(data)) + data


def options_row(**overrides: int) -> patch_pb2.RdfPatchRow:
    fields = {"statement_type": 1, "stream_type": 3, "max_name_table_size": 8, "version": 1}
    fields.update(overrides)
    return patch_pb2.RdfPatchRow(options=patch_pb2.RdfPatchOptions(**fields))  # type: ignore[arg-type]


def test_decode_error_names_source_offset_frame_row_and_rule() -> None:
    good = frame_bytes(options_row(), patch_pb2.RdfPatchRow(punctuation=patch_pb2.RdfPatchPunctuation()))
    bad = frame_bytes(
        patch_pb2.RdfPatchRow(transaction_start=patch_pb2.RdfPatchTransactionStart()),
        patch_pb2.RdfPatchRow(transaction_start=patch_pb2.RdfPatchTransactionStart()),
    )
    decoder = PatchDecoder(source="feed.jellyp")
    decoder.feed(good + bad)
    decoder.close()
    seen = []
    with pytest.raises(DecodeError) as info:
        for event in decoder:
            seen.append(event)
    err = info.value
    assert (err.source, err.offset, err.frame, err.row) == ("feed.jellyp", len(good), 1, 1)
    assert str(err).startswith(f"feed.jellyp, byte {len(good)}, frame 1, row 1: TX while a transaction is open")
    # Events before the bad row are handed out first (docs/design.md §2) ...
    assert [type(e).__name__ for e in seen] == ["Options", "PatchEnd", "TxStart"]
    # ... and a failed decoder stays failed.
    with pytest.raises(DecodeError):
        decoder.next_event()


def test_triples_stream_ignores_a_graph_term() -> None:
    """JP "RDF statements": in TRIPLES the consumer SHOULD ignore a graph term that is set."""
    quad = patch_pb2.RdfPatchRow()
    quad.statement_add.s_bnode = "a"
    quad.statement_add.p_iri.name_id = 1
    quad.statement_add.o_bnode = "b"
    quad.statement_add.g_bnode = "ignored"
    name = patch_pb2.RdfPatchRow()
    name.name.value = "http://p/"
    data = frame_bytes(options_row(statement_type=1, stream_type=2), name, quad)
    assert patches(decode(data)) == [[Add(BNode("a"), URIRef("http://p/"), BNode("b"), None)]]


def test_incomplete_patch_at_end_of_input_is_reported_after_its_events() -> None:
    options = PatchOptions()
    encoder: PatchEncoder[object] = PatchEncoder(options)
    encoder.tx_start()
    encoder.add(ex("s"), ex("p"), ex("o"))
    encoder._flush_frame()  # a writer that died before TC
    data = encoder.take()
    decoder = PatchDecoder(source="cut.jellyp")
    decoder.feed(data)
    assert [type(e).__name__ for e in decoder] == ["Options", "TxStart", "Add"]
    decoder.close()
    with pytest.raises(DecodeError, match="stream ends inside a transaction"):
        decoder.next_event()


def test_content_helper_ignores_positions() -> None:
    events = decode(encode([Add(ex("s"), ex("p"), ex("o")), PatchEnd()], PatchOptions()))
    assert content(events)[0] == Add(ex("s"), ex("p"), ex("o"), DATASET_DEFAULT_GRAPH_ID)


def test_row_needing_more_prefixes_than_the_lookup_holds_is_written_unsplit() -> None:
    """JR leaves IRI splitting to the producer: a row that needs more distinct prefixes than
    max_prefix_table_size is re-encoded with whole IRIs, and later rows still decode
    (regression: the LRU once evicted an entry before refusing the split)."""
    options = PatchOptions(statement_type=StatementType.TRIPLES, max_prefix_table_size=2)
    rows = [
        Add(ex("a"), URIRef("urn:x"), URIRef("http://r.example/")),
        Add(ex("a"), ex("a"), ex("a")),
        Add(ex("b"), URIRef("urn:y"), URIRef("http://r.example/z")),
    ]
    assert patches(decode(encode([*rows, PatchEnd()], options))) == [rows]
