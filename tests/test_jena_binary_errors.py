"""RDF Thrift / RDF Protobuf: every malformed input is a one-line DecodeError naming its rule.

The bytes are built by hand (Thrift compact protocol) or with the generated protobuf
classes (RDF Protobuf), so each case breaks exactly one rule.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from patchsync._proto import jena_rdf_pb2 as pb
from patchsync.codec.driver import NEED_DATA
from patchsync.codec.framing import encode_varint
from patchsync.codec.jena import RdfProtobufDecoder, RdfThriftDecoder, decode_bytes, encode_statements, lookup
from patchsync.errors import DecodeError, EncodeError
from patchsync.options import Limits
from patchsync.terms.ntriples import NTriplesTerms

# -- Thrift compact protocol by hand ------------------------------------------------------------

END = b"\x00"


def s(text: str) -> bytes:
    data = text.encode()
    return encode_varint(len(data)) + data


def t_iri(iri: str) -> bytes:
    return b"\x1c" + b"\x18" + s(iri) + END + END  # RDF_Term{1: RDF_IRI{1: iri}}


def t_member(field: int, body: bytes, kind: int = 12) -> bytes:
    return bytes([(field << 4) | kind]) + body + END


def t_triple_row(s_: bytes, p: bytes, o: bytes) -> bytes:
    return b"\x2c" + b"\x1c" + s_ + b"\x1c" + p + b"\x1c" + o + END + END


def t_quad_row(s_: bytes, p: bytes, o: bytes, g: bytes) -> bytes:
    return b"\x3c" + b"\x1c" + s_ + b"\x1c" + p + b"\x1c" + o + b"\x1c" + g + END + END


def t_prefix_row(prefix: str, uri: str) -> bytes:
    return b"\x1c" + b"\x18" + s(prefix) + b"\x18" + s(uri) + END + END


S, P, O = t_iri("http://s"), t_iri("http://p"), t_iri("http://o")  # noqa: E741
REPEAT = b"\x8c" + END + END


# -- protobuf rows ---------------------------------------------------------------------------


def p_iri(iri: str) -> Any:
    return pb.RDF_Term(iri=pb.RDF_IRI(iri=iri))


def p_rows(*rows: Any) -> bytes:
    out = b""
    for row in rows:
        data = row.SerializeToString() if not isinstance(row, bytes) else row
        out += encode_varint(len(data)) + data
    return out


def p_triple(s_: Any, p: Any, o: Any) -> Any:
    return pb.RDF_StreamRow(triple=pb.RDF_Triple(S=s_, P=p, O=o))


PS, PP, PO = p_iri("http://s"), p_iri("http://p"), p_iri("http://o")


def decode(name: str, data: bytes, limits: Limits | None = None) -> list[Any]:
    return list(decode_bytes(name, data, NTriplesTerms(), source="in.bin", limits=limits))


def fails(name: str, data: bytes, rule: str, *, row: int = 0, limits: Limits | None = None) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(name, data, limits)
    error = info.value
    assert rule in error.rule, error.rule
    assert error.row == row and error.source == "in.bin"
    assert "\n" not in str(error) and str(error).startswith("in.bin, byte ")
    return error


# -- truncation and varints ------------------------------------------------------------------


def test_truncated_thrift_row() -> None:
    good = t_triple_row(S, P, O)
    error = fails("rt", good + good[:-1], "truncated row", row=1)
    assert error.offset == len(good)


def test_truncated_protobuf_row() -> None:
    good = p_rows(p_triple(PS, PP, PO))
    error = fails("rpb", good + good[:-3], "truncated row", row=1)
    assert error.offset == len(good)


def test_protobuf_field_running_past_its_row() -> None:
    body = p_triple(PS, PP, PO).SerializeToString()
    cut = body[:-2]  # the row length says what is there, but the last field announces more
    fails("rpb", encode_varint(len(cut)) + cut, "truncated field")


def test_bad_varint() -> None:
    fails("rpb", b"\x80" * 11, "bad varint")
    fails("rt", b"\x1c\x18" + b"\xff" * 11, "bad varint")


# -- types and unions -------------------------------------------------------------------------


def test_wrong_thrift_field_type() -> None:
    # Field S of RDF_Triple sent as an i32.
    fails("rt", b"\x2c" + b"\x15\x02" + END + END, "wrong field type")
    # valInteger sent as a string.
    fails("rt", t_triple_row(S, P, t_member(10, s("12"), 8)), "field valInteger of RDF_Term has Thrift type string")


def test_wrong_protobuf_wire_type() -> None:
    # RDF_Term.iri (a message) sent as a varint: field 1, wire type 0.
    term = b"\x08\x01"
    triple = b"\x0a" + bytes([len(term)]) + term
    row = b"\x12" + bytes([len(triple)]) + triple
    fails("rpb", p_rows(row), "field iri of RDF_Term has wire type varint")


def test_unknown_union_member() -> None:
    fails("rt", t_triple_row(S, P, t_member(13, END)), "unknown RDF_Term member, field id 13")
    fails("rt", t_member(7, END) + END, "unknown RDF_StreamRow member, field id 7")
    term = encode_varint((30 << 3) | 2) + b"\x00"  # RDF_Term with only an unknown field 30
    triple = pb.RDF_Triple(S=PS, P=PP).SerializeToString() + b"\x1a" + bytes([len(term)]) + term
    fails("rpb", p_rows(b"\x12" + bytes([len(triple)]) + triple), "unknown RDF_Term member, field 30")


def test_union_with_two_members() -> None:
    two = b"\x1c\x18" + s("http://x") + END + b"\x1c\x18" + s("b") + END + END  # iri then bnode
    fails("rt", t_triple_row(S, P, two), "RDF_Term has more than one member set")
    fails("rt", t_triple_row(S, P, O)[:-1] + b"\x1c" + END + END, "RDF_StreamRow has more than one member set")


def test_empty_rows_and_missing_terms() -> None:
    fails("rt", END, "RDF_StreamRow has no member set")
    fails("rpb", b"\x00", "RDF_StreamRow has no member set")
    fails("rt", b"\x2c" + b"\x1c" + S + b"\x1c" + P + END + END, "RDF_Triple without required field O")
    fails("rpb", p_rows(pb.RDF_StreamRow(triple=pb.RDF_Triple(S=PS, P=PP))), "RDF_Triple without O")
    fails("rt", t_triple_row(S, P, b"\x1c\x28" + s("x") + END + END), "RDF_IRI without required field iri")


# -- data rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "what"), [(5, "a variable (RDF_VAR)"), (6, "ANY"), (7, "UNDEF")])
def test_thrift_variables_any_undef_refused(field: int, what: str) -> None:
    body = b"\x18" + s("x") + END if field == 5 else END
    fails("rt", t_triple_row(S, P, t_member(field, body)), f"{what} in data")


@pytest.mark.parametrize(
    ("term", "what"),
    [
        (pb.RDF_Term(variable=pb.RDF_Var(name="x")), "a variable (RDF_Var)"),
        (pb.RDF_Term(any=pb.RDF_ANY()), "ANY"),
        (pb.RDF_Term(undefined=pb.RDF_UNDEF()), "UNDEF"),
    ],
)
def test_protobuf_variables_any_undef_refused(term: Any, what: str) -> None:
    fails("rpb", p_rows(p_triple(PS, PP, term)), f"{what} in data (variables, ANY and UNDEF")


def test_undeclared_prefix() -> None:
    name = b"\x4c\x18" + s("ex") + b"\x18" + s("local") + END + END
    fails("rt", t_triple_row(S, P, name), "undeclared prefix 'ex'")
    decl = pb.RDF_StreamRow(prefixDecl=pb.RDF_PrefixDecl(prefix="ex", uri="http://ex/"))
    term = pb.RDF_Term(prefixName=pb.RDF_PrefixName(prefix="ex", localName="a"))
    other = pb.RDF_Term(prefixName=pb.RDF_PrefixName(prefix="ot", localName="a"))
    events = decode("rpb", p_rows(decl, p_triple(term, PP, PO)))
    assert events[1].s == "<http://ex/a>"
    fails("rpb", p_rows(decl, p_triple(other, PP, PO)), "undeclared prefix 'ot'", row=1)
    literal = pb.RDF_Term(literal=pb.RDF_Literal(lex="1", dtPrefix=pb.RDF_PrefixName(prefix="xsd", localName="int")))
    fails("rpb", p_rows(p_triple(PS, PP, literal)), "undeclared prefix 'xsd'")


def test_repeat() -> None:
    fails("rt", t_triple_row(REPEAT, P, O), "REPEAT in the first statement row")
    fails("rpb", p_rows(p_triple(pb.RDF_Term(repeat=pb.RDF_REPEAT()), PP, PO)), "REPEAT in the first statement row")
    # A prefix row is no statement row: REPEAT still has nothing to repeat.
    fails("rt", t_prefix_row("a", "http://a/") + t_triple_row(REPEAT, P, O), "REPEAT in the first", row=1)
    events = decode("rt", t_triple_row(S, P, O) + t_prefix_row("a", "http://a/") + t_triple_row(REPEAT, REPEAT, S))
    assert (events[2].s, events[2].p, events[2].o) == ("<http://s>", "<http://p>", "<http://s>")
    fails("rt", t_triple_row(S, P, O) + t_quad_row(S, P, O, REPEAT), "REPEAT in G but the previous row", row=1)
    nested = t_member(9, b"\x1c" + REPEAT + b"\x1c" + P + b"\x1c" + O + END)
    fails("rt", t_triple_row(S, P, O) + t_triple_row(S, P, nested), "REPEAT inside a triple term", row=1)


def test_base_direction_refused() -> None:
    literal = b"\x3c" + b"\x18" + s("x") + b"\x18" + s("en") + b"\x38" + s("ltr") + END + END  # fields 1, 2, 5
    fails("rt", t_triple_row(S, P, literal), "base direction")
    lit = b"\x0a\x01x" + b"\x2a\x07en--ltr"  # lex, then langdir (field 5)
    term = b"\x1a" + bytes([len(lit)]) + lit
    triple = pb.RDF_Triple(S=PS, P=PP).SerializeToString() + b"\x1a" + bytes([len(term)]) + term
    fails("rpb", p_rows(b"\x12" + bytes([len(triple)]) + triple), "base direction")


def test_literal_with_language_and_datatype() -> None:
    literal = b"\x3c" + b"\x18" + s("x") + b"\x18" + s("en") + b"\x18" + s("http://dt") + END + END
    fails("rt", t_triple_row(S, P, literal), "both a language tag and a datatype")


# -- limits ---------------------------------------------------------------------------------------


def test_oversize_string_refused_before_it_arrives() -> None:
    decoder = RdfThriftDecoder(NTriplesTerms(), source="in.rt", limits=Limits(max_frame_bytes=100))
    # Only the header and the announced length: the reader must not wait for (or allocate) 10 MB.
    decoder.feed(b"\x2c\x1c\x1c\x18" + encode_varint(10_000_000))
    with pytest.raises(DecodeError, match="oversize string"):
        decoder.next_event()


def test_oversize_protobuf_row_refused_before_it_arrives() -> None:
    decoder = RdfProtobufDecoder(NTriplesTerms(), source="in.rpb", limits=Limits(max_frame_bytes=100))
    decoder.feed(encode_varint(10_000_000))
    with pytest.raises(DecodeError, match="oversize row"):
        decoder.next_event()


def test_oversize_thrift_row_of_small_strings() -> None:
    long = t_member(9, b"\x1c" + S + b"\x1c" + P + b"\x1c" + O + END)
    for _ in range(3):
        long = t_member(9, b"\x1c" + long + b"\x1c" + P + b"\x1c" + O + END)
    fails("rt", t_triple_row(S, P, long)[:-5], "oversize row", limits=Limits(max_frame_bytes=60))


def test_nesting_limit() -> None:
    term = O
    for _ in range(5):
        term = t_member(9, b"\x1c" + S + b"\x1c" + P + b"\x1c" + term + END)
    assert decode("rt", t_triple_row(S, P, term), Limits(max_nesting=5))
    fails("rt", t_triple_row(S, P, term), "nesting limit", limits=Limits(max_nesting=4))


def test_decimal_scale_cannot_blow_up() -> None:
    decimal = b"\x16" + encode_varint(2) + b"\x15" + encode_varint((1 << 32) - 2) + END  # scale 2^31 - 1
    fails("rt", t_triple_row(S, P, t_member(12, decimal)), "oversize value")
    term = pb.RDF_Term(valDecimal=pb.RDF_Decimal(value=1, scale=-(1 << 31)))
    fails("rpb", p_rows(p_triple(PS, PP, term)), "oversize value")


def test_invalid_utf8() -> None:
    fails("rt", t_triple_row(S, P, b"\x1c\x18\x02\xff\xfe" + END + END), "not valid UTF-8")


# -- decoder contract -----------------------------------------------------------------------------


def test_events_before_an_error_come_first_and_the_decoder_stays_failed() -> None:
    decoder = RdfThriftDecoder(NTriplesTerms(), source="in.rt")
    decoder.feed(t_triple_row(S, P, O) + t_triple_row(S, P, t_member(13, END)))
    decoder.close()
    first = decoder.next_event()
    assert first.o == "<http://o>"  # type: ignore[union-attr]
    for _ in range(2):
        with pytest.raises(DecodeError, match="row 1: RDF Thrift: unknown RDF_Term member"):
            decoder.next_event()


def test_partial_row_needs_data_until_closed() -> None:
    decoder = RdfProtobufDecoder(NTriplesTerms())
    decoder.feed(p_rows(p_triple(PS, PP, PO))[:5])
    assert decoder.next_event() is NEED_DATA
    decoder.close()
    with pytest.raises(DecodeError, match="truncated row"):
        decoder.next_event()


@pytest.mark.parametrize("name", ["rt", "rpb"])
def test_random_corruption_only_raises_decode_error(name: str) -> None:
    adapter = NTriplesTerms()
    quads = [
        ("<http://s>", "<http://p>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>', None),
        ("_:b", "<http://p>", '"x"@en', "<http://g>"),
        ("<http://s>", "<http://p>", "<<( <http://a> <http://b> 1.5 )>>", None),
    ]
    data = encode_statements(name, quads, adapter, namespaces=[("s", "<http://s>")], values=True, repeat=True)
    rng = random.Random(17)
    failures = 0
    for _ in range(1500):
        corrupt = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        try:
            decode(name, bytes(corrupt), Limits(max_frame_bytes=4096, max_nesting=8))
        except DecodeError:
            failures += 1
    assert failures > 300  # corruption is mostly noticed; nothing else ever escapes


# -- encoder errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rt", "rpb"])
def test_encoder_refuses_what_it_cannot_write(name: str) -> None:
    adapter = NTriplesTerms()
    encoder = lookup(name).encoder(adapter)
    with pytest.raises(EncodeError, match="must be an IRI"):
        encoder.namespace("x", '"literal"')
    with pytest.raises(EncodeError, match="default graph"):
        encoder.statement(adapter.default_graph(), "<http://p>", "<http://o>")
    encoder.finish()
    with pytest.raises(EncodeError, match="after finish"):
        encoder.statement("<http://s>", "<http://p>", "<http://o>")


# -- the term caches must not outlive what a term's bytes mean ----------------------------------


def test_redeclared_prefix_changes_what_cached_bytes_mean() -> None:
    name = b"\x4c\x18" + s("ex") + b"\x18" + s("a") + END + END
    data = t_prefix_row("ex", "http://one/") + t_triple_row(name, P, O)
    data += t_prefix_row("ex", "http://two/") + t_triple_row(name, P, O)
    assert [e.s for e in decode("rt", data)[1::2]] == ["<http://one/a>", "<http://two/a>"]
    term = pb.RDF_Term(prefixName=pb.RDF_PrefixName(prefix="ex", localName="a"))
    rows = [
        pb.RDF_StreamRow(prefixDecl=pb.RDF_PrefixDecl(prefix="ex", uri="http://one/")),
        p_triple(term, PP, PO),
        pb.RDF_StreamRow(prefixDecl=pb.RDF_PrefixDecl(prefix="ex", uri="http://two/")),
        p_triple(term, PP, PO),
    ]
    assert [e.s for e in decode("rpb", p_rows(*rows))[1::2]] == ["<http://one/a>", "<http://two/a>"]


def test_repeat_is_never_taken_from_the_cache() -> None:
    repeat = pb.RDF_Term(repeat=pb.RDF_REPEAT())
    rows = [p_triple(PS, PP, PO), p_triple(repeat, PP, PO), p_triple(PO, PP, PO), p_triple(repeat, PP, PO)]
    assert [e.s for e in decode("rpb", p_rows(*rows))] == ["<http://s>", "<http://s>", "<http://o>", "<http://o>"]
    data = t_triple_row(S, P, O) + t_triple_row(REPEAT, P, O) + t_triple_row(O, P, O) + t_triple_row(REPEAT, P, O)
    assert [e.s for e in decode("rt", data)] == ["<http://s>", "<http://s>", "<http://o>", "<http://o>"]


def test_cached_term_in_another_position_is_still_checked() -> None:
    # A literal term first seen as an object, then as a subject: the bytes are cached, and the
    # format allows any term anywhere (generalized data): both decode to the same literal.
    lit = b"\x3c\x18" + s("x") + END + END
    events = decode("rt", t_triple_row(S, P, lit) + t_triple_row(lit, P, O))
    assert events[0].o == events[1].s == '"x"'


def test_number_of_declared_prefixes_is_bounded() -> None:
    rows = b"".join(t_prefix_row(f"p{i}", f"http://p{i}/") for i in range(5))
    assert len(decode("rt", rows + t_prefix_row("p0", "http://again/"), Limits(max_prefix_table_size=5))) == 6
    limits = Limits(max_prefix_table_size=5)
    fails("rt", rows + t_prefix_row("p5", "http://p5/"), "more than 5 distinct prefixes", row=5, limits=limits)
