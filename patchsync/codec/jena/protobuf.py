"""RDF Protobuf (``.rpb``): Jena's delimited ``RDF_StreamRow`` messages, read and written by hand.

A stream is a sequence of rows, each an ``RDF_StreamRow`` (``proto/jena_rdf.proto``)
preceded by its length as a varint (Java's ``writeDelimitedTo``). The reader parses the
protobuf wire format itself rather than through the generated classes: every malformed
input then fails with the rule it broke and the row it is in (not a protobuf exception),
lengths are checked against the limits before anything is sliced, and the term semantics
are those of :mod:`.terms`, shared with RDF Thrift. ``tests/test_jena_binary_protobuf.py``
parses the same bytes with the generated classes and compares.

Stricter than a generic protobuf parser, on purpose: a oneof (``RDF_StreamRow``,
``RDF_Term``, a literal's kind) holds one member and a field appears once, because a
writer that sets two is broken and "last one wins" would hide it. Unknown fields are
skipped (forward compatibility), except that a row or term made only of unknown fields
is an error: it holds something this reader cannot represent. ``base`` rows are read and
dropped (Jena writes only absolute IRIs). RDF 1.2's ``langdir`` (field 5 of a literal, a
newer Jena) is refused rather than dropped, which would lose the base direction.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar

from patchsync.codec.jena.stream import BinaryDecoder, BinaryEncoder, Short, stream_varint, utf8
from patchsync.codec.jena.terms import NESTED, POS_G, POS_O, POS_P, POS_S
from patchsync.codec.term_decoder import RuleViolation
from patchsync.codec.wire import ld, tag, varint

T = TypeVar("T")

_unpack_double = struct.Struct("<d").unpack_from
_pack_double = struct.Struct("<d").pack
_UNSET: Any = object()

_WIRE_NAMES = ("varint", "64-bit", "length-delimited", "start group", "end group", "32-bit", "6", "7")
# RDF_Term members: field -> (name, wire type).
_TERM_FIELDS = {
    1: ("iri", 2),
    2: ("bnode", 2),
    3: ("literal", 2),
    4: ("prefixName", 2),
    5: ("variable", 2),
    6: ("tripleTerm", 2),
    7: ("any", 2),
    8: ("undefined", 2),
    9: ("repeat", 2),
    20: ("valInteger", 0),
    21: ("valDouble", 1),
    22: ("valDecimal", 2),
}
_ROW_FIELDS = {1: "prefixDecl", 2: "triple", 3: "quad", 4: "base"}
_SHORT_SPOG = frozenset({0x0A, 0x12, 0x1A, 0x22})  # keys of fields 1-4, length-delimited
_CACHE_LIMIT = 1 << 16


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= 10:
            raise RuleViolation("malformed varint: longer than 10 bytes (bad varint)")
    raise RuleViolation("message ends inside a varint (truncated field)")


def _zigzag(n: int, bits: int) -> int:
    if n >= 1 << bits:
        raise RuleViolation(f"zigzag value does not fit in {bits} bits")
    return (n >> 1) ^ -(n & 1)


def _wrong_type(message: str, name: str, got: int, want: int) -> RuleViolation:
    return RuleViolation(
        f"field {name} of {message} has wire type {_WIRE_NAMES[got]}, expected {_WIRE_NAMES[want]} (wrong field type)"
    )


def _field(buf: bytes, pos: int, end: int) -> tuple[int, int, int, int, int]:
    """The field at ``pos``: ``(number, wire type, a, b, next pos)``.

    Length-delimited: ``a, b`` are the payload's bounds; varint: ``a`` is the value; fixed
    64/32-bit: ``a`` is the payload's start.
    """
    key, pos = _varint(buf, pos, end)
    number, wire = key >> 3, key & 7
    if number == 0:
        raise RuleViolation("field number 0 (malformed protobuf)")
    if wire == 2:
        size, pos = _varint(buf, pos, end)
        stop = pos + size
        if stop > end:
            raise RuleViolation(f"field {number} announces {size} bytes, {end - pos} present (truncated field)")
        return number, 2, pos, stop, stop
    if wire == 0:
        value, pos = _varint(buf, pos, end)
        return number, 0, value, 0, pos
    if wire in (1, 5):
        stop = pos + (8 if wire == 1 else 4)
        if stop > end:
            raise RuleViolation(f"field {number} is cut short (truncated fixed-size field)")
        return number, wire, pos, stop, stop
    raise RuleViolation(f"wire type {wire} in field {number} (groups and types 6-7 are not used by RDF Protobuf)")


def _text(buf: bytes, a: int, b: int, what: str) -> str:
    try:
        return buf[a:b].decode("utf-8")
    except UnicodeDecodeError:
        raise RuleViolation(f"{what} is not valid UTF-8 (protobuf strings are UTF-8)") from None


def _strings(buf: bytes, pos: int, end: int, message: str, names: tuple[str, ...]) -> list[str]:
    """The string fields 1..n of a message of strings (absent ones are ``""``, as in proto3)."""
    values: list[str | None] = [None] * len(names)
    while pos < end:
        number, wire, a, b, pos = _field(buf, pos, end)
        if number <= len(names):
            name = names[number - 1]
            if wire != 2:
                raise _wrong_type(message, name, wire, 2)
            if values[number - 1] is not None:
                raise RuleViolation(f"field {name} of {message} appears twice")
            values[number - 1] = _text(buf, a, b, f"{message}.{name}")
    return [v or "" for v in values]


class RdfProtobufDecoder(BinaryDecoder[T]):
    """Reads an RDF Protobuf stream (see :class:`~patchsync.codec.jena.stream.BinaryDecoder`)."""

    format_name = "RDF Protobuf"
    _repeated = False

    def _read_row(self, buf: bytes, pos: int, end: int, offset: int, index: int) -> int:
        result, i = stream_varint(buf, pos, end, "malformed row length: varint longer than 10 bytes (bad varint)")
        if result > self.max_row:
            raise RuleViolation(f"row length {result} exceeds the limit of {self.max_row} bytes (oversize row)")
        stop = i + result
        if stop > end:
            raise Short(stop)
        self._row(buf, i, stop, offset, index)
        return stop

    def _row(self, buf: bytes, pos: int, end: int, offset: int, index: int) -> None:
        member = 0
        unknown = 0
        while pos < end:
            number, wire, a, b, pos = _field(buf, pos, end)
            name = _ROW_FIELDS.get(number)
            if name is None:
                unknown = number
                continue
            if wire != 2:
                raise _wrong_type("RDF_StreamRow", name, wire, 2)
            if member:
                raise RuleViolation("RDF_StreamRow has more than one member set (oneof row)")
            member = number
            if number == 2:
                s, p, o, _ = self._statement_terms(buf, a, b, "RDF_Triple", False)
                self._statement(s, p, o, None, offset, index)
            elif number == 3:
                s, p, o, g = self._statement_terms(buf, a, b, "RDF_Quad", True)
                self._statement(s, p, o, g, offset, index)
            elif number == 1:
                prefix, uri = _strings(buf, a, b, "RDF_PrefixDecl", ("prefix", "uri"))
                self._prefix(prefix, uri, offset, index)
            # number 4, base: IRIs in these streams are absolute; nothing to keep.
        if not member:
            if unknown:
                raise RuleViolation(f"unknown RDF_StreamRow member, field {unknown} (unknown union member)")
            raise RuleViolation("RDF_StreamRow has no member set (empty row)")

    def _statement_terms(self, buf: bytes, pos: int, end: int, message: str, quad: bool) -> list[Any]:
        terms: list[Any] = [_UNSET, _UNSET, _UNSET, _UNSET]
        limit = 4 if quad else 3
        cache = self._term_cache
        while pos < end:
            key_byte = buf[pos]
            if key_byte in _SHORT_SPOG and pos + 1 < end and buf[pos + 1] < 0x80:
                # Hot path: field 1-4, length-delimited, length in one byte.
                number = key_byte >> 3
                a = pos + 2
                b = pos = a + buf[pos + 1]
                if b > end:
                    raise RuleViolation(f"field {number} announces more bytes than its message holds (truncated field)")
            else:
                number, wire, a, b, pos = _field(buf, pos, end)
                if number > limit:
                    continue
                if wire != 2:
                    raise _wrong_type(message, "SPOG"[number - 1], wire, 2)
            if number > limit:
                continue
            if terms[number - 1] is not _UNSET:
                raise RuleViolation(f"field {'SPOG'[number - 1]} of {message} appears twice")
            # A term's bytes decode to the same term while the prefixes stay the same (the
            # cache is cleared when they change), except REPEAT, which is never cached.
            key = buf[a:b]
            term = cache.get(key, _UNSET)
            if term is _UNSET:
                self._repeated = False
                term = self._term(buf, a, b, number - 1, 0)
                if not self._repeated:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    cache[key] = term
            terms[number - 1] = term
        for position in (POS_S, POS_P, POS_O):
            if terms[position] is _UNSET:
                raise RuleViolation(f"{message} without {'SPO'[position]} (a statement needs all three terms)")
        if quad:
            g = terms[POS_G]
            terms[POS_G] = self.terms.default_graph if g is _UNSET else self.terms.graph(g)
        return terms

    def _term(self, buf: bytes, pos: int, end: int, position: int, depth: int) -> Any:
        reader = self.terms
        result = _UNSET
        unknown = 0
        while pos < end:
            number, wire, a, b, pos = _field(buf, pos, end)
            known = _TERM_FIELDS.get(number)
            if known is None:
                unknown = number
                continue
            name, want = known
            if wire != want:
                raise _wrong_type("RDF_Term", name, wire, want)
            if result is not _UNSET:
                raise RuleViolation("RDF_Term has more than one member set (oneof term)")
            if number == 1:
                result = reader.iri(_strings(buf, a, b, "RDF_IRI", ("iri",))[0])
            elif number == 2:
                result = reader.bnode(_strings(buf, a, b, "RDF_BNode", ("label",))[0])
            elif number == 3:
                result = self._literal(buf, a, b)
            elif number == 4:
                result = reader.prefixed(*_strings(buf, a, b, "RDF_PrefixName", ("prefix", "localName")))
            elif number == 6:
                if depth >= reader.max_nesting:
                    raise RuleViolation(f"triple terms nested deeper than {reader.max_nesting} (nesting limit)")
                s, p, o, _ = self._statement_terms_nested(buf, a, b, depth + 1)
                result = reader.triple(s, p, o)
            elif number == 9:
                result = reader.repeat(position)
                self._repeated = True
            elif number == 20:
                result = reader.integer(_zigzag(a, 64))
            elif number == 21:
                result = reader.double(_unpack_double(buf, a)[0])
            elif number == 22:
                result = self._decimal(buf, a, b)
            else:
                reader.refuse({5: "a variable (RDF_Var)", 7: "ANY", 8: "UNDEF"}[number])
        if result is _UNSET:
            if unknown:
                raise RuleViolation(f"unknown RDF_Term member, field {unknown} (unknown union member)")
            raise RuleViolation("RDF_Term has no member set (empty term)")
        return result

    def _statement_terms_nested(self, buf: bytes, pos: int, end: int, depth: int) -> list[Any]:
        terms: list[Any] = [_UNSET, _UNSET, _UNSET]
        while pos < end:
            number, wire, a, b, pos = _field(buf, pos, end)
            if number > 3:
                continue
            name = "SPO"[number - 1]
            if wire != 2:
                raise _wrong_type("RDF_Triple", name, wire, 2)
            if terms[number - 1] is not _UNSET:
                raise RuleViolation(f"field {name} of RDF_Triple appears twice")
            terms[number - 1] = self._term(buf, a, b, NESTED, depth)
        if _UNSET in terms:
            raise RuleViolation("triple term without all of S, P and O")
        return [*terms, None]

    def _literal(self, buf: bytes, pos: int, end: int) -> Any:
        lex = ""
        kind = 0
        value: str | None = None
        while pos < end:
            number, wire, a, b, pos = _field(buf, pos, end)
            if number == 1:
                if wire != 2:
                    raise _wrong_type("RDF_Literal", "lex", wire, 2)
                lex = _text(buf, a, b, "RDF_Literal.lex")
                continue
            if number == 5:
                raise RuleViolation("literal with a base direction (langdir, RDF 1.2) is not supported")
            if number not in (2, 3, 4, 9):
                continue
            name = {2: "langtag", 3: "datatype", 4: "dtPrefix", 9: "simple"}[number]
            want = 0 if number == 9 else 2
            if wire != want:
                raise _wrong_type("RDF_Literal", name, wire, want)
            if kind:
                raise RuleViolation("RDF_Literal has more than one literal kind set (oneof literalKind)")
            kind = number
            if number == 2 or number == 3:
                value = _text(buf, a, b, f"RDF_Literal.{name}")
            elif number == 4:
                value = self.terms.expand(*_strings(buf, a, b, "RDF_PrefixName", ("prefix", "localName")))
        if kind == 2:
            return self.terms.literal(lex, value, None)
        if kind in (3, 4):
            return self.terms.literal(lex, None, value)
        # simple = true, or (leniently) no kind at all: a simple literal.
        return self.terms.literal(lex, None, None)

    def _decimal(self, buf: bytes, pos: int, end: int) -> Any:
        value = scale = 0
        while pos < end:
            number, wire, a, _, pos = _field(buf, pos, end)
            if number in (1, 2):
                name = "value" if number == 1 else "scale"
                if wire != 0:
                    raise _wrong_type("RDF_Decimal", name, wire, 0)
                if number == 1:
                    value = _zigzag(a, 64)
                else:
                    scale = _zigzag(a, 32)
        return self.terms.decimal(value, scale)


# -- writing ----------------------------------------------------------------------------

_T_IRI, _T_BNODE, _T_LITERAL, _T_PREFIXED = tag(1, 2), tag(2, 2), tag(3, 2), tag(4, 2)
_T_TRIPLE = tag(6, 2)
_T_REPEAT = ld(tag(9, 2), b"")
_T_INTEGER, _T_DOUBLE, _T_DECIMAL = tag(20, 0), tag(21, 1), tag(22, 2)
_F1, _F2, _F3, _F4 = tag(1, 2), tag(2, 2), tag(3, 2), tag(4, 2)
_LIT_SIMPLE = tag(9, 0) + b"\x01"
_V1, _V2 = tag(1, 0), tag(2, 0)
_ROW_PREFIX, _ROW_TRIPLE, _ROW_QUAD = tag(1, 2), tag(2, 2), tag(3, 2)


def _str(field: bytes, text: str) -> bytes:
    # proto3 leaves default values out; so does the generated serializer we are compared with.
    return ld(field, utf8(text)) if text else b""


def _zz(value: int) -> bytes:
    return varint((value << 1) ^ (value >> 63))


def _row(body: bytes) -> bytes:
    return varint(len(body)) + body


class RdfProtobufEncoder(BinaryEncoder[T]):
    """Writes RDF Protobuf rows (see :class:`~patchsync.codec.jena.stream.BinaryEncoder`).

    The output is byte-identical to serializing the same messages with the generated
    classes. Jena's own protobuf writer writes no prefixed names (its prefix map is
    empty); pass ``prefixed_names=False`` to do the same.
    """

    def _spelled(self, spelling: tuple[Any, ...]) -> bytes:
        kind = spelling[0]
        if kind == "iri":
            return ld(_T_IRI, _str(_F1, spelling[1]))
        if kind == "prefixed":
            return ld(_T_PREFIXED, _str(_F1, spelling[1]) + _str(_F2, spelling[2]))
        if kind == "bnode":
            return ld(_T_BNODE, _str(_F1, spelling[1]))
        if kind == "literal":
            _, lex, lang, datatype = spelling
            if lang:
                body = _str(_F1, lex) + _str(_F2, lang)
            elif datatype is not None:
                body = _str(_F1, lex) + _str(_F3, datatype)
            else:
                body = _str(_F1, lex) + _LIT_SIMPLE
            return ld(_T_LITERAL, body)
        if kind == "dtprefixed":
            _, lex, prefix, local = spelling
            return ld(_T_LITERAL, _str(_F1, lex) + ld(_F4, _str(_F1, prefix) + _str(_F2, local)))
        if kind == "integer":
            return _T_INTEGER + _zz(spelling[1])
        if kind == "double":
            return _T_DOUBLE + _pack_double(spelling[1])
        # decimal
        value, scale = spelling[1], spelling[2]
        body = (_V1 + _zz(value) if value else b"") + (_V2 + _zz(scale) if scale else b"")
        return ld(_T_DECIMAL, body)

    def _triple_term(self, s: bytes, p: bytes, o: bytes) -> bytes:
        return ld(_T_TRIPLE, ld(_F1, s) + ld(_F2, p) + ld(_F3, o))

    def _repeat_term(self) -> bytes:
        return _T_REPEAT

    def _triple_row(self, s: bytes, p: bytes, o: bytes) -> bytes:
        return _row(ld(_ROW_TRIPLE, ld(_F1, s) + ld(_F2, p) + ld(_F3, o)))

    def _quad_row(self, s: bytes, p: bytes, o: bytes, g: bytes) -> bytes:
        return _row(ld(_ROW_QUAD, ld(_F1, s) + ld(_F2, p) + ld(_F3, o) + ld(_F4, g)))

    def _prefix_row(self, prefix: str, uri: str) -> bytes:
        return _row(ld(_ROW_PREFIX, _str(_F1, prefix) + _str(_F2, uri)))
