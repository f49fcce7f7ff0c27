"""N-Triples term syntax: formatting, scanning, and terms that are N-Triples strings.

Three things live here, all pure (no rdflib):

* ``format_*`` functions and :func:`format_term` print terms in N-Triples / N-Quads syntax
  with the escapes of canonical N-Triples, so that any string round-trips;
* :func:`scan_term` reads one term at a position of a line, for the RDF Patch text reader;
* :class:`NTriplesTerms`, a :class:`~patchsync.terms.TermAdapter` whose terms are plain
  ``str`` in N-Triples syntax (what the Spark integration stores in its columns).

Two RDF Patch extensions of the term syntax are read and written: a blank node whose label
is not an N-Triples ``BLANK_NODE_LABEL`` is written ``<_:label>`` (RDF Patch, "Blank
nodes"), and an IRI that itself starts with ``_:`` is written with its colon escaped
(``<_\\u003Ax>``) so that it is not read back as such a blank node. The reader also accepts
what Apache Jena's patch writer emits besides N-Triples: Turtle's bare numbers and booleans
(``12``, ``1.5``, ``1e3``, ``true``) and the RDF 1.2 triple-term brackets ``<<( s p o )>>``.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TypeVar

from patchsync.errors import EncodeError
from patchsync.terms.adapter import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, TermAdapter, Unpacked
from patchsync.terms.caches import DATATYPE_SUFFIX, LANG_SUFFIX

T = TypeVar("T")

#: Deepest quoted-triple nesting read or written (docs/design.md §1).
MAX_NESTING = 64

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_DOUBLE = XSD + "double"
XSD_BOOLEAN = XSD + "boolean"


class TermSyntaxError(ValueError):
    """A malformed term; ``pos`` is the index in the scanned string where it was found."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


class TermFormatError(EncodeError, ValueError):
    """A value that has no N-Triples form (a lone surrogate, a bad language tag).

    It is also a ``ValueError`` because :class:`NTriplesTerms` raises it from its build
    methods, where decoders treat ``ValueError`` as a term the adapter refused.
    """


# -- character classes (N-Triples / Turtle grammar) -----------------------------------

_PN_CHARS_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
)
_PN_CHARS_U = _PN_CHARS_BASE + "_"
_PN_CHARS = _PN_CHARS_U + "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040"
#: Regex source of N-Triples ``BLANK_NODE_LABEL`` without the ``_:``.
BNODE_LABEL = "[" + _PN_CHARS_U + "0-9](?:[" + _PN_CHARS + ".]*[" + _PN_CHARS + "])?"


class LazyPattern:
    """A regular expression compiled on first use.

    The grammar's character classes span most of Unicode; compiling one costs several
    milliseconds, which every command would otherwise pay at start-up for patterns it
    may never use (``patchsync --version`` needs none).
    """

    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern."""
        if self._compiled is None:
            self._compiled = re.compile(self.source)
        return self._compiled

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.pattern.fullmatch(string, pos, endpos)


#: Turtle ``PN_PREFIX``: what an unquoted RDF Patch keyword (header key, prefix name) is.
PN_PREFIX = LazyPattern("[" + _PN_CHARS_BASE + "](?:[" + _PN_CHARS + ".]*[" + _PN_CHARS + "])?")
_BNODE_LABEL = LazyPattern(BNODE_LABEL)
_BNODE = LazyPattern("_:(" + BNODE_LABEL + ")")

#: Regex class body of the characters IRIREF excludes (only written as ``\u`` escapes).
IRI_EXCLUDED = '\\x00-\\x20<>"{}|^`\\\\'
_IRI_PLAIN = re.compile("<([^" + IRI_EXCLUDED + "]*)>")
_IRI_ESCAPED = re.compile("<((?:[^" + IRI_EXCLUDED + "]|\\\\u[0-9A-Fa-f]{4}|\\\\U[0-9A-Fa-f]{8})*)>")
_IRI_NEEDS_ESCAPE = re.compile("[" + IRI_EXCLUDED + "\\ud800-\\udfff]")
_STRING_NEEDS_ESCAPE = re.compile('[\\x00-\\x1f"\\\\\\x7f\\ud800-\\udfff]')

# STRING_LITERAL_QUOTE, unrolled so that it runs without backtracking.
_STRING = re.compile(r'"([^"\\\r\n]*(?:\\.[^"\\\r\n]*)*)"')
_LANGTAG = re.compile(r"@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)")
_LANGTAG_FULL = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z0-9]+)*")
_NUMBER = re.compile(
    r"[+-]?(?:(?P<double>[0-9]+\.[0-9]*[eE][+-]?[0-9]+|\.?[0-9]+[eE][+-]?[0-9]+)"
    r"|(?P<decimal>[0-9]*\.[0-9]+)|[0-9]+)"
)
_BOOLEAN = re.compile(r"true|false")
_WS = re.compile(r"[ \t]*")

# A surrogate pair written as two \u escapes (as Java-based writers may) is one character.
_ESCAPE = re.compile(
    r"\\(?:u(D[89ABab][0-9A-Fa-f]{2})\\u(D[C-Fc-f][0-9A-Fa-f]{2})"
    r"|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([tbnrf\"'\\])|(.?))",
    re.DOTALL,
)
_UCHAR = re.compile(r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_ECHAR_OUT = {"\t": "\\t", "\b": "\\b", "\n": "\\n", "\r": "\\r", "\f": "\\f", '"': '\\"', "\\": "\\\\"}

# -- formatting -----------------------------------------------------------------------


def _escape_iri_char(m: re.Match[str]) -> str:
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        raise TermFormatError(f"lone surrogate U+{ord(ch):04X} cannot be written in UTF-8")
    return f"\\u{ord(ch):04X}"


def _escape_string_char(m: re.Match[str]) -> str:
    ch = m.group()
    out = _ECHAR_OUT.get(ch)
    if out is not None:
        return out
    if "\ud800" <= ch <= "\udfff":
        raise TermFormatError(f"lone surrogate U+{ord(ch):04X} cannot be written in UTF-8")
    return f"\\u{ord(ch):04X}"


def format_iri(value: str) -> str:
    """``<value>``, with the characters IRIREF excludes written as ``\\u`` escapes."""
    if _IRI_NEEDS_ESCAPE.search(value) is None and not value.startswith("_:"):
        return "<" + value + ">"
    body = _IRI_NEEDS_ESCAPE.sub(_escape_iri_char, value)
    if body.startswith("_:"):
        # Keep it an IRI: the reader takes a literal "<_:" as the blank node form.
        body = "_\\u003A" + body[2:]
    return "<" + body + ">"


def format_bnode(label: str) -> str:
    """``_:label``, or ``<_:label>`` when the label is not an N-Triples blank node label."""
    if (label.isascii() and label.isalnum()) or _BNODE_LABEL.fullmatch(label):
        return "_:" + label
    return "<_:" + _IRI_NEEDS_ESCAPE.sub(_escape_iri_char, label) + ">"


def format_string(value: str) -> str:
    """``"value"`` with the N-Triples string escapes (a simple literal, a quoted keyword)."""
    if _STRING_NEEDS_ESCAPE.search(value) is None:
        return '"' + value + '"'
    return '"' + _STRING_NEEDS_ESCAPE.sub(_escape_string_char, value) + '"'


# The suffix tables (terms/caches.py, where the compiled codec core reads them too) are
# bounded here: past this many entries one is cleared.
_SUFFIX_CACHE_LIMIT = 4096


def _lang_suffix(lang: str) -> str:
    suffix = LANG_SUFFIX.get(lang)
    if suffix is None:
        if _LANGTAG_FULL.fullmatch(lang) is None:
            raise TermFormatError(f"language tag {lang!r} is not an N-Triples LANGTAG")
        if len(LANG_SUFFIX) >= _SUFFIX_CACHE_LIMIT:
            LANG_SUFFIX.clear()
        suffix = LANG_SUFFIX[lang] = "@" + lang
    return suffix


def _datatype_suffix(datatype: str) -> str:
    suffix = DATATYPE_SUFFIX.get(datatype)
    if suffix is None:
        if len(DATATYPE_SUFFIX) >= _SUFFIX_CACHE_LIMIT:
            DATATYPE_SUFFIX.clear()
        suffix = DATATYPE_SUFFIX[datatype] = "^^" + format_iri(datatype)
    return suffix


def format_literal(lex: str, lang: str | None = None, datatype: str | None = None) -> str:
    """``"lex"``, ``"lex"@lang`` or ``"lex"^^<datatype>`` (a language tag wins over a datatype).

    An explicit ``xsd:string`` datatype is kept: the term is printed as it was given.
    """
    body = format_string(lex)
    if lang:
        return body + _lang_suffix(lang)
    if datatype is None:
        return body
    return body + _datatype_suffix(datatype)


def format_triple(s: str, p: str, o: str) -> str:
    """``<< s p o >>`` from three formatted terms."""
    return "<< " + s + " " + p + " " + o + " >>"


def format_term(adapter: TermAdapter[Any], term: Any, *, max_nesting: int = MAX_NESTING) -> str:
    """Any adapter's term in N-Triples syntax, through ``adapter.unpack``.

    Raises :class:`EncodeError` for the default graph (it has no N-Triples form; a writer
    omits the graph instead), for objects that are not terms and for values with no
    N-Triples form.
    """
    return _format_unpacked(adapter, adapter.unpack(term), max_nesting)


def _format_unpacked(adapter: TermAdapter[Any], u: Unpacked, depth_left: int) -> str:
    kind = u[0]
    if kind == IRI:
        return format_iri(u[1])
    if kind == BNODE:
        return format_bnode(u[1])
    if kind == LITERAL:
        return format_literal(u[1], u[2], u[3])
    if kind == TRIPLE:
        if depth_left <= 0:
            raise EncodeError("quoted triples nested too deeply")
        return format_triple(
            _format_unpacked(adapter, adapter.unpack(u[1]), depth_left - 1),
            _format_unpacked(adapter, adapter.unpack(u[2]), depth_left - 1),
            _format_unpacked(adapter, adapter.unpack(u[3]), depth_left - 1),
        )
    if kind == DEFAULT_GRAPH:
        raise EncodeError("the default graph has no N-Triples form (write the statement without a graph)")
    raise EncodeError(f"unknown term kind in {u!r}")


# -- scanning -------------------------------------------------------------------------


def skip_ws(line: str, pos: int) -> int:
    """The index of the first character at or after ``pos`` that is not a space or tab."""
    m = _WS.match(line, pos)
    return pos if m is None else m.end()


def _unescape(text: str, base: int) -> str:
    """Resolve ECHAR and UCHAR escapes; ``base`` is the index of ``text`` in the line."""

    def one(m: re.Match[str]) -> str:
        high, low, u4, u8, echar, bad = m.groups()
        if high is not None:
            return chr(0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00))
        if echar is not None:
            return _ECHAR[echar]
        if bad is not None:
            raise TermSyntaxError(f"unknown escape '\\{bad}'", base + m.start())
        code = int(u4 if u4 is not None else u8, 16)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise TermSyntaxError(f"escape {m.group()} is not a Unicode scalar value", base + m.start())
        return chr(code)

    return _ESCAPE.sub(one, text)


def _iri_error(line: str, pos: int) -> TermSyntaxError:
    # Called only when an IRIREF did not match: find the first thing that broke it.
    i = pos + 1
    n = len(line)
    while i < n:
        ch = line[i]
        if ch == ">":
            break
        if ch == "\\":
            m = _UCHAR.match(line, i)
            if m is None:
                return TermSyntaxError("bad escape in IRI (only \\uXXXX and \\UXXXXXXXX are allowed)", i)
            i = m.end()
            continue
        if ch <= " " or ch in '<"{}|^`':
            return TermSyntaxError(f"character U+{ord(ch):04X} is not allowed in an IRI", i)
        i += 1
    if i >= n:
        return TermSyntaxError("unterminated IRI (missing '>')", pos)
    return TermSyntaxError("malformed IRI", pos)


def scan_iriref(line: str, pos: int) -> tuple[str, int, bool]:
    """Read ``<...>`` at ``pos``: (unescaped text, end index, whether it is ``<_:label>``).

    For ``<_:label>`` the text is the label. Raises :class:`TermSyntaxError`.
    """
    m = _IRI_PLAIN.match(line, pos)
    if m is not None:
        value = m.group(1)
    else:
        m = _IRI_ESCAPED.match(line, pos)
        if m is None:
            raise _iri_error(line, pos)
        value = _unescape(m.group(1), pos + 1)
    # Decided on the raw text, so that an escaped colon keeps an IRI "_:x" an IRI.
    if line.startswith("_:", pos + 1):
        return value[2:], m.end(), True
    return value, m.end(), False


def scan_string(line: str, pos: int) -> tuple[str, int]:
    """Read a quoted string ``"..."`` at ``pos``: (unescaped value, end index)."""
    m = _STRING.match(line, pos)
    if m is None:
        raise TermSyntaxError("unterminated string (a string closes with '\"' on the same line)", pos)
    raw = m.group(1)
    return (_unescape(raw, pos + 1) if "\\" in raw else raw), m.end()


def scan_term(line: str, pos: int, adapter: TermAdapter[T], *, max_nesting: int = MAX_NESTING) -> tuple[T, int]:
    """Read one term starting exactly at ``line[pos]``: (term built by ``adapter``, end index).

    Raises :class:`TermSyntaxError` on malformed input, including quoted triples nested
    deeper than ``max_nesting``.
    """
    return _scan(line, pos, adapter, max_nesting)


def _name_char_follows(line: str, end: int) -> bool:
    return end < len(line) and (line[end].isalnum() or line[end] in "_:")


def _scan(line: str, pos: int, adapter: TermAdapter[T], depth_left: int) -> tuple[T, int]:
    if pos >= len(line):
        raise TermSyntaxError("expected an RDF term, found the end of the line", pos)
    ch = line[pos]
    if ch == "<":
        if line.startswith("<<", pos):
            s, p, o, end = scan_triple(line, pos, adapter, depth_left)
            return adapter.triple(s, p, o), end
        value, end, is_bnode = scan_iriref(line, pos)
        return (adapter.bnode(value) if is_bnode else adapter.iri(value)), end
    if ch == "_":
        m = _BNODE.match(line, pos)
        if m is None:
            raise TermSyntaxError("malformed blank node label (expected _:label)", pos)
        return adapter.bnode(m.group(1)), m.end()
    if ch == '"':
        lex, end = scan_string(line, pos)
        if line.startswith("@", end):
            m = _LANGTAG.match(line, end)
            if m is None:
                raise TermSyntaxError("malformed language tag", end)
            return adapter.literal(lex, m.group(1)), m.end()
        if line.startswith("^^", end):
            if not line.startswith("<", end + 2) or line.startswith("<<", end + 2):
                raise TermSyntaxError("a datatype must be an IRI written <...>", end + 2)
            dt, end2, is_bnode = scan_iriref(line, end + 2)
            if is_bnode:
                raise TermSyntaxError("a datatype must be an IRI, not a blank node", end + 2)
            return adapter.literal(lex, None, dt), end2
        return adapter.literal(lex), end
    # Turtle abbreviations, which Jena's RDF Patch writer uses for numbers and booleans.
    m = _NUMBER.match(line, pos) if (ch in "+-." or ch.isdigit()) else _BOOLEAN.match(line, pos)
    if m is None or _name_char_follows(line, m.end()):
        raise TermSyntaxError(f"expected an RDF term, found {line[pos : pos + 12]!r}", pos)
    text = m.group()
    if ch in "tf":
        datatype = XSD_BOOLEAN
    elif m.group("double") is not None:
        datatype = XSD_DOUBLE
    elif m.group("decimal") is not None:
        datatype = XSD_DECIMAL
    else:
        datatype = XSD_INTEGER
    return adapter.literal(text, None, datatype), m.end()


def scan_triple(line: str, pos: int, adapter: TermAdapter[T], depth_left: int = MAX_NESTING) -> tuple[T, T, T, int]:
    """Read ``<< s p o >>`` (or ``<<( s p o )>>``) at ``pos``: (s, p, o, end index)."""
    if depth_left <= 0:
        raise TermSyntaxError("quoted triples nested too deeply", pos)
    pos += 2
    paren = line.startswith("(", pos)
    if paren:
        pos += 1
    s, pos = _scan(line, skip_ws(line, pos), adapter, depth_left - 1)
    p, pos = _scan(line, skip_ws(line, pos), adapter, depth_left - 1)
    o, pos = _scan(line, skip_ws(line, pos), adapter, depth_left - 1)
    pos = skip_ws(line, pos)
    close = ")>>" if paren else ">>"
    if not line.startswith(close, pos):
        raise TermSyntaxError(f"a quoted triple has three terms and ends with '{close}'", pos)
    return s, p, o, pos + len(close)


# -- the string adapter ---------------------------------------------------------------

# Fast paths for unpack: the shapes the format_* functions produce without escapes.
_PLAIN_IRI_TERM = re.compile("<(?!_:)([^" + IRI_EXCLUDED + "]*)>")
_PLAIN_BNODE_TERM = LazyPattern("_:(" + BNODE_LABEL + ")")
_PLAIN_LITERAL_TERM = re.compile(
    r'"([^"\\\r\n]*)"(?:@([a-zA-Z]+(?:-[a-zA-Z0-9]+)*)|\^\^<(?!_:)([^' + IRI_EXCLUDED + "]*)>)?"
)


class _Unpacker:
    """A term adapter whose terms are ``unpack`` tuples (the slow path of NTriplesTerms)."""

    def iri(self, value: str) -> Unpacked:
        return (IRI, value)

    def bnode(self, label: str) -> Unpacked:
        return (BNODE, label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> Unpacked:
        return (LITERAL, lex, lang, datatype)

    def triple(self, s: Unpacked, p: Unpacked, o: Unpacked) -> Unpacked:
        return (TRIPLE, s, p, o)  # not reached: NTriplesTerms.unpack reads triples itself

    def default_graph(self) -> Unpacked:
        return (DEFAULT_GRAPH,)

    def unpack(self, term: Unpacked) -> Unpacked:
        return term


_UNPACKER = _Unpacker()


class NTriplesTerms:
    """Terms as ``str`` in N-Triples syntax; the default graph is ``""``.

    ``iri("http://x")`` is ``"<http://x>"``, ``bnode("b1")`` is ``"_:b1"``,
    ``literal("a", "en")`` is ``'"a"@en'`` and ``triple(s, p, o)`` is ``"<< s p o >>"``.
    Builders produce one canonical string per term, so strings compare like terms. Build
    methods raise :class:`TermFormatError` for values with no N-Triples form.
    """

    __slots__ = ()

    def iri(self, value: str) -> str:
        return format_iri(value)

    def bnode(self, label: str) -> str:
        return format_bnode(label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> str:
        return format_literal(lex, lang, datatype)

    def triple(self, s: str, p: str, o: str) -> str:
        return "<< " + s + " " + p + " " + o + " >>"

    def default_graph(self) -> str:
        return ""

    def unpack(self, term: str) -> Unpacked:
        """Parse an N-Triples term string; raises :class:`EncodeError` if it is not one."""
        if not isinstance(term, str):
            raise EncodeError(f"not an N-Triples term string: {term!r}")
        if not term:
            return (DEFAULT_GRAPH,)
        # Fast paths keyed on the first character for the unescaped common shapes.
        first = term[0]
        if first == "<":
            m = _PLAIN_IRI_TERM.fullmatch(term)
            if m is not None:
                return (IRI, m.group(1))
        elif first == '"':
            m = _PLAIN_LITERAL_TERM.fullmatch(term)
            if m is not None:
                return (LITERAL, m.group(1), m.group(2), m.group(3))
        elif first == "_":
            m = _PLAIN_BNODE_TERM.fullmatch(term)
            if m is not None:
                return (BNODE, m.group(1))
        return self._unpack_slow(term)

    def _unpack_slow(self, term: str) -> Unpacked:
        result: Unpacked
        try:
            if term.startswith("<<"):
                s, p, o, end = scan_triple(term, 0, self)
                result = (TRIPLE, s, p, o)
            else:
                result, end = _scan(term, 0, _UNPACKER, MAX_NESTING)
        except (TermSyntaxError, TermFormatError) as exc:
            raise EncodeError(f"not an N-Triples term: {term!r} ({exc})") from None
        if end != len(term):
            raise EncodeError(f"not an N-Triples term: {term!r} (unexpected text at index {end})")
        return result


_TERMS = NTriplesTerms()


def header_text(term: Any, adapter: TermAdapter[Any] | None = None) -> str:
    """A header value (a term of ``adapter``, N-Triples strings by default) as chain ids are
    compared: an IRI's text, anything else its N-Triples form."""
    adapter = adapter or _TERMS
    unpacked = adapter.unpack(term)
    if unpacked[0] == IRI:
        return str(unpacked[1])
    return term if isinstance(adapter, NTriplesTerms) else format_term(adapter, term)
