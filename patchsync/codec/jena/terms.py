"""Term and row semantics shared by RDF Thrift and RDF Protobuf (<https://jena.apache.org/documentation/io/rdf-binary.html>).

Both wire formats carry the same ``RDF_Term`` union; only the bytes differ. The wire
readers parse bytes and call a :class:`TermReader` for meaning, the wire writers ask a
:class:`TermWriter` how to spell each term. The rules that live here:

* prefixed names (``RDF_PrefixName``, a literal's ``dtPrefix``) expand against the prefixes
  declared by earlier ``RDF_PrefixDecl`` rows; an undeclared prefix is an error;
* ``REPEAT`` stands for the term at the same position (S, P, O, G) of the previous
  statement row; it needs such a row and is meaningless inside a triple term;
* the value forms become typed literals, spelled as Jena spells them: ``valInteger`` ->
  ``xsd:integer`` (decimal digits), ``valDouble`` -> ``xsd:double`` (Java's
  ``Double.toString``), ``valDecimal`` (value, scale) -> ``xsd:decimal``
  (``BigDecimal.toPlainString``);
* variables, ``ANY`` and ``UNDEF`` exist for query results and patterns, not data: a
  statement holding one is refused.

The writer uses a value form only where reading it back gives the very same lexical form
(``"01"^^xsd:integer`` stays a literal), because a replication engine must not rewrite
data; Jena itself converts any valid lexical form, which is lossy.
"""

from __future__ import annotations

import math
import re
from typing import Any, Generic, NoReturn, TypeVar

from patchsync.codec.term_decoder import RuleViolation
from patchsync.errors import EncodeError
from patchsync.options import Limits
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, TermAdapter

T = TypeVar("T")

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_INTEGER = XSD + "integer"
XSD_DOUBLE = XSD + "double"
XSD_DECIMAL = XSD + "decimal"

#: Graph names Jena uses for the default graph of a dataset (``Quad.defaultGraphIRI`` and
#: ``Quad.defaultGraphNodeGenerated``); a quad in one of them is a default-graph statement.
JENA_DEFAULT_GRAPHS = frozenset({"urn:x-arq:DefaultGraph", "urn:x-arq:DefaultGraphNode"})

#: Statement positions, for REPEAT; ``NESTED`` marks a term inside a triple term.
POS_S, POS_P, POS_O, POS_G, NESTED = 0, 1, 2, 3, -1
POSITION_NAMES = ("S", "P", "O", "G")

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_CACHE_LIMIT = 1 << 16

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"(-?)([0-9]+)\.([0-9]+)")


# -- value forms ------------------------------------------------------------------------


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (the form Jena reads back).

    Plain notation with at least one fraction digit for 10^-3 <= |value| < 10^7, otherwise
    ``d.dddE±n``; the digits are the shortest that read back to the same double. The
    infinities become xsd's ``INF``/``-INF`` (Java's ``Infinity`` is no xsd:double lexical
    form).
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "INF" if value > 0 else "-INF"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    # digits "d1d2...dn" stand for 0.d1d2...dn * 10^exponent.
    if 1e-3 <= abs(value) < 1e7:
        if exponent <= 0:
            return f"{sign}0.{'0' * -exponent}{digits}"
        whole, frac = digits[:exponent].ljust(exponent, "0"), digits[exponent:]
        return f"{sign}{whole}.{frac or '0'}"
    frac = digits[1:] or "0"
    return f"{sign}{digits[0]}.{frac}E{exponent - 1}"


def _shortest_digits(value: float) -> tuple[str, int]:
    mantissa, _, exp = f"{value!r}".replace("e", "E").partition("E")
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    exponent = len(whole) + (int(exp) if exp else 0)
    if whole == "0":
        # 0.000ddd: the leading zeros of the fraction lower the exponent.
        stripped = frac.lstrip("0")
        exponent = (int(exp) if exp else 0) - (len(frac) - len(stripped))
        digits = stripped
    return digits.rstrip("0") or "0", exponent


def decimal_lex(value: int, scale: int) -> str:
    """``value * 10^-scale`` in plain decimal notation, as ``BigDecimal.toPlainString``."""
    sign = "-" if value < 0 else ""
    digits = str(abs(value))
    if scale <= 0:
        return sign + digits + "0" * -scale if value else "0"
    if len(digits) <= scale:
        digits = digits.rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


def decimal_length(value: int, scale: int) -> int:
    """Length of :func:`decimal_lex` without building it (checked against limits first)."""
    return len(str(abs(value))) + abs(scale) + 3


def integer_value(lex: str) -> int | None:
    """The 64-bit value whose ``valInteger`` reads back as ``lex``, or ``None``."""
    if len(lex) > 20 or not _INTEGER.fullmatch(lex):
        return None
    value = int(lex)
    return value if _I64_MIN <= value <= _I64_MAX else None


def double_value(lex: str) -> float | None:
    """The double whose ``valDouble`` reads back as ``lex`` (finite values only), or ``None``."""
    if len(lex) > 32 or ("E" not in lex and "." not in lex):
        return None
    try:
        value = float(lex)
    except ValueError:
        return None
    if not math.isfinite(value) or java_double(value) != lex:
        return None
    return value


def decimal_value(lex: str) -> tuple[int, int] | None:
    """``(value, scale)`` whose ``valDecimal`` reads back as ``lex``, or ``None``."""
    match = _DECIMAL.fullmatch(lex) if len(lex) <= 40 else None
    if match is None:
        return None
    sign, whole, frac = match.groups()
    value = int(sign + whole + frac)
    scale = len(frac)
    if not _I64_MIN <= value <= _I64_MAX or decimal_lex(value, scale) != lex:
        return None
    return value, scale


# -- reading ----------------------------------------------------------------------------


class TermReader(Generic[T]):
    """Turns decoded ``RDF_Term`` members into adapter terms; keeps prefixes and the last row.

    Wire readers call one method per term member; every broken rule raises
    :class:`~patchsync.codec.term_decoder.RuleViolation`, which the decoder turns into a
    ``DecodeError`` with the row's position.
    """

    def __init__(self, adapter: TermAdapter[T], limits: Limits) -> None:
        self.adapter = adapter
        self.max_nesting = limits.max_nesting
        #: Longest string (and value-form lexical form) accepted, in bytes.
        self.max_string = limits.max_frame_bytes
        self.prefixes: dict[str, str] = {}
        #: Most distinct prefixes a stream may declare (the prefix map lives as long as it).
        self.max_prefixes = limits.max_prefix_table_size
        #: S, P, O, G of the previous statement row (G ``None`` for a triple), for REPEAT.
        self.previous: list[Any] | None = None
        self._iris: dict[str, T] = {}
        self._literals: dict[tuple[str, str | None, str | None], T] = {}
        #: The adapter's default-graph term (a quad without G is in the default graph).
        self.default_graph = adapter.default_graph()
        self._jena_defaults = frozenset(adapter.iri(name) for name in JENA_DEFAULT_GRAPHS)

    def iri(self, value: str) -> T:
        term = self._iris.get(value)
        if term is None:
            if len(self._iris) >= _CACHE_LIMIT:
                self._iris.clear()
            term = self._iris[value] = self._build(self.adapter.iri, value)
        return term

    def bnode(self, label: str) -> T:
        return self._build(self.adapter.bnode, label)

    def literal(self, lex: str, lang: str | None, datatype: str | None) -> T:
        key = (lex, lang, datatype)
        term = self._literals.get(key)
        if term is None:
            if len(self._literals) >= _CACHE_LIMIT:
                self._literals.clear()
            try:
                term = self.adapter.literal(lex, lang or None, datatype)
            except ValueError as exc:
                raise RuleViolation(f"literal rejected: {exc}") from None
            self._literals[key] = term
        return term

    def expand(self, prefix: str, local: str) -> str:
        """The IRI of ``prefix:local``; the prefix must have been declared."""
        base = self.prefixes.get(prefix)
        if base is None:
            raise RuleViolation(
                f"prefixed name {prefix}:{local} uses undeclared prefix {prefix!r} "
                "(a prefix name expands against an earlier RDF_PrefixDecl row)"
            )
        return base + local

    def prefixed(self, prefix: str, local: str) -> T:
        return self.iri(self.expand(prefix, local))

    def integer(self, value: int) -> T:
        return self.literal(str(value), None, XSD_INTEGER)

    def double(self, value: float) -> T:
        return self.literal(java_double(value), None, XSD_DOUBLE)

    def decimal(self, value: int, scale: int) -> T:
        if decimal_length(value, scale) > self.max_string:
            raise RuleViolation(
                f"valDecimal with scale {scale} expands past the limit of {self.max_string} bytes (oversize value)"
            )
        return self.literal(decimal_lex(value, scale), None, XSD_DECIMAL)

    def repeat(self, position: int) -> T:
        if position == NESTED:
            raise RuleViolation("REPEAT inside a triple term (REPEAT refers to a position of the previous row)")
        previous = self.previous
        if previous is None:
            raise RuleViolation("REPEAT in the first statement row (there is no previous row to repeat from)")
        term = previous[position]
        if term is None:
            raise RuleViolation(f"REPEAT in {POSITION_NAMES[position]} but the previous row has no graph term")
        return term  # type: ignore[no-any-return]

    def refuse(self, kind: str) -> NoReturn:
        raise RuleViolation(
            f"{kind} in data (variables, ANY and UNDEF belong to patterns and results, not to RDF data)"
        )

    def triple(self, s: T, p: T, o: T) -> T:
        return self._build3(s, p, o)

    def graph(self, g: T) -> T:
        """A quad's graph term: Jena's default-graph names become the default graph."""
        if g in self._jena_defaults:
            return self.default_graph
        return g

    def declare(self, prefix: str, uri: str) -> T:
        """Record a prefix declaration; answers the namespace IRI term."""
        if prefix not in self.prefixes and len(self.prefixes) >= self.max_prefixes:
            raise RuleViolation(
                f"more than {self.max_prefixes} distinct prefixes declared (this reader's max_prefix_table_size)"
            )
        self.prefixes[prefix] = uri
        return self.iri(uri)

    def _build(self, make: Any, value: str) -> T:
        try:
            return make(value)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise RuleViolation(f"term rejected: {exc}") from None

    def _build3(self, s: T, p: T, o: T) -> T:
        try:
            return self.adapter.triple(s, p, o)
        except ValueError as exc:
            raise RuleViolation(f"triple term rejected: {exc}") from None


# -- writing ----------------------------------------------------------------------------


class TermWriter(Generic[T]):
    """Decides how each term is spelled: IRI or prefixed name, literal or value form.

    ``spell(term)`` answers a tuple the wire writers turn into bytes::

        ("iri", iri) ("prefixed", prefix, local) ("bnode", label)
        ("literal", lex, lang, datatype_or_None) ("dtprefixed", lex, prefix, local)
        ("integer", int) ("double", float) ("decimal", value, scale)
        ("triple", s, p, o)   parts are adapter terms, spelled in turn
    """

    def __init__(self, adapter: TermAdapter[T], *, prefixed_names: bool, values: bool) -> None:
        self.adapter = adapter
        self.prefixed_names = prefixed_names
        self.values = values
        self.namespaces: dict[str, str] = {}  # namespace IRI -> prefix

    def declare(self, prefix: str, uri: str) -> None:
        for known, name in list(self.namespaces.items()):
            if name == prefix:
                del self.namespaces[known]
        self.namespaces[uri] = prefix

    def abbreviate(self, iri: str) -> tuple[str, str] | None:
        """``(prefix, local)`` for the longest declared namespace ``iri`` starts with."""
        if not self.prefixed_names:
            return None
        best: str | None = None
        for namespace in self.namespaces:
            if iri.startswith(namespace) and (best is None or len(namespace) > len(best)):
                best = namespace
        if best is None:
            return None
        return self.namespaces[best], iri[len(best) :]

    def spell(self, term: T) -> tuple[Any, ...]:
        u = self.adapter.unpack(term)
        kind = u[0]
        if kind == IRI:
            short = self.abbreviate(u[1])
            return ("iri", u[1]) if short is None else ("prefixed", *short)
        if kind == BNODE:
            return ("bnode", u[1])
        if kind == LITERAL:
            return self._literal(u[1], u[2], u[3])
        if kind == TRIPLE:
            return ("triple", u[1], u[2], u[3])
        if kind == DEFAULT_GRAPH:
            raise EncodeError("the default graph is only valid as a graph name")
        raise EncodeError(f"not an RDF term: {term!r}")

    def _literal(self, lex: str, lang: str | None, datatype: str | None) -> tuple[Any, ...]:
        if lang:
            return ("literal", lex, lang, None)
        if datatype is None:
            return ("literal", lex, None, None)
        # An explicit xsd:string is written as given (Jena reads it as the simple literal it
        # is in RDF 1.1), so that terms come back exactly as they were handed in.
        if self.values:
            if datatype == XSD_INTEGER and (i := integer_value(lex)) is not None:
                return ("integer", i)
            if datatype == XSD_DOUBLE and (d := double_value(lex)) is not None:
                return ("double", d)
            if datatype == XSD_DECIMAL and (dec := decimal_value(lex)) is not None:
                return ("decimal", *dec)
        short = self.abbreviate(datatype)
        if short is not None:
            return ("dtprefixed", lex, *short)
        return ("literal", lex, None, datatype)
