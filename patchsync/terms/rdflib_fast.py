"""A faster rdflib term adapter for bulk decoding (Jelly-RDF snapshots into rdflib).

rdflib's constructors validate and convert on every call: ``URIRef`` checks the IRI only
to log a warning, ``Literal`` validates the language tag and converts the lexical form to
a Python value. This adapter builds the very same objects directly (``str.__new__`` plus
the four ``Literal`` slots set as ``Literal.__new__`` with ``normalize=False`` sets them),
which is several times cheaper: most of ``Literal.__new__``'s 2.4-2.8 us (with
``normalize=False``) goes to checks that are fixed per datatype or language tag, and those
are made once per stream here (0.5-0.9 us a typed literal). Typed literals of the
datatypes rdflib converts (xsd numbers, dates, ...) get their value and ``ill_typed`` flag
from rdflib's own converter and well-formedness check, so ``.value`` is what rdflib gives;
only ``xsd:normalizedString`` and ``xsd:token``, whose lexical form rdflib rewrites even
without normalizing, still go through ``Literal``. A test compares every shortcut with
rdflib's own constructor, for every datatype rdflib converts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

# Private rdflib helpers, present in every rdflib release pyproject.toml allows (7.1 to 7.x);
# tests/test_rdflib_fast.py fails if a release changes what they mean.
from rdflib.term import (
    _XSD_NORMALISED_STRING,
    _XSD_TOKEN,
    BNode,
    Literal,
    URIRef,
    _castLexicalToPython,
    _check_well_formed_types,
    _is_valid_langtag,
    _toPythonMapping,
    _well_formed_by_value,
)

from patchsync.terms.rdflib_adapter import RdflibTerms

__all__ = ["FastRdflibTerms"]

_new_str = str.__new__

#: How a datatype's literals are built: its ``URIRef`` and rdflib's well-formedness check
#: for the datatypes rdflib converts to Python values (None: no value, as rdflib gives for
#: datatypes it does not know), or None for the datatypes that go through ``Literal``.
_Datatype = tuple[URIRef, Callable[[Any, Any], bool] | None] | None
# rdflib rewrites these lexical forms (whitespace) whatever ``normalize`` says.
_REWRITTEN = frozenset({_XSD_NORMALISED_STRING, _XSD_TOKEN})


def _datatype(datatype: str) -> _Datatype:
    uri = URIRef(datatype)
    if uri in _REWRITTEN:
        return None
    if uri not in _toPythonMapping:
        return (uri, None)
    return (uri, _check_well_formed_types.get(uri, _well_formed_by_value))


class FastRdflibTerms(RdflibTerms):
    """:class:`~patchsync.terms.rdflib_adapter.RdflibTerms` with constructor shortcuts."""

    #: ``iri(value)`` is ``str.__new__(native_iri_type, value)``: the compiled decoder builds
    #: new IRIs that way itself, without a Python call each. None in a subclass that
    #: overrides :meth:`iri`, so the decoder calls the override.
    native_iri_type: ClassVar[type[str] | None] = URIRef

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "iri" in cls.__dict__ and "native_iri_type" not in cls.__dict__:
            cls.native_iri_type = None

    def __init__(self) -> None:
        super().__init__()
        self._langs: dict[str, bool] = {}
        self._dt_terms: dict[str, _Datatype] = {}

    def iri(self, value: str) -> URIRef:
        return _new_str(URIRef, value)

    def bnode(self, label: str) -> BNode:
        return _new_str(BNode, label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> Literal:
        value: Any = lex
        dt: URIRef | None = None
        ill_typed: bool | None = None
        if datatype is not None:
            try:
                found = self._dt_terms[datatype]
            except KeyError:
                found = self._dt_terms[datatype] = _datatype(datatype)
            if found is None:
                return super().literal(lex, None, datatype)
            dt, well_formed = found
            lang = None
            if well_formed is None:
                value = None
            else:
                # What Literal.__new__ does for a recognized datatype, in the same order.
                value = _castLexicalToPython(lex, dt)
                ill_typed = not well_formed(lex, value)
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
        lit._ill_typed = ill_typed
        return lit
