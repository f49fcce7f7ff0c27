"""Hand-written protobuf wire encoding for the few message shapes the encoders emit.

Building ``RdfPatchRow`` objects through the protobuf API costs about a microsecond per
message; concatenating bytes is several times cheaper. Field numbers come from
``proto/*.proto``; tests decode everything written here with the generated classes, so
a mismatch cannot go unnoticed.
"""

from __future__ import annotations

from patchsync.codec.framing import encode_varint
from patchsync.errors import EncodeError

_SMALL = [encode_varint(i) for i in range(1 << 14)]


def varint(value: int) -> bytes:
    """Varint bytes, from a table for small values."""
    if value < 16384:
        return _SMALL[value]
    return encode_varint(value)


def tag(field: int, wire_type: int) -> bytes:
    return encode_varint((field << 3) | wire_type)


def ld(tag_bytes: bytes, payload: bytes) -> bytes:
    """A length-delimited field: tag, length, payload."""
    n = len(payload)
    return tag_bytes + (_SMALL[n] if n < 16384 else encode_varint(n)) + payload


def ld_str(tag_bytes: bytes, text: str) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates cannot be written: protobuf strings must be valid UTF-8.
        raise EncodeError(f"string is not valid Unicode text ({exc.reason}): {text[:60]!r}") from None
    return ld(tag_bytes, data)


# Term oneof tags by position: (iri, bnode, literal, quoted triple or default graph).
# RdfTriple / RdfQuad fields 1-16, RdfPatchHeader fields 2-5, RdfPatchNamespace 3-6.
S_TAGS = (tag(1, 2), tag(2, 2), tag(3, 2), tag(4, 2))
P_TAGS = (tag(5, 2), tag(6, 2), tag(7, 2), tag(8, 2))
O_TAGS = (tag(9, 2), tag(10, 2), tag(11, 2), tag(12, 2))
G_TAGS = (tag(13, 2), tag(14, 2), tag(16, 2), tag(15, 2))  # iri, bnode, literal, default
H_TAGS = (tag(2, 2), tag(3, 2), tag(4, 2), tag(5, 2))
NS_G_TAGS = (tag(3, 2), tag(4, 2), tag(6, 2), tag(5, 2))  # iri, bnode, literal, default

# RdfIri fields.
IRI_PREFIX = tag(1, 0)
IRI_NAME = tag(2, 0)
# RdfLiteral fields.
LIT_LEX = tag(1, 2)
LIT_LANG = tag(2, 2)
LIT_DATATYPE = tag(3, 0)
# Lookup entry fields (RdfNameEntry, RdfPrefixEntry, RdfDatatypeEntry).
ENTRY_ID = tag(1, 0)
ENTRY_VALUE = tag(2, 2)
# RdfPatchNamespace / RdfPatchHeader scalar fields.
NS_NAME = tag(1, 2)
NS_VALUE = tag(2, 2)
HEADER_KEY = tag(1, 2)
# RdfPatchFrame.rows
FRAME_ROW = tag(1, 2)

# RdfPatchRow fields.
ROW_OPTIONS = tag(1, 2)
ROW_ADD = tag(2, 2)
ROW_DELETE = tag(3, 2)
ROW_NS_ADD = tag(4, 2)
ROW_NS_DELETE = tag(5, 2)
ROW_NAME = tag(11, 2)
ROW_PREFIX = tag(12, 2)
ROW_DATATYPE = tag(13, 2)
ROW_HEADER = tag(14, 2)
# Rows whose message has no fields: the whole row is constant.
ROW_TX_START = ld(tag(6, 2), b"")
ROW_TX_COMMIT = ld(tag(7, 2), b"")
ROW_TX_ABORT = ld(tag(8, 2), b"")
ROW_PUNCTUATION = ld(tag(15, 2), b"")
EMPTY_MESSAGE = b""
