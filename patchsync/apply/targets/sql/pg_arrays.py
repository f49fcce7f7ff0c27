"""PostgreSQL arrays of term ids and term texts, built in PostgreSQL's binary array format.

The write path sends every batch as a few arrays (``unnest(%b::bigint[], …)``, see
:mod:`~patchsync.apply.targets.sql.statements`). psycopg dumps a Python list element by
element in Python (one dumper call, one length prefix and one append each), which cost
about as much client time as the server spent running the statements (bench.pg_statements). Here a
batch is encoded in a handful of C-level operations: bigint arrays through ``array('q')``
and extended-slice copies, text arrays through ``bytes.join``. The result is wrapped in a
``bytes`` subclass whose psycopg dumper hands the bytes over unchanged with the array's
type oid, registered per connection by :func:`register`.

The format (PostgreSQL's ``array_send``): big-endian int32 dimensions (1), int32 "has
nulls" (0), uint32 element type oid, then per dimension int32 length and int32 lower bound
(1), then per element int32 byte length and the element's binary form; an empty array is
the header alone with no dimensions.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Sequence
from functools import cache
from itertools import chain
from typing import Any

#: Type oids (PostgreSQL's pg_type; fixed for built-in types).
INT8_OID = 20
TEXT_OID = 25
INT8_ARRAY_OID = 1016
TEXT_ARRAY_OID = 1009

_HEADER = struct.Struct(">iiIii")
_EMPTY = struct.Struct(">iiI")
_LENGTH = struct.Struct(">i")
_SWAP = sys.byteorder == "little"


class BigintArray(bytes):
    """A ``bigint[]`` in PostgreSQL's binary array format (see :func:`bigint_array`)."""


class TextArray(bytes):
    """A ``text[]`` in PostgreSQL's binary array format (see :func:`text_array`)."""


def bigint_array(values: Sequence[int]) -> BigintArray:
    """``values`` (each in the signed 64-bit range) as a binary ``bigint[]``."""
    n = len(values)
    if not n:
        return BigintArray(_EMPTY.pack(0, 0, INT8_OID))
    numbers = array("q", values)
    if _SWAP:
        numbers.byteswap()
    raw = numbers.tobytes()
    # Each element is 12 bytes: the length 8 as a big-endian int32, then the value. The
    # eight value bytes go into place column by column (8 extended-slice copies in C).
    body = bytearray(12 * n)
    body[3::12] = b"\x08" * n
    for j in range(8):
        body[4 + j :: 12] = raw[j::8]
    return BigintArray(_HEADER.pack(1, 0, INT8_OID, n, 1) + body)


def text_array(values: Sequence[str]) -> TextArray:
    """``values`` as a binary ``text[]`` (UTF-8, as the connection's encoding must be)."""
    n = len(values)
    if not n:
        return TextArray(_EMPTY.pack(0, 0, TEXT_OID))
    encoded = [v.encode("utf-8") for v in values]
    lengths = map(_LENGTH.pack, map(len, encoded))
    return TextArray(
        _HEADER.pack(1, 0, TEXT_OID, n, 1) + b"".join(chain.from_iterable(zip(lengths, encoded, strict=True)))
    )


def key_arrays(keys: Sequence[tuple[int, int, int, int]]) -> tuple[BigintArray, ...]:
    """Quad keys (s, p, o, g term ids) as four ``bigint[]`` columns."""
    if not keys:
        return (bigint_array(()),) * 4
    return tuple(bigint_array(column) for column in zip(*keys, strict=True))


@cache
def _dumpers() -> tuple[type[Any], type[Any]]:
    # psycopg is the PostgreSQL extra's driver: imported only once a PostgreSQL target opens.
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class Bigints(Dumper):
        format = Format.BINARY
        oid = INT8_ARRAY_OID

        def dump(self, obj: Any) -> Any:
            return obj  # already in the wire format

    class Texts(Dumper):
        format = Format.BINARY
        oid = TEXT_ARRAY_OID

        def dump(self, obj: Any) -> Any:
            return obj

    return Bigints, Texts


def register(connection: Any) -> None:
    """Let ``connection`` (a psycopg connection) send :class:`BigintArray` and :class:`TextArray`."""
    bigints, texts = _dumpers()
    connection.adapters.register_dumper(BigintArray, bigints)
    connection.adapters.register_dumper(TextArray, texts)


__all__ = ["BigintArray", "TextArray", "bigint_array", "key_arrays", "register", "text_array"]
