"""N-Triples term formatting, the term scanner and the NTriplesTerms adapter.

Grammar references are to RDF 1.1 N-Triples (IRIREF, BLANK_NODE_LABEL, STRING_LITERAL_QUOTE,
LANGTAG, ECHAR, UCHAR) and to the "Blank nodes" section of ``specs/rdf-patch-text.md``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync.errors import EncodeError
from patchsync.events import Add, PatchEnd, TxCommit, TxStart
from patchsync.options import PatchOptions
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, XSD_STRING, TripleTerm
from patchsync.terms.ntriples import (
    MAX_NESTING,
    NTriplesTerms,
    TermFormatError,
    TermSyntaxError,
    format_bnode,
    format_iri,
    format_literal,
    format_term,
    scan_term,
)
from patchsync.terms.rdflib_adapter import RdflibTerms

from .helpers import content, decode, encode

NT = NTriplesTerms()
XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"

# -- formatting ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iri", "text"),
    [
        ("http://example/a", "<http://example/a>"),
        ("http://example/é", "<http://example/é>"),  # UTF-8 is allowed raw in IRIREF
        ("http://ex/a b", "<http://ex/a\\u0020b>"),
        ('http://ex/<>"{}|^`\\', "<http://ex/\\u003C\\u003E\\u0022\\u007B\\u007D\\u007C\\u005E\\u0060\\u005C>"),
        ("http://ex/\n\x00", "<http://ex/\\u000A\\u0000>"),
        # An IRI that starts with "_:" must not read back as the <_:label> blank node form.
        ("_:x", "<_\\u003Ax>"),
        ("", "<>"),
    ],
)
def test_format_iri_escapes_characters_iriref_excludes(iri: str, text: str) -> None:
    assert format_iri(iri) == text
    assert scan_term(text, 0, NT) == (text, len(text))
    assert NT.unpack(text) == (IRI, iri)


@pytest.mark.parametrize(
    ("label", "text"),
    [
        ("b1", "_:b1"),
        ("1a", "_:1a"),  # BLANK_NODE_LABEL may start with a digit
        ("a.b", "_:a.b"),
        ("a-b_c", "_:a-b_c"),
        ("ŝ", "_:ŝ"),
        # Not a BLANK_NODE_LABEL: the RDF Patch <_:label> form, with IRI escapes.
        ("a.", "<_:a.>"),
        ("a b", "<_:a\\u0020b>"),
        ("-x", "<_:-x>"),
        ("x>y", "<_:x\\u003Ey>"),
        ("", "<_:>"),
    ],
)
def test_format_bnode_uses_the_rdf_patch_form_when_needed(label: str, text: str) -> None:
    assert format_bnode(label) == text
    assert NT.bnode(label) == text
    assert NT.unpack(text) == (BNODE, label)


@pytest.mark.parametrize(
    ("lex", "text"),
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("t\tb\bn\nr\rf\f", '"t\\tb\\bn\\nr\\rf\\f"'),  # ECHAR for these five
        ("\x01\x1f\x7f", '"\\u0001\\u001F\\u007F"'),  # other controls as UCHAR
        ("it's", '"it\'s"'),  # the apostrophe is read escaped but written raw
        ("😀 ĉ", '"😀 ĉ"'),
    ],
)
def test_format_literal_escapes(lex: str, text: str) -> None:
    assert format_literal(lex) == text
    assert NT.unpack(text) == (LITERAL, lex, None, None)


def test_format_literal_with_language_and_datatype() -> None:
    assert format_literal("a", "en-GB") == '"a"@en-GB'
    assert format_literal("1", None, XSD_INT) == f'"1"^^<{XSD_INT}>'
    # An explicit xsd:string is kept, so the term is printed exactly as it was given.
    assert format_literal("a", None, XSD_STRING) == f'"a"^^<{XSD_STRING}>'
    assert format_literal("a", "", None) == '"a"'


@pytest.mark.parametrize("lang", ["en us", "en-", "-en", "e_n", "1en"])
def test_bad_language_tag_has_no_ntriples_form(lang: str) -> None:
    # LANGTAG ::= '@' [a-zA-Z]+ ('-' [a-zA-Z0-9]+)*
    with pytest.raises(TermFormatError):
        NT.literal("a", lang)
    # It is both an EncodeError (for writers) and a ValueError (for decoders).
    assert issubclass(TermFormatError, EncodeError)
    assert issubclass(TermFormatError, ValueError)


@pytest.mark.parametrize("build", [NT.iri, NT.bnode, NT.literal])
def test_lone_surrogates_have_no_utf8_form(build: Any) -> None:
    with pytest.raises(TermFormatError, match="surrogate"):
        build("a\ud800b")


# -- scanning -----------------------------------------------------------------------


def test_scan_term_returns_the_next_position() -> None:
    line = 'A <http://x/s> _:b1 "v"@en <http://x/g> .'
    s, pos = scan_term(line, 2, NT)
    assert (s, line[pos]) == ("<http://x/s>", " ")
    b, pos = scan_term(line, pos + 1, NT)
    assert b == "_:b1"
    lit, pos = scan_term(line, pos + 1, NT)
    assert lit == '"v"@en'
    g, pos = scan_term(line, pos + 1, NT)
    assert (g, line[pos:]) == ("<http://x/g>", " .")


def test_scan_bnode_label_stops_before_a_final_dot() -> None:
    # BLANK_NODE_LABEL cannot end with '.', so "_:b1." is the label b1 then the row's DOT.
    assert scan_term("_:b1.", 0, NT) == ("_:b1", 4)
    assert scan_term("_:a.b .", 0, NT) == ("_:a.b", 5)


@pytest.mark.parametrize(
    ("text", "lex"),
    [
        (r'"\t\b\n\r\f\"\'\\"', "\t\b\n\r\f\"'\\"),
        (r'"\u00E9\u00e9"', "éé"),
        (r'"\U0001F600"', "😀"),
        (r'"\uD83D\uDE00"', "😀"),  # a surrogate pair written as two \u escapes is one character
        ('"raw é 😀"', "raw é 😀"),
    ],
)
def test_scan_literal_escapes(text: str, lex: str) -> None:
    term, end = scan_term(text, 0, RdflibTerms())
    assert end == len(text)
    assert term == Literal(lex)


def test_scan_iri_uchar_escapes_and_blank_node_form() -> None:
    rdf = RdflibTerms()
    assert scan_term(r"<http://x/\u0020\U0001F600>", 0, rdf)[0] == URIRef("http://x/ 😀")
    # <_:label> is a blank node (RDF Patch, "Blank nodes"); its label may use IRI escapes.
    assert scan_term("<_:a\\u0020b>", 0, rdf)[0] == BNode("a b")
    assert scan_term("<_:weird~label>", 0, rdf)[0] == BNode("weird~label")
    # Escaping the colon keeps an IRI whose text starts with "_:" an IRI.
    assert scan_term(r"<_\u003Ax>", 0, rdf)[0] == URIRef("_:x")


def test_scan_typed_and_language_literals() -> None:
    rdf = RdflibTerms()
    assert scan_term('"chrząszcz"@pl', 0, rdf)[0] == Literal("chrząszcz", lang="pl")
    assert scan_term('"x"@en-Latn-GB', 0, rdf)[0] == Literal("x", lang="en-Latn-GB")
    assert scan_term(f'"01"^^<{XSD_INT}>', 0, rdf)[0] == Literal("01", datatype=URIRef(XSD_INT), normalize=False)


def test_scan_nested_quoted_triples() -> None:
    text = '<< << <http://x/s> <http://x/p> _:o >> <http://x/q> "v" >>'
    term, end = scan_term(text, 0, RdflibTerms())
    assert end == len(text)
    inner = TripleTerm(URIRef("http://x/s"), URIRef("http://x/p"), BNode("o"))
    assert term == TripleTerm(inner, URIRef("http://x/q"), Literal("v"))
    # The NTriplesTerms form is canonical: single spaces.
    assert scan_term("<<<http://x/s>   <http://x/p> _:o>>", 0, NT)[0] == "<< <http://x/s> <http://x/p> _:o >>"
    # RDF 1.2 triple-term brackets are read as the same quoted triple.
    assert scan_term("<<( <http://x/s> <http://x/p> _:o )>>", 0, NT)[0] == "<< <http://x/s> <http://x/p> _:o >>"


def test_nesting_is_bounded() -> None:
    def nested(depth: int) -> str:
        text = "<http://x/o>"
        for _ in range(depth):
            text = f"<< <http://x/s> <http://x/p> {text} >>"
        return text

    assert scan_term(nested(MAX_NESTING), 0, NT)[1] == len(nested(MAX_NESTING))
    with pytest.raises(TermSyntaxError, match="nested too deeply"):
        scan_term(nested(MAX_NESTING + 1), 0, NT)
    with pytest.raises(TermSyntaxError, match="nested too deeply"):
        scan_term(nested(3), 0, NT, max_nesting=2)


@pytest.mark.parametrize(
    ("text", "datatype"),
    [
        ("12", "integer"),
        ("-7", "integer"),
        ("+1.50", "decimal"),
        (".5", "decimal"),
        ("1e3", "double"),
        ("1.5E-3", "double"),
        ("true", "boolean"),
        ("false", "boolean"),
    ],
)
def test_scan_turtle_abbreviations_jena_writes(text: str, datatype: str) -> None:
    # Jena's RDF Patch writer prints xsd numbers and booleans the Turtle way.
    assert scan_term(text + " .", 0, NT) == (
        format_literal(text, None, f"http://www.w3.org/2001/XMLSchema#{datatype}"),
        len(text),
    )


def test_scan_integer_then_dot() -> None:
    assert scan_term("12.", 0, NT) == (format_literal("12", None, XSD_INT), 2)


@pytest.mark.parametrize(
    ("text", "message", "pos"),
    [
        ("<http://x", "unterminated IRI", 0),
        ("<http://x y>", "U+0020 is not allowed", 9),
        ("<http://x/\\n>", "bad escape in IRI", 10),
        ("<http://x/\\u12>", "bad escape in IRI", 10),
        ('"abc', "unterminated string", 0),
        ('"a\\qb"', "unknown escape", 2),
        ('"a\\uD800"', "not a Unicode scalar value", 2),
        ('"a\\U00110000"', "not a Unicode scalar value", 2),
        ('"a"@', "malformed language tag", 3),
        ('"a"^^"b"', "datatype must be an IRI", 5),
        ('"a"^^<_:b>', "not a blank node", 5),
        ("_:", "malformed blank node label", 0),
        ("_x", "malformed blank node label", 0),
        ("<< <http://x/s> <http://x/p> >>", "expected an RDF term", 29),
        ("<< <http://x/s> <http://x/p> <http://x/o> <http://x/g> >>", "three terms", 42),
        ("ex:local", "expected an RDF term", 0),
        ("12abc", "expected an RDF term", 0),
        ("", "end of the line", 0),
    ],
)
def test_scan_errors_are_clear(text: str, message: str, pos: int) -> None:
    with pytest.raises(TermSyntaxError) as info:
        scan_term(text, 0, NT)
    assert message in info.value.message
    assert info.value.pos == pos


# -- the NTriplesTerms adapter ------------------------------------------------------

ALL_KINDS: list[tuple[Any, ...]] = [
    (IRI, "http://example/a"),
    (IRI, "http://example/a b\\"),
    (IRI, "_:not-a-bnode"),
    (BNODE, "b1"),
    (BNODE, "has space"),
    (LITERAL, "simple", None, None),
    (LITERAL, 'line\nbreak "quoted"', None, None),
    (LITERAL, "chat", "fr", None),
    (LITERAL, "12", None, XSD_INT),
    (LITERAL, "x", None, "http://dt/with space"),
]


def build(adapter: Any, u: tuple[Any, ...]) -> Any:
    kind = u[0]
    if kind == IRI:
        return adapter.iri(u[1])
    if kind == BNODE:
        return adapter.bnode(u[1])
    if kind == LITERAL:
        return adapter.literal(u[1], u[2], u[3])
    if kind == TRIPLE:
        return adapter.triple(build(adapter, u[1]), build(adapter, u[2]), build(adapter, u[3]))
    return adapter.default_graph()


@pytest.mark.parametrize("u", ALL_KINDS, ids=repr)
def test_build_unpack_build_is_identity(u: tuple[Any, ...]) -> None:
    term = build(NT, u)
    assert isinstance(term, str)
    assert NT.unpack(term) == u
    assert build(NT, NT.unpack(term)) == term


def test_triple_and_default_graph_unpack() -> None:
    s, p, o = NT.iri("http://x/s"), NT.iri("http://x/p"), NT.literal("v", "en")
    t = NT.triple(s, p, o)
    assert t == '<< <http://x/s> <http://x/p> "v"@en >>'
    assert NT.unpack(t) == (TRIPLE, s, p, o)
    nested = NT.triple(t, p, NT.bnode("b"))
    assert NT.unpack(nested) == (TRIPLE, t, p, "_:b")
    assert NT.default_graph() == ""
    assert NT.unpack("") == (DEFAULT_GRAPH,)


def test_unpack_accepts_non_canonical_spellings() -> None:
    assert NT.unpack(r"<http://x/\u0041>") == (IRI, "http://x/A")
    assert NT.unpack(r'"\u0041\'"') == (LITERAL, "A'", None, None)
    assert NT.unpack("<_:b1>") == (BNODE, "b1")
    assert NT.unpack("<<<http://x/s> <http://x/p> <http://x/o>>>")[0] == TRIPLE


@pytest.mark.parametrize("bad", ["<http://x", "http://x", '"a" ', " <http://x>", "_:a b", '"a"@', 42, None])
def test_unpack_rejects_what_is_not_a_term(bad: Any) -> None:
    with pytest.raises(EncodeError):
        NT.unpack(bad)


def test_format_term_of_rdflib_terms_equals_the_ntriples_string() -> None:
    rdf = RdflibTerms()
    for u in ALL_KINDS:
        assert format_term(rdf, build(rdf, u)) == build(NT, u), u
    quoted = rdf.triple(URIRef("http://x/s"), URIRef("http://x/p"), Literal("v", lang="en"))
    assert format_term(rdf, quoted) == NT.triple("<http://x/s>", "<http://x/p>", '"v"@en')
    with pytest.raises(EncodeError, match="default graph"):
        format_term(rdf, DATASET_DEFAULT_GRAPH_ID)
    with pytest.raises(EncodeError):
        format_term(rdf, 42)


def test_format_term_bounds_nesting() -> None:
    term: Any = URIRef("http://x/o")
    for _ in range(MAX_NESTING + 1):
        term = TripleTerm(URIRef("http://x/s"), URIRef("http://x/p"), term)
    with pytest.raises(EncodeError, match="nested too deeply"):
        format_term(RdflibTerms(), term)


def test_ntriples_terms_work_with_the_jelly_codec() -> None:
    # The adapter contract end to end: Jelly-Patch encode and decode with string terms.
    s, p = NT.iri("http://x/s"), NT.iri("http://x/p")
    events = [
        TxStart(),
        Add(s, p, NT.literal("a\nb", "en"), NT.default_graph()),
        Add(NT.bnode("b 1"), p, NT.triple(s, p, NT.literal("1", None, XSD_INT)), NT.iri("http://x/g")),
        TxCommit(),
        PatchEnd(),
    ]
    options = PatchOptions(rdf_star=True)
    assert content(decode(encode(events, options, NT), NT)) == events


def test_codec_modules_do_not_import_rdflib() -> None:
    code = "import sys, patchsync.terms.ntriples, patchsync.codec.rdfp; print('rdflib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- properties ---------------------------------------------------------------------

# Any Unicode scalar value (no lone surrogates), weighted towards the characters that need escapes.
CHARS = st.one_of(st.sampled_from("\"\\\n\r\t\b\f'<>{}|^` _:.\x00\x7f"), st.characters(codec="utf-8"))
TEXT = st.text(CHARS, max_size=20)
LANG = st.from_regex(r"[a-zA-Z]{1,8}(-[a-zA-Z0-9]{1,8}){0,2}", fullmatch=True)


@settings(deadline=None)
@given(TEXT, TEXT, LANG)
def test_any_string_round_trips_through_every_kind(value: str, other: str, lang: str) -> None:
    for u in [
        (IRI, value),
        (BNODE, value),
        (LITERAL, value, None, None),
        (LITERAL, value, lang, None),
        (LITERAL, value, None, other),
    ]:
        term = build(NT, u)
        assert NT.unpack(term) == u
        assert scan_term(term, 0, NT) == (term, len(term))
        # rdflib terms print exactly like the string adapter builds them.
        assert format_term(RdflibTerms(), build(RdflibTerms(), u)) == term
