"""RDF Thrift (``.rt``): Jena's ``RDF_StreamRow`` unions in the Thrift compact protocol, by hand.

Why by hand rather than through the Apache Thrift library: the part of the compact
protocol RDF Thrift uses is small (varints, zigzag integers, field headers whose id is a
delta from the previous one, structs ending in a STOP byte, unions as structs with one
field, length-prefixed strings, little-endian doubles, and lists only to be skipped), the
library is not available offline here and would add a dependency with a C extension for
a few hundred lines; above all, its generated readers raise transport exceptions and
allocate announced lengths before checking them, while this reader checks every length
against the limits first and names the broken rule and row. The Thrift specification's
compact protocol document is the reference; nothing is copied from an implementation.

A stream is a plain sequence of ``RDF_StreamRow`` structs (no length prefix: a struct
ends with its STOP byte), so the reader cannot know a row's size up front: it parses
into the buffer and, when the buffer ends first, waits for more bytes (see
:class:`~patchsync.codec.jena.stream.BinaryDecoder`).

Rules beyond the term semantics of :mod:`.terms`: a known field has its declared type
("wrong field type"); a union has exactly one member and one this reader knows ("unknown
union member"); required struct fields are present; fields appear once. Unknown fields of
structs are skipped (Thrift's forward compatibility), except RDF 1.2's ``baseDirection``
of a literal, refused rather than dropped.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar

from patchsync.codec.jena.stream import BinaryDecoder, BinaryEncoder, Short, utf8
from patchsync.codec.jena.stream import stream_varint as _varint
from patchsync.codec.jena.terms import NESTED
from patchsync.codec.term_decoder import RuleViolation
from patchsync.codec.wire import varint

T = TypeVar("T")

_unpack_double = struct.Struct("<d").unpack_from
_pack_double = struct.Struct("<d").pack
_UNSET: Any = object()

# Compact protocol type codes.
STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = range(14)
_TYPE_NAMES = (
    "stop", "bool", "bool", "byte", "i16", "i32", "i64", "double", "string", "list", "set", "map", "struct", "uuid",
)  # fmt: skip
_FIXED = {BYTE: 1, DOUBLE: 8, UUID: 16}

# RDF_Term members: field id -> (name, type).
_TERM_FIELDS = {
    1: ("iri", STRUCT),
    2: ("bnode", STRUCT),
    3: ("literal", STRUCT),
    4: ("prefixName", STRUCT),
    5: ("variable", STRUCT),
    6: ("any", STRUCT),
    7: ("undefined", STRUCT),
    8: ("repeat", STRUCT),
    9: ("tripleTerm", STRUCT),
    10: ("valInteger", I64),
    11: ("valDouble", DOUBLE),
    12: ("valDecimal", STRUCT),
}
_ROW_FIELDS = {1: "prefixDecl", 2: "triple", 3: "quad"}
_PLAIN_MEMBERS = frozenset({0x1C, 0x2C, 0x3C, 0x4C})  # iri, bnode, literal, prefixName headers
_CACHE_LIMIT = 1 << 16


def _zigzag(n: int, bits: int) -> int:
    if n >= 1 << bits:
        raise RuleViolation(f"zigzag integer does not fit in {bits} bits (bad varint)")
    return (n >> 1) ^ -(n & 1)


def _header(buf: bytes, pos: int, end: int, last: int) -> tuple[int, int, int]:
    """A field header after field ``last``: ``(field id, type, next pos)``; type 0 is STOP."""
    if pos >= end:
        raise Short(pos + 1)
    b = buf[pos]
    pos += 1
    kind = b & 0x0F
    if kind == STOP:
        return 0, STOP, pos
    if kind > UUID:
        raise RuleViolation(f"unknown Thrift type code {kind} in a field header")
    delta = b >> 4
    if delta:
        return last + delta, kind, pos
    raw, pos = _varint(buf, pos, end)
    return _zigzag(raw, 16), kind, pos


def _span(buf: bytes, pos: int, end: int) -> int:
    """End of the term at ``pos`` if it is a plain one, else -1 (nothing is built).

    Plain: an IRI, blank node, literal or prefixed name whose struct holds only strings
    (and a literal's ``dtPrefix`` struct of strings), with short field headers and
    one-byte lengths; the common case, which the term cache can then look up by its bytes.
    """
    if pos >= end or buf[pos] not in _PLAIN_MEMBERS:
        return -1
    p = pos + 1
    depth = 1
    while p < end:
        b = buf[p]
        if b == 0:
            p += 1
            depth -= 1
            if depth == 0:
                return p + 1 if p < end and buf[p] == 0 else -1
        elif b & 0x0F == BINARY and b >> 4:
            if p + 1 >= end or buf[p + 1] & 0x80:
                return -1
            p += 2 + buf[p + 1]
        elif b & 0x0F == STRUCT and b >> 4 and depth == 1:
            depth = 2
            p += 1
        else:
            return -1
    return -1


def _wrong_type(message: str, name: str, got: int) -> RuleViolation:
    return RuleViolation(f"field {name} of {message} has Thrift type {_TYPE_NAMES[got]} (wrong field type)")


class RdfThriftDecoder(BinaryDecoder[T]):
    """Reads an RDF Thrift stream (see :class:`~patchsync.codec.jena.stream.BinaryDecoder`)."""

    format_name = "RDF Thrift"

    def _read_row(self, buf: bytes, pos: int, end: int, offset: int, index: int) -> int:
        number, kind, pos = _header(buf, pos, end, 0)
        if kind == STOP:
            raise RuleViolation("RDF_StreamRow has no member set (empty union)")
        name = _ROW_FIELDS.get(number)
        if name is None:
            raise RuleViolation(f"unknown RDF_StreamRow member, field id {number} (unknown union member)")
        if kind != STRUCT:
            raise RuleViolation(
                f"field {name} of RDF_StreamRow has Thrift type {_TYPE_NAMES[kind]}, expected struct (wrong field type)"
            )
        if number == 1:
            (prefix, uri), pos = self._strings(buf, pos, end, "RDF_PrefixDecl", ("prefix", "uri"))
            terms: list[Any] = []
        else:
            terms, pos = self._spo(buf, pos, end, number == 3, 0)
        _, kind, pos = _header(buf, pos, end, number)
        if kind != STOP:
            raise RuleViolation("RDF_StreamRow has more than one member set (a union holds exactly one)")
        # The whole row is read: commit it.
        if number == 1:
            self._prefix(prefix, uri, offset, index)
        else:
            s, p, o, g = terms
            self._emit(s, p, o, g, number == 3, offset, index)
        return pos

    def _emit(self, s: Any, p: Any, o: Any, g: Any, quad: bool, offset: int, index: int) -> None:
        if not quad:
            g = None
        elif g is _UNSET:
            g = self.terms.default_graph
        else:
            g = self.terms.graph(g)
        self._statement(s, p, o, g, offset, index)

    def _spo(self, buf: bytes, pos: int, end: int, quad: bool, depth: int) -> tuple[list[Any], int]:
        message = "RDF_Quad" if quad else "RDF_Triple"
        limit = 4 if quad else 3
        position = NESTED if depth else 0
        terms: list[Any] = [_UNSET, _UNSET, _UNSET, _UNSET]
        cache = self._term_cache
        last = 0
        while True:
            number, kind, pos = _header(buf, pos, end, last)
            if kind == STOP:
                break
            last = number
            if not 1 <= number <= limit:
                pos = self._skip(buf, pos, end, kind, 0)
                continue
            name = "SPOG"[number - 1]
            if kind != STRUCT:
                raise _wrong_type(message, name, kind)
            if terms[number - 1] is not _UNSET:
                raise RuleViolation(f"field {name} of {message} appears twice")
            stop = _span(buf, pos, end) if position == 0 else -1
            if stop < 0:
                terms[number - 1], pos = self._term(buf, pos, end, number - 1 if position == 0 else NESTED, depth)
                continue
            # A plain term seen before: the same bytes give the same term while the
            # prefixes stay the same (the cache is cleared when they change).
            key = buf[pos:stop]
            term = cache.get(key, _UNSET)
            if term is _UNSET:
                term = self._term(buf, pos, end, number - 1, depth)[0]
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[key] = term
            terms[number - 1] = term
            pos = stop
        for i in range(3):
            if terms[i] is _UNSET:
                raise RuleViolation(f"{message} without required field {'SPO'[i]}")
        return terms, pos

    def _term(self, buf: bytes, pos: int, end: int, position: int, depth: int) -> tuple[Any, int]:
        reader = self.terms
        number, kind, pos = _header(buf, pos, end, 0)
        if kind == STOP:
            raise RuleViolation("RDF_Term has no member set (empty union)")
        known = _TERM_FIELDS.get(number)
        if known is None:
            raise RuleViolation(f"unknown RDF_Term member, field id {number} (unknown union member)")
        name, want = known
        if kind != want:
            raise RuleViolation(
                f"field {name} of RDF_Term has Thrift type {_TYPE_NAMES[kind]}, "
                f"expected {_TYPE_NAMES[want]} (wrong field type)"
            )
        term: Any
        if number == 1:
            (iri,), pos = self._strings(buf, pos, end, "RDF_IRI", ("iri",))
            term = reader.iri(iri)
        elif number == 2:
            (label,), pos = self._strings(buf, pos, end, "RDF_BNode", ("label",))
            term = reader.bnode(label)
        elif number == 3:
            term, pos = self._literal(buf, pos, end)
        elif number == 4:
            (prefix, local), pos = self._strings(buf, pos, end, "RDF_PrefixName", ("prefix", "localName"))
            term = reader.prefixed(prefix, local)
        elif number == 9:
            if depth >= reader.max_nesting:
                raise RuleViolation(f"triple terms nested deeper than {reader.max_nesting} (nesting limit)")
            parts, pos = self._spo(buf, pos, end, False, depth + 1)
            term = reader.triple(parts[0], parts[1], parts[2])
        elif number == 8:
            pos = self._skip(buf, pos, end, STRUCT, 0)
            term = reader.repeat(position)
        elif number == 10:
            raw, pos = _varint(buf, pos, end)
            term = reader.integer(_zigzag(raw, 64))
        elif number == 11:
            if pos + 8 > end:
                raise Short(pos + 8)
            term = reader.double(_unpack_double(buf, pos)[0])
            pos += 8
        elif number == 12:
            term, pos = self._decimal(buf, pos, end)
        else:
            reader.refuse({5: "a variable (RDF_VAR)", 6: "ANY", 7: "UNDEF"}[number])
        _, kind, pos = _header(buf, pos, end, number)
        if kind != STOP:
            raise RuleViolation("RDF_Term has more than one member set (a union holds exactly one)")
        return term, pos

    def _string(self, buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
        size, pos = _varint(buf, pos, end)
        if size > self.max_row:
            raise RuleViolation(f"{what} of {size} bytes exceeds the limit of {self.max_row} bytes (oversize string)")
        stop = pos + size
        if stop > end:
            raise Short(stop)
        try:
            return buf[pos:stop].decode("utf-8"), stop
        except UnicodeDecodeError:
            raise RuleViolation(f"{what} is not valid UTF-8 (Thrift strings are UTF-8)") from None

    def _strings(self, buf: bytes, pos: int, end: int, message: str, names: tuple[str, ...]) -> tuple[list[str], int]:
        """A struct of required string fields 1..n."""
        values: list[str | None] = [None] * len(names)
        last = 0
        while True:
            number, kind, pos = _header(buf, pos, end, last)
            if kind == STOP:
                break
            last = number
            if not 1 <= number <= len(names):
                pos = self._skip(buf, pos, end, kind, 0)
                continue
            name = names[number - 1]
            if kind != BINARY:
                raise _wrong_type(message, name, kind)
            if values[number - 1] is not None:
                raise RuleViolation(f"field {name} of {message} appears twice")
            values[number - 1], pos = self._string(buf, pos, end, f"{message}.{name}")
        for name, value in zip(names, values, strict=True):
            if value is None:
                raise RuleViolation(f"{message} without required field {name}")
        return values, pos  # type: ignore[return-value]

    def _literal(self, buf: bytes, pos: int, end: int) -> tuple[Any, int]:
        lex: str | None = None
        lang: str | None = None
        datatype: str | None = None
        last = 0
        while True:
            number, kind, pos = _header(buf, pos, end, last)
            if kind == STOP:
                break
            last = number
            if number == 5:
                raise RuleViolation("literal with a base direction (baseDirection, RDF 1.2) is not supported")
            if number in (1, 2, 3):
                name = ("lex", "langtag", "datatype")[number - 1]
                if kind != BINARY:
                    raise _wrong_type("RDF_Literal", name, kind)
                value, pos = self._string(buf, pos, end, f"RDF_Literal.{name}")
                if number == 1:
                    lex = value
                elif number == 2:
                    lang = value
                else:
                    datatype = value
            elif number == 4:
                if kind != STRUCT:
                    raise _wrong_type("RDF_Literal", "dtPrefix", kind)
                (prefix, local), pos = self._strings(buf, pos, end, "RDF_PrefixName", ("prefix", "localName"))
                datatype = self.terms.expand(prefix, local)
            else:
                pos = self._skip(buf, pos, end, kind, 0)
        if lex is None:
            raise RuleViolation("RDF_Literal without required field lex")
        if lang and datatype is not None:
            raise RuleViolation("RDF_Literal has both a language tag and a datatype")
        return self.terms.literal(lex, lang, datatype), pos

    def _decimal(self, buf: bytes, pos: int, end: int) -> tuple[Any, int]:
        value: int | None = None
        scale: int | None = None
        last = 0
        while True:
            number, kind, pos = _header(buf, pos, end, last)
            if kind == STOP:
                break
            last = number
            if number == 1 or number == 2:
                name, want = ("value", I64) if number == 1 else ("scale", I32)
                if kind != want:
                    raise _wrong_type("RDF_Decimal", name, kind)
                raw, pos = _varint(buf, pos, end)
                if number == 1:
                    value = _zigzag(raw, 64)
                else:
                    scale = _zigzag(raw, 32)
            else:
                pos = self._skip(buf, pos, end, kind, 0)
        if value is None or scale is None:
            raise RuleViolation("RDF_Decimal without required field value or scale")
        return self.terms.decimal(value, scale), pos

    def _skip(self, buf: bytes, pos: int, end: int, kind: int, depth: int) -> int:
        """Skip a value of type ``kind`` (an unknown field), bounded like everything else."""
        if depth > self.terms.max_nesting:
            raise RuleViolation(f"unknown field nested deeper than {self.terms.max_nesting} levels (nesting limit)")
        if kind in (TRUE, FALSE):
            return pos
        if kind in (I16, I32, I64):
            return _varint(buf, pos, end)[1]
        size = _FIXED.get(kind)
        if size is not None:
            if pos + size > end:
                raise Short(pos + size)
            return pos + size
        if kind == BINARY:
            length, pos = _varint(buf, pos, end)
            if length > self.max_row:
                raise RuleViolation(f"a string of {length} bytes exceeds the limit of {self.max_row} bytes")
            if pos + length > end:
                raise Short(pos + length)
            return pos + length
        if kind == STRUCT:
            last = 0
            while True:
                number, field_kind, pos = _header(buf, pos, end, last)
                if field_kind == STOP:
                    return pos
                last = number
                pos = self._skip(buf, pos, end, field_kind, depth + 1)
        if kind in (LIST, SET):
            if pos >= end:
                raise Short(pos + 1)
            head = buf[pos]
            pos += 1
            count, element = head >> 4, head & 0x0F
            if count == 15:
                count, pos = _varint(buf, pos, end)
            return self._skip_many(buf, pos, end, count, (element,), depth)
        # MAP
        count, pos = _varint(buf, pos, end)
        if count == 0:
            return pos
        if pos >= end:
            raise Short(pos + 1)
        types = buf[pos]
        pos += 1
        return self._skip_many(buf, pos, end, count, (types >> 4, types & 0x0F), depth)

    def _skip_many(self, buf: bytes, pos: int, end: int, count: int, kinds: tuple[int, ...], depth: int) -> int:
        if count > self.max_row:
            raise RuleViolation(f"a collection of {count} elements exceeds the limit of {self.max_row}")
        for _ in range(count):
            for kind in kinds:
                if kind in (TRUE, FALSE):
                    pos += 1  # a bool inside a collection takes one byte
                    if pos > end:
                        raise Short(pos)
                elif kind == STOP or kind > UUID:
                    raise RuleViolation(f"unknown Thrift type code {kind} in a collection")
                else:
                    pos = self._skip(buf, pos, end, kind, depth + 1)
        return pos


# -- writing ----------------------------------------------------------------------------


def _h(delta: int, kind: int) -> bytes:
    return bytes([(delta << 4) | kind])


def _zz(value: int) -> bytes:
    return varint((value << 1) ^ (value >> 63))


def _s(text: str) -> bytes:
    data = utf8(text)
    return varint(len(data)) + data


_STR1 = _h(1, BINARY)  # string field, previous field id + 1
_STR2 = _h(2, BINARY)
_STRUCT1 = _h(1, STRUCT)
_END = b"\x00"
_TERM = {name: _h(number, kind) for number, (name, kind) in _TERM_FIELDS.items()}
_REPEAT = _TERM["repeat"] + _END + _END


class RdfThriftEncoder(BinaryEncoder[T]):
    """Writes RDF Thrift rows (see :class:`~patchsync.codec.jena.stream.BinaryEncoder`).

    Field order and header forms are those of Jena's generated writers (ids in declaration
    order, short delta headers), so Jena reads the output as its own.
    """

    def _spelled(self, spelling: tuple[Any, ...]) -> bytes:
        kind = spelling[0]
        if kind == "iri":
            return _TERM["iri"] + _STR1 + _s(spelling[1]) + _END + _END
        if kind == "prefixed":
            return _TERM["prefixName"] + _STR1 + _s(spelling[1]) + _STR1 + _s(spelling[2]) + _END + _END
        if kind == "bnode":
            return _TERM["bnode"] + _STR1 + _s(spelling[1]) + _END + _END
        if kind == "literal":
            _, lex, lang, datatype = spelling
            body = _STR1 + _s(lex)
            if lang:
                body += _STR1 + _s(lang)
            elif datatype is not None:
                body += _STR2 + _s(datatype)
            return _TERM["literal"] + body + _END + _END
        if kind == "dtprefixed":
            _, lex, prefix, local = spelling
            dt = _STR1 + _s(prefix) + _STR1 + _s(local) + _END
            return _TERM["literal"] + _STR1 + _s(lex) + _h(3, STRUCT) + dt + _END + _END
        if kind == "integer":
            return _TERM["valInteger"] + _zz(spelling[1]) + _END
        if kind == "double":
            return _TERM["valDouble"] + _pack_double(spelling[1]) + _END
        value, scale = spelling[1], spelling[2]
        return _TERM["valDecimal"] + _h(1, I64) + _zz(value) + _h(1, I32) + _zz(scale) + _END + _END

    def _triple_term(self, s: bytes, p: bytes, o: bytes) -> bytes:
        return _TERM["tripleTerm"] + _STRUCT1 + s + _STRUCT1 + p + _STRUCT1 + o + _END + _END

    def _repeat_term(self) -> bytes:
        return _REPEAT

    def _triple_row(self, s: bytes, p: bytes, o: bytes) -> bytes:
        return _h(2, STRUCT) + _STRUCT1 + s + _STRUCT1 + p + _STRUCT1 + o + _END + _END

    def _quad_row(self, s: bytes, p: bytes, o: bytes, g: bytes) -> bytes:
        return _h(3, STRUCT) + _STRUCT1 + s + _STRUCT1 + p + _STRUCT1 + o + _STRUCT1 + g + _END + _END

    def _prefix_row(self, prefix: str, uri: str) -> bytes:
        return _h(1, STRUCT) + _STR1 + _s(prefix) + _STR1 + _s(uri) + _END + _END


__all__ = ["RdfThriftDecoder", "RdfThriftEncoder"]
