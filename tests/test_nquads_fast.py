"""The fast path of ``codec.nquads.read_statements`` reads what the term scanner reads.

Differential: every line is read both ways (``fast=False`` is the scanner alone) and the
statements, or the error (its rule and line), must be the same: on the conformance inputs
(the Jelly-RDF suites' N-Quads and N-Triples, the Jena inputs) and on generated lines
mixing the canonical forms the fast path takes with escapes, raw control characters,
``<_:label>`` blank nodes, quoted triples and malformed text it must leave to the scanner.
N-Quads: https://www.w3.org/TR/n-quads/ (§2 grammar, §7.1 productions: ``STRING_LITERAL_QUOTE``,
``ECHAR``, ``BLANK_NODE_LABEL``); canonical N-Triples: https://www.w3.org/TR/rdf12-n-triples/#canonical-ntriples
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchsync.codec import nquads
from patchsync.codec.nquads import read_statements
from patchsync.errors import DecodeError
from patchsync.terms.ntriples import NTriplesTerms, format_bnode, format_iri, format_literal

NT = NTriplesTerms()
DATA = Path(__file__).parent / "data" / "upstream"
FILES = sorted(p for p in DATA.rglob("*") if p.suffix in (".nq", ".nt"))


def both(text: str) -> tuple[object, object]:
    def read(fast: bool) -> object:
        try:
            return read_statements(text, NT, fast=fast)
        except DecodeError as exc:
            return ("error", exc.rule, exc.line)

    return read(True), read(False)


def test_the_conformance_inputs_are_there() -> None:
    assert len(FILES) > 100


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_conformance_inputs_read_the_same(path: Path) -> None:
    fast, reference = both(path.read_text(encoding="utf-8"))
    assert fast == reference


def test_the_fast_path_takes_the_common_lines() -> None:
    """Canonical lines match the line pattern (else the fast path would never run)."""
    lines = [
        '<http://e/s> <http://e/p> "a \\"b\\"\\n\\\\ c"@en-GB <http://e/g> .',
        '_:b1 <http://e/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .',
        "<http://e/s> <http://e/p> _:x.y-z_9 _:g2 . # comment",
    ]
    for line in lines:
        assert nquads._COMMON_LINE.fullmatch(line) is not None, line
    for line in ['<s> <p> "\\u0041" .', '<s> <p> "\t" .', "<_:b> <p> <o> .", "<s> <p> << <a> <b> <c> >> ."]:
        assert nquads._COMMON_LINE.fullmatch(line) is None, line


_IRI_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_LEX = st.text(st.characters(codec="utf-8"), max_size=12)


_KINDS = ("iri", "bnode", "literal", "lang", "typed", "raw", "other")


@st.composite
def terms(draw: st.DrawFn, kinds: tuple[str, ...] = _KINDS) -> str:
    """A term as written: canonical, or another valid spelling, or broken text."""
    kind = draw(st.sampled_from(kinds))
    if kind == "iri":
        return format_iri("http://e/" + draw(_IRI_TEXT))
    if kind == "bnode":
        return format_bnode(draw(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,5}", fullmatch=True)))
    if kind == "literal":
        return format_literal(draw(_LEX))
    if kind == "lang":
        return format_literal(draw(_LEX), draw(st.sampled_from(["en", "en-GB", "de-1996", "x"])))
    if kind == "typed":
        return format_literal(draw(_LEX), None, "http://e/" + draw(_IRI_TEXT))
    if kind == "raw":  # valid, not canonical: a raw tab, an escape the canonical form does not use
        return draw(st.sampled_from(['"a\tb"', '"\\u0041"', '"it\\\'s"', "<http://e/\\u0020>", "<_:lbl>", "_:é"]))
    return draw(st.sampled_from(["<< <a> <b> <c> >>", "12", '"x', "<a b>", "_:", "_:a.", '"x"@', "true", "", "."]))


@st.composite
def lines(draw: st.DrawFn) -> str:
    """Mostly statements of the shape the fast path takes, with one term off now and then."""
    node = ("iri", "iri", "bnode", "raw", "other")
    shape = [terms(node), terms(("iri", "iri", "iri", "raw", "other")), terms()]
    shape += draw(st.sampled_from([[], [terms(node)], [terms(node), terms()]]))
    ws = st.sampled_from([" ", " ", "  ", "\t", ""])
    parts = [draw(term) + draw(ws) for term in shape]
    end = draw(st.sampled_from([" .", " .", ".", " . # c", " .x", ""]))
    return draw(ws) + " ".join(parts) + end


@settings(max_examples=400, deadline=None)
@given(text=st.lists(lines(), min_size=1, max_size=6).map("\n".join))
def test_generated_lines_read_the_same(text: str) -> None:
    fast, reference = both(text)
    assert fast == reference
