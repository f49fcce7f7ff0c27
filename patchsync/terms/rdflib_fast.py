"""A faster rdflib term adapter for bulk decoding (Jelly-RDF snapshots into rdflib).

rdflib's constructors validate and convert on every call: ``URIRef`` checks the IRI only
to log a warning, ``Literal`` validates the language tag and converts the lexical form to
a Python value. For IRIs, blank nodes, simple and language-tagged literals, and literals of
datatypes rdflib does not convert, this adapter builds the very same objects directly
(``str.__new__`` plus the four ``Literal`` slots set as ``Literal.__new__`` would set
them), which is several times cheaper. Literals of the datatypes rdflib converts (xsd
numbers, dates, ...) still go through ``Literal`` so that ``.value`` is right. A test
compares every shortcut with rdflib's own constructor.
"""

from __future__ import annotations

# Private rdflib helpers, present throughout rdflib 7 (pinned in pyproject.toml); the test
# of this module fails if a release changes what they mean.
from rdflib.term import BNode, Literal, URIRef, _is_valid_langtag, _toPythonMapping

from patchsync.terms.rdflib_adapter import RdflibTerms

__all__ = ["FastRdflibTerms"]

_new_str = str.__new__


class FastRdflibTerms(RdflibTerms):
    """:class:`~patchsync.terms.rdflib_adapter.RdflibTerms` with constructor shortcuts."""

    def __init__(self) -> None:
        super().__init__()
        self._langs: dict[str, bool] = {}
        self._dt_terms: dict[str, URIRef | None] = {}

    def iri(self, value: str) -> URIRef:
        return _new_str(URIRef, value)

    def bnode(self, label: str) -> BNode:
        return _new_str(BNode, label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> Literal:
        value: str | None = lex
        dt: URIRef | None = None
        if datatype is not None:
            if datatype not in self._dt_terms:
                uri = URIRef(datatype)
                # None marks datatypes rdflib converts to Python values: not a shortcut.
                self._dt_terms[datatype] = None if uri in _toPythonMapping else uri
            found = self._dt_terms[datatype]
            if found is None:
                return super().literal(lex, None, datatype)
            dt, value, lang = found, None, None
        elif lang:
            ok = self._langs.get(lang)
            if ok is None:
                ok = self._langs[lang] = bool(_is_valid_langtag(lang))
            if not ok:
                raise ValueError(f"'{lang}' is not a valid language tag!")
        else:
            lang = None
        lit: Literal = _new_str(Literal, lex)
        lit._language = lang
        lit._datatype = dt
        lit._value = value
        lit._ill_typed = None
        return lit
