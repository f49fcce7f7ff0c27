"""RDF Patch text (``specs/rdf-patch-text.md``): reader, writer, positions and errors."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef

from patchsync.codec.patch_decoder import END, NEED_DATA
from patchsync.codec.rdfp import _PLAIN_STATEMENT, RdfPatchTextReader, RdfPatchTextWriter, read_rdfp, write_rdfp
from patchsync.errors import DecodeError, EncodeError, UsageError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    Options,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
    strip_position,
)
from patchsync.options import Limits, PatchOptions
from patchsync.terms.ntriples import MAX_NESTING, NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

from .helpers import JVM_PATCHES

NT = NTriplesTerms()
FIXTURES = sorted(JVM_PATCHES.glob("*.rdfp"))
EVENT_CODES = {
    Header: "H",
    TxStart: "TX",
    TxCommit: "TC",
    TxAbort: "TA",
    PrefixAdd: "PA",
    PrefixDelete: "PD",
    Add: "A",
    Delete: "D",
}


def stripped(events: list[Event]) -> list[Event]:
    return [strip_position(e) for e in events]


def read_bytewise(data: bytes, adapter: Any = None, **kwargs: Any) -> list[Event]:
    reader: RdfPatchTextReader[Any] = RdfPatchTextReader(adapter, **kwargs)
    events: list[Event] = []
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
        events.extend(reader)
    reader.close()
    events.extend(reader)
    return events


def line_offset(data: bytes, line: int) -> int:
    """Byte offset where 1-based line ``line`` starts."""
    return sum(len(chunk) + 1 for chunk in data.split(b"\n")[: line - 1])


# -- the Jena-made fixtures ---------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_rows_match_a_line_count(path: Path) -> None:
    data = path.read_bytes()
    events = read_rdfp(data, NT, source=path.name)
    lines = Counter(line.split(" ", 1)[0] for line in data.decode("utf-8").splitlines())
    got = Counter(EVENT_CODES[type(e)] for e in events if type(e) in EVENT_CODES)
    for code in EVENT_CODES.values():
        assert got[code] == lines[code], code
    # No Z rows in these files: the whole file is one patch, ended at the end of the stream.
    assert [type(e) for e in events].count(PatchEnd) == 1
    assert type(events[-1]) is PatchEnd
    assert events[-1].offset == len(data)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("adapter", [NT, RdflibTerms()], ids=["ntriples", "rdflib"])
def test_fixture_write_read_round_trip(path: Path, adapter: Any) -> None:
    events = read_rdfp(path.read_bytes(), adapter)
    text = write_rdfp(events, adapter)
    assert stripped(read_rdfp(text, adapter)) == stripped(events)
    # Writing is deterministic: the written text is a fixed point.
    assert write_rdfp(read_rdfp(text, adapter), adapter) == text


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_byte_at_a_time_equals_whole(path: Path) -> None:
    data = path.read_bytes()
    assert read_bytewise(data, NT) == read_rdfp(data, NT)


def test_fixture_positions_are_line_offsets_and_numbers() -> None:
    path = JVM_PATCHES / "triples-all-features-rdf11.rdfp"
    data = path.read_bytes()
    for event in read_rdfp(data, NT)[:-1]:
        assert event.frame == 0
        assert event.offset == line_offset(data, event.row)
    # Line 5 holds "chrząszcz": offsets count bytes, not characters.
    assert read_rdfp(data, NT)[5].offset == line_offset(data, 6)


def test_fixture_terms() -> None:
    events = read_rdfp((JVM_PATCHES / "quads-all-features-rdf11.rdfp").read_bytes())
    assert events[0] == Header("id", URIRef("uuid:bbe2edae-325e-11ec-abcc-a70bbba0dfb1"), 0, 0, 1)
    assert events[2].value == BNode("b1")
    assert events[4].value == Literal("chrząszcz", lang="pl")
    pa = events[6]
    assert strip_position(pa) == PrefixAdd(
        "rdf", URIRef("http://www.w3.org/2000/01/rdf-schema#"), URIRef("http://example/g1")
    )
    assert strip_position(events[9]) == PrefixDelete("rdf", None, URIRef("http://example/g1"))
    assert strip_position(events[10]) == PrefixDelete("rdf", None, None)
    assert strip_position(events[13]) == Add(
        URIRef("http://example/s"), URIRef("http://example/p1"), URIRef("http://example/o2"), None
    )


# -- the spec's examples and syntax details -----------------------------------------

SPEC_EXAMPLE = b"""H id <uuid:0686c69d-8f89-4496-acb5-744f0157a8db> .
H prev <uuid:3ee0eca0-6d5f-4b4d-85db-f69ab1167eb1> .
TX .
PA "rdf" "http://www.w3.org/1999/02/22-rdf-syntax-ns#" .
PA "owl" "http://www.w3.org/2002/07/owl#" .
PA "rdfs" "http://www.w3.org/2000/01/rdf-schema#" .
A <http://example/SubClass> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2002/07/owl#Class> .
A <http://example/SubClass> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://example/SUPER_CLASS> .
A <http://example/SubClass> <http://www.w3.org/2000/01/rdf-schema#label> "SubClass" .
TC .
"""


def test_spec_example_with_quoted_namespaces() -> None:
    # Spec, "Example": PA takes the namespace as a quoted string too (Jena's writer does so).
    events = read_rdfp(SPEC_EXAMPLE, NT)
    assert [type(e) for e in events] == [Header, Header, TxStart] + [PrefixAdd] * 3 + [Add] * 3 + [TxCommit, PatchEnd]
    assert strip_position(events[3]) == PrefixAdd("rdf", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#>")
    assert events[1].value == "<uuid:3ee0eca0-6d5f-4b4d-85db-f69ab1167eb1>"


def test_bare_and_quoted_keywords() -> None:
    # Spec, "Header" and "Prefixes": a keyword or a quoted string.
    text = (
        'H label-pl "x" .\nH "my key" "y" .\nPA rdf <http://r/> .\nPA "" <http://e/> .\nPD rdf .\nPD "" <http://g/> .\n'
    )
    events = stripped(read_rdfp(text, NT))
    assert events[:6] == [
        Header("label-pl", '"x"'),
        Header("my key", '"y"'),
        PrefixAdd("rdf", "<http://r/>"),
        PrefixAdd("", "<http://e/>"),
        PrefixDelete("rdf"),
        PrefixDelete("", None, "<http://g/>"),
    ]


def test_comments_blank_lines_crlf_and_bom() -> None:
    text = (
        b"\xef\xbb\xbf# a comment\r\n"
        b"\r\n"
        b"   \t\r\n"
        b"TX . # a comment after the row\r\n"
        b'  A\t<http://x/s>  <http://x/p>\t"v\\r\\n"  .\r\n'
        b"TC .\r\n"
    )
    events = read_rdfp(text, NT, source="crlf.rdfp")
    assert events == [
        TxStart(line_offset(text, 4), 0, 4),
        Add("<http://x/s>", "<http://x/p>", '"v\\r\\n"', None, line_offset(text, 5), 0, 5),
        TxCommit(line_offset(text, 6), 0, 6),
        PatchEnd(len(text), 0, 7),
    ]
    assert read_bytewise(text, NT, source="crlf.rdfp") == events


def test_escapes_bnodes_rdf_star_languages_and_datatypes() -> None:
    text = (
        r"A <_:weird\u0020label> <http://x/p> "
        r'"tab\tquote\"apos\'bs\\u\u00E9U\U0001F600" .'
        "\n"
        r"D _:b1 <http://x/p> << << _:b1 <http://x/p> <http://x/o> >> <http://x/q> "
        r'"5"^^<http://www.w3.org/2001/XMLSchema#integer> >> <http://x/g> .'
        "\n"
        r'A <http://x/s> <http://x/p> "hello"@en-GB .'
        "\n"
    )
    a, d, a2, end = read_rdfp(text)
    assert a.s == BNode("weird label")
    assert a.o == Literal("tab\tquote\"apos'bs\\uéU😀")
    assert d.s == BNode("b1")
    inner = (BNode("b1"), URIRef("http://x/p"), URIRef("http://x/o"))
    assert d.o == (
        inner,
        URIRef("http://x/q"),
        Literal("5", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer")),
    )
    assert d.g == URIRef("http://x/g")
    assert a2.o == Literal("hello", lang="en-GB")
    assert type(end) is PatchEnd


def test_jena_turtle_abbreviations_and_tb_alias() -> None:
    # Jena's patch writer prints numbers and booleans as Turtle does; Jena reads TB as TX.
    events = read_rdfp("TB .\nA <http://x/s> <http://x/p> 12 .\nA <http://x/s> <http://x/p> true.\nTC .\n")
    assert type(events[0]) is TxStart
    assert events[1].o == Literal("12", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer"))
    assert events[2].o == Literal("true", datatype=URIRef("http://www.w3.org/2001/XMLSchema#boolean"))


def test_compact_spacing_is_accepted() -> None:
    # N-Triples needs no space between terms, nor before the dot.
    events = stripped(read_rdfp("A<http://x/s><http://x/p>_:o.\nTX.\nTC.", NT))
    assert events == [Add("<http://x/s>", "<http://x/p>", "_:o"), TxStart(), TxCommit(), PatchEnd()]


@pytest.mark.parametrize(
    "row",
    [
        "A <http://x/s> <http://x/p> <http://x/o> .",
        "D _:b1 <http://x/p> _:b2.x <http://x/g> .",
        'A <http://x/s> <http://x/p> "tab\tand é" .',
        'A <http://x/s> <http://x/p> "v"@en-GB <http://x/g> .',
        'D <http://x/s> <http://x/p> ""^^<http://x/dt> _:g .',
        "  A\t<http://x/s>\t<http://x/p>\t<http://x/o>\t.\t",
    ],
)
def test_fast_path_agrees_with_the_general_scanner(row: str) -> None:
    # Plain A/D rows take a one-regex fast path; a trailing comment forces the general one.
    assert _PLAIN_STATEMENT.fullmatch(row) is not None
    assert _PLAIN_STATEMENT.fullmatch(row + " # c") is None
    for adapter in (NT, RdflibTerms()):
        assert stripped(read_rdfp(row, adapter)) == stripped(read_rdfp(row + " # c", adapter))


# -- patch boundaries (Z) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "patches"),
    [
        ("", []),
        ("# only a comment\n\n", []),
        ("TX .\nTC .\n", [2]),  # no Z: the stream is one patch
        ("TX .\nTC .\nZ .\n", [2]),  # Z after the last patch: no empty patch follows
        ("TX .\nTC .\nZ .\nTX .\nTA .\n", [2, 2]),  # content after the last Z is a patch
        ("Z .\nZ .\n", [0, 0]),  # each Z ends a patch, even an empty one
        ("H id <uuid:1> .\nZ .\nH id <uuid:2> .\nZ .\n", [1, 1]),
    ],
)
def test_z_rows_end_patches(text: str, patches: list[int]) -> None:
    events = read_rdfp(text, NT)
    sizes: list[int] = []
    count = 0
    for e in events:
        if type(e) is PatchEnd:
            sizes.append(count)
            count = 0
        else:
            count += 1
    assert count == 0
    assert sizes == patches


def test_z_row_position() -> None:
    events = read_rdfp("TX .\nTC .\nZ .\n", NT)
    assert events[-1] == PatchEnd(10, 0, 3)


# -- streaming ----------------------------------------------------------------------


def test_partial_line_waits_for_more_data() -> None:
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT)
    reader.feed(b"TX .\nA <http://x/s> <http://x/p>")
    assert reader.next_event() == TxStart(0, 0, 1)
    assert reader.next_event() is NEED_DATA
    reader.feed(b' "o" .\nTC .')
    assert reader.next_event() == Add("<http://x/s>", "<http://x/p>", '"o"', None, 5, 0, 2)
    assert reader.next_event() is NEED_DATA  # "TC ." has no newline yet
    reader.close()
    assert list(reader) == [TxCommit(39, 0, 3), PatchEnd(43, 0, 4)]
    assert reader.next_event() is END
    with pytest.raises(UsageError):
        reader.feed(b"more")


def test_utf8_split_across_feeds() -> None:
    data = 'A <http://x/s> <http://x/p> "chrząszcz 😀" .\n'.encode()
    assert read_bytewise(data, NT) == read_rdfp(data, NT)


def test_line_length_limit() -> None:
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT, source="big", limits=Limits(max_frame_bytes=64))
    reader.feed(b"TX .\nA " + b"x" * 100)
    assert reader.next_event() == TxStart(0, 0, 1)
    with pytest.raises(DecodeError, match="line longer than the limit of 64 bytes") as info:
        reader.next_event()
    assert "big, byte 5, line 2" in str(info.value)


# -- errors -------------------------------------------------------------------------

# (input, expected words of the rule, line of the error). Every rule the reader checks.
BAD = [
    ("TX .\nXX .\n", "unknown row code 'XX'", 2),
    ("A1 <http://x/s> <http://x/p> <http://x/o> .\n", "row code", 1),
    ("<http://x/s> <http://x/p> <http://x/o> .\n", "row code", 1),
    ("A <http://x/s> <http://x/p> <http://x /o> .\n", "not allowed in an IRI", 1),
    ('A <http://x/s> <http://x/p> "open .\n', "unterminated string", 1),
    ("A <http://x/s> <http://x/p> ex:o .\n", "expected an RDF term", 1),
    ("A <http://x/s> <http://x/p> <http://x/o>\n", "missing '.'", 1),
    ("TX\n", "missing '.'", 1),
    ("A <http://x/s> <http://x/p> <http://x/o> # no dot\n", "missing '.'", 1),
    ("A <http://x/s> <http://x/p> .\n", "A row has 2 terms (expected 3 or 4)", 1),
    ("D <http://x/s> <http://x/p> <http://x/o> <http://x/g> <http://x/h> .\n", "too many terms", 1),
    ("H id .\n", "H row has 0 terms (expected 1)", 1),
    ("H id <http://x/a> <http://x/b> .\n", "too many terms", 1),
    ("H <http://x/k> <http://x/a> .\n", "header key", 1),
    ("TX <http://x/a> .\n", "TX row has too many terms", 1),
    ("PD rdf <http://x/g> <http://x/h> .\n", "too many terms", 1),
    ("PA rdf .\n", "PA namespace", 1),
    ("PA rdf <_:b> .\n", "not a blank node", 1),
    ("PA <http://x/> <http://x/> .\n", "prefix name", 1),
    ("TX . TC .\n", "one row per line", 1),
    ("TX .\nA <http://x/s> <http://x/p> \xff .\n", "invalid UTF-8", 2),
    ("TX .\nTC .\nTC .\n", "TC without an open transaction", 3),
    ("TA .\n", "TA without an open transaction", 1),
    (
        "TX .\nTX .\n",
        "TX while a transaction is open (transactions do not nest: the previous transaction operation MUST NOT be a transaction start); the open transaction started on line 1",
        2,
    ),
    (
        "TX .\nA <http://x/s> <http://x/p> <http://x/o> .\nZ .\n",
        "Z (end of patch) inside a transaction (a transaction MUST start and commit/abort within one patch); the open transaction started on line 1",
        3,
    ),
    (
        "TX .\nA <http://x/s> <http://x/p> <http://x/o> .\n",
        "stream ends inside a transaction (a transaction MUST start and commit/abort within one patch); the open transaction started on line 1",
        3,
    ),
    ("TX .\rTC .\n", "one row per line", 1),
]


@pytest.mark.parametrize(("text", "rule", "line"), BAD, ids=[b[1] for b in BAD])
def test_each_rule_raises_a_one_line_decode_error(text: str, rule: str, line: int) -> None:
    data = text.encode("latin-1") if "\xff" in text else text.encode()
    with pytest.raises(DecodeError) as info:
        read_rdfp(data, NT, source="bad.rdfp")
    message = str(info.value)
    assert rule in message
    assert "\n" not in message
    assert message.startswith(f"bad.rdfp, byte {line_offset(data, line)}, line {line}: ")
    assert info.value.line == line
    assert info.value.offset == line_offset(data, line)


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
def test_reader_hands_out_events_before_the_error_and_stays_failed(bytewise: bool) -> None:
    data = b"TX .\nA <http://x/s> <http://x/p> <http://x/o> .\nbogus\nTC .\n"
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT)
    good: list[Event] = []
    with pytest.raises(DecodeError, match="line 3") as first:
        for chunk in [data[i : i + 1] for i in range(len(data))] if bytewise else [data]:
            reader.feed(chunk)
            good.extend(reader)
    assert [type(e) for e in good] == [TxStart, Add]
    with pytest.raises(DecodeError) as again:
        reader.next_event()
    assert again.value is first.value


def test_adapter_refusal_is_a_decode_error() -> None:
    # rdflib refuses some language tags N-Triples accepts; that must not escape as ValueError.
    class Picky(RdflibTerms):
        def iri(self, value: str) -> URIRef:
            raise ValueError("no IRIs today")

    with pytest.raises(DecodeError, match="term rejected by the term adapter: no IRIs today"):
        read_rdfp("A <http://x/s> <http://x/p> <http://x/o> .\n", Picky())


def test_deep_nesting_is_a_decode_error_not_a_recursion_error() -> None:
    def nested(depth: int) -> str:
        text = "<http://x/o>"
        for _ in range(depth):
            text = f"<< <http://x/s> <http://x/p> {text} >>"
        return f"A <http://x/s> <http://x/p> {text} .\n"

    assert len(read_rdfp(nested(MAX_NESTING), NT)) == 2
    with pytest.raises(DecodeError, match="nested too deeply"):
        read_rdfp(nested(MAX_NESTING + 1), NT)
    # Even a limit raised beyond Python's recursion limit fails cleanly.
    deep = nested(sys.getrecursionlimit() + 10)
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT, limits=Limits(max_nesting=10**6))
    reader.feed(deep.encode())
    with pytest.raises(DecodeError):
        reader.next_event()


FIXTURE_TEXT = b"".join(p.read_bytes() for p in FIXTURES[:3])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mangled_input_only_ever_raises_decode_error(data: st.DataObject) -> None:
    # A small fuzz target: cut, splice and corrupt real patch text.
    text = bytearray(FIXTURE_TEXT)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text) - 1))
        junk = data.draw(
            st.binary(max_size=4) | st.sampled_from([b"<<", b">>", b'"', b"\\", b"\\u", b"_:", b"\n", b" ."])
        )
        text[pos : pos + data.draw(st.integers(0, 3))] = junk
    try:
        read_rdfp(bytes(text), NT)
    except DecodeError as exc:
        assert "line " in str(exc)


# -- the writer ---------------------------------------------------------------------


def test_writer_preferred_style() -> None:
    s, p = NT.iri("http://x/s"), NT.iri("http://x/p")
    events: list[Event] = [
        Options(PatchOptions()),
        Header("id", NT.iri("uuid:1")),
        Header("my key", NT.literal("v")),
        TxStart(),
        PrefixAdd("rdf", NT.iri("http://www.w3.org/1999/02/22-rdf-syntax-ns#")),
        PrefixAdd("ex", NT.iri("http://x/"), NT.iri("http://x/g")),
        PrefixDelete("ex", NT.iri("http://x/"), NT.iri("http://x/g")),  # the IRI has no slot in text
        Add(s, p, NT.literal("a\nb", "en"), NT.default_graph()),
        Delete(NT.bnode("b1"), p, NT.triple(s, p, NT.bnode("odd label")), NT.iri("http://x/g")),
        TxCommit(),
        PatchEnd(),
        TxStart(),
        TxAbort(),
        PatchEnd(),
    ]
    assert write_rdfp(events, NT) == (
        "H id <uuid:1> .\n"
        'H "my key" "v" .\n'
        "TX .\n"
        'PA "rdf" <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .\n'
        'PA "ex" <http://x/> <http://x/g> .\n'
        'PD "ex" <http://x/g> .\n'
        'A <http://x/s> <http://x/p> "a\\nb"@en .\n'
        "D _:b1 <http://x/p> << <http://x/s> <http://x/p> <_:odd\\u0020label> >> <http://x/g> .\n"
        "TC .\n"
        "Z .\n"
        "TX .\n"
        "TA .\n"
        "Z .\n"
    )
    flat = write_rdfp(events, NT, segments=False)
    assert "Z ." not in flat
    assert [type(e) for e in read_rdfp(flat, NT)].count(PatchEnd) == 1


def test_writer_prints_rdflib_terms() -> None:
    events = [
        Add(BNode("b"), URIRef("http://x/p"), Literal("01", datatype=URIRef("http://x/int"), normalize=False)),
        PatchEnd(),
    ]
    assert write_rdfp(events) == 'A _:b <http://x/p> "01"^^<http://x/int> .\nZ .\n'


def test_writer_take_returns_new_text_only() -> None:
    writer: RdfPatchTextWriter[str] = RdfPatchTextWriter(NT)
    writer.send(TxStart())
    assert writer.take() == "TX .\n"
    assert writer.take() == ""
    assert writer.in_transaction
    writer.send(TxCommit())
    assert writer.take() == "TC .\n"


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([TxCommit()], "TC without an open transaction"),
        ([TxAbort()], "TA without an open transaction"),
        ([TxStart(), TxStart()], "TX while a transaction is open"),
        ([TxStart(), PatchEnd()], "inside a transaction"),
        ([PrefixAdd("ex", NT.literal("http://x/"))], "needs a namespace IRI"),
        ([Add(NT.default_graph(), NT.iri("http://x/p"), NT.iri("http://x/o"))], "default graph"),
        ([Add(NT.iri("http://x/s"), NT.iri("http://x/p"), "not a term")], "not an N-Triples term"),
        (["not an event"], "not a patch event"),
    ],
)
def test_writer_refuses_what_would_not_read_back(events: list[Any], message: str) -> None:
    writer: RdfPatchTextWriter[str] = RdfPatchTextWriter(NT)
    with pytest.raises(EncodeError, match=message):
        for event in events:
            writer.send(event)


# -- property: any events round-trip ------------------------------------------------

CHARS = st.one_of(st.sampled_from("\"\\\n\r\t\b\f'<>{}|^` _:.#\x00\x7f"), st.characters(codec="utf-8"))
TEXT = st.text(CHARS, max_size=12)
LANG = st.from_regex(r"[a-zA-Z]{1,8}(-[a-zA-Z0-9]{1,8}){0,2}", fullmatch=True)
# Term specs: unpack-shaped tuples, built with either adapter.
IRIS = st.tuples(st.just("iri"), TEXT.map(lambda t: "http://x/" + t))
BNODES = st.tuples(st.just("bnode"), TEXT)
LITERALS = st.one_of(
    st.tuples(st.just("literal"), TEXT, st.none(), st.none()),
    st.tuples(st.just("literal"), TEXT, LANG, st.none()),
    st.tuples(st.just("literal"), TEXT, st.none(), IRIS.map(lambda i: i[1])),
)
SIMPLE = st.one_of(IRIS, BNODES, LITERALS)
TERMS = st.recursive(SIMPLE, lambda inner: st.tuples(st.just("triple"), inner, inner, inner), max_leaves=6)
GRAPHS = st.one_of(st.none(), IRIS, BNODES)


def build(adapter: Any, spec: Any) -> Any:
    if spec is None:
        return None
    kind = spec[0]
    if kind == "triple":
        return adapter.triple(*(build(adapter, part) for part in spec[1:]))
    return getattr(adapter, kind)(*spec[1:])


CHANGE = st.one_of(
    st.tuples(st.sampled_from(["A", "D"]), TERMS, TERMS, TERMS, GRAPHS),
    st.tuples(st.just("PA"), TEXT, IRIS, GRAPHS),
    st.tuples(st.just("PD"), TEXT, GRAPHS),
)
UNIT = st.tuples(st.sampled_from(["TC", "TA", None]), st.lists(CHANGE, max_size=4))
PATCH = st.tuples(st.lists(st.tuples(TEXT, TERMS), max_size=2), st.lists(UNIT, max_size=3))


def events_of(adapter: Any, patches: list[Any]) -> list[Event]:
    out: list[Event] = []
    for headers, units in patches:
        out.extend(Header(key, build(adapter, value)) for key, value in headers)
        for end, changes in units:
            if end is not None:
                out.append(TxStart())
            for change in changes:
                code = change[0]
                if code in ("A", "D"):
                    terms = [build(adapter, spec) for spec in change[1:]]
                    out.append((Add if code == "A" else Delete)(*terms))
                elif code == "PA":
                    out.append(PrefixAdd(change[1], build(adapter, change[2]), build(adapter, change[3])))
                else:
                    out.append(PrefixDelete(change[1], None, build(adapter, change[2])))
            if end is not None:
                out.append(TxCommit() if end == "TC" else TxAbort())
        out.append(PatchEnd())
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PATCH, max_size=3), st.sampled_from(["ntriples", "rdflib"]))
def test_any_events_round_trip(patches: list[Any], which: str) -> None:
    adapter = NT if which == "ntriples" else RdflibTerms()
    events = events_of(adapter, patches)
    text = write_rdfp(events, adapter)
    assert stripped(read_rdfp(text, adapter)) == events
    # And the same text, fed in awkward pieces, gives the same events with positions.
    data = text.encode()
    reader: RdfPatchTextReader[Any] = RdfPatchTextReader(adapter)
    pieces: list[Event] = []
    for i in range(0, len(data), 7):
        reader.feed(data[i : i + 7])
        pieces.extend(reader)
    reader.close()
    pieces.extend(reader)
    assert pieces == read_rdfp(data, adapter)
