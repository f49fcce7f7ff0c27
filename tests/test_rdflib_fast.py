"""FastRdflibTerms builds the literals rdflib's own constructor builds, for every datatype.

The adapter's shortcut replaces ``Literal(lex, datatype=dt, normalize=False)`` (what the
default adapter calls, so that lexical forms are handed on exactly as written: RDF 1.1
Concepts §3.3, a literal is its lexical form and datatype IRI). It must give the same
lexical form, language, datatype, Python value and ``ill_typed`` flag for every datatype
rdflib converts, valid and invalid lexical forms alike.
"""

from __future__ import annotations

import logging
import math
import warnings
from decimal import Decimal
from typing import Any

import pytest
from rdflib.term import BNode, Literal, URIRef, _toPythonMapping

from patchsync.terms.rdflib_fast import FastRdflibTerms

XSD = "http://www.w3.org/2001/XMLSchema#"

# Lexical forms valid for some datatype and invalid for most others, plus whitespace and
# markup that some converters (and rdflib's rewriting of xsd:token) treat specially.
LEXICALS = [
    "",
    "0",
    "01",
    "-5",
    "+7",
    "1.5",
    "-0.0",
    "1e3",
    "NaN",
    "INF",
    "-INF",
    "true",
    "false",
    "1",
    " 1 ",
    "2024-01-01",
    "2024-02-30",
    "2024-01-01T10:00:00Z",
    "2024-01-01T10:00:00+02:00",
    "10:00:00",
    "P1Y2M3DT4H5M6S",
    "--05",
    "2024",
    "2024-05",
    "AAEC",
    "0FB7",
    "zz",
    "a\tb\nc  d",
    "<a>x</a>",
    "<p>html</p>",
    "9999999999999999999999",
    "é",
]


def _datatypes() -> list[str]:
    converted = sorted(str(dt) for dt in _toPythonMapping if dt is not None)
    assert len(converted) > 30  # rdflib converts every xsd number, date, binary, ... type
    return [*converted, "http://example.org/custom", XSD + "string", XSD + "normalizedString", XSD + "token"]


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if hasattr(a, "toxml"):  # DOM documents (rdf:XMLLiteral, rdf:HTML) compare by identity
        return bool(a.toxml() == b.toxml())
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Decimal) and a.is_nan():
        return b.is_nan()
    return bool(a == b)


@pytest.mark.parametrize("datatype", _datatypes())
def test_typed_literals_equal_rdflibs_own(datatype: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="rdflib.term")  # rdflib warns on ill-typed forms
    terms = FastRdflibTerms()
    for lex in LEXICALS:
        where = f"{lex!r}^^<{datatype}>"
        # rdflib's converter warns on some ill-typed forms (xsd:boolean): the same warnings.
        with warnings.catch_warnings(record=True) as warned_fast:
            warnings.simplefilter("always")
            fast = terms.literal(lex, None, datatype)
        with warnings.catch_warnings(record=True) as warned_slow:
            warnings.simplefilter("always")
            slow = Literal(lex, datatype=URIRef(datatype), normalize=False)
            again = Literal(lex, datatype=URIRef(datatype), normalize=False)
        assert [str(w.message) for w in warned_fast] * 2 == [str(w.message) for w in warned_slow], where
        assert type(fast) is Literal, where
        assert str(fast) == str(slow), where
        assert (fast.language, fast.datatype, fast.ill_typed) == (slow.language, slow.datatype, slow.ill_typed), where
        assert _same_value(fast.value, slow.value), where
        # Value equality as rdflib's own literals have it (NaN values are not eq to themselves).
        assert fast.eq(slow) == slow.eq(again) and slow.eq(fast) == again.eq(slow), where
        assert hash(fast) == hash(slow) and fast == slow, where


def test_the_shortcut_is_taken_for_converted_datatypes(monkeypatch: pytest.MonkeyPatch) -> None:
    # A converted datatype must not fall back to Literal(): that is the cost it removes.
    from rdflib import term

    calls: list[object] = []
    original = term.Literal.__new__

    def counting(cls: type, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(term.Literal, "__new__", counting)
    terms = FastRdflibTerms()
    assert terms.literal("5", None, XSD + "integer").value == 5
    assert terms.literal("x", "en", None).language == "en"
    assert calls == []
    # xsd:token's lexical form is rewritten by rdflib itself: that one goes through Literal.
    assert str(terms.literal(" a  b ", None, XSD + "token")) == "a b"
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("lex", "lang", "datatype"),
    [
        ("x", None, None),
        ("", None, None),
        ("x", "en-GB", None),
        ("01", None, "http://www.w3.org/2001/XMLSchema#integer"),
        ("x", None, "http://example.org/custom"),
        ("2024-01-01", None, "http://www.w3.org/2001/XMLSchema#date"),
        ("not a date", None, "http://www.w3.org/2001/XMLSchema#date"),
    ],
)
def test_fast_rdflib_terms_build_what_rdflib_builds(lex: str, lang: str | None, datatype: str | None) -> None:
    fast = FastRdflibTerms().literal(lex, lang, datatype)
    slow = Literal(lex, lang=lang, datatype=None if datatype is None else URIRef(datatype), normalize=False)
    assert type(fast) is Literal and fast.eq(slow) and hash(fast) == hash(slow)
    assert (str(fast), fast.language, fast.datatype, fast.value, fast.ill_typed) == (
        str(slow),
        slow.language,
        slow.datatype,
        slow.value,
        slow.ill_typed,
    )
    assert FastRdflibTerms().iri("http://x/y") == URIRef("http://x/y")
    assert type(FastRdflibTerms().bnode("b")) is BNode
    with pytest.raises(ValueError):
        FastRdflibTerms().literal("x", "not a tag!")
