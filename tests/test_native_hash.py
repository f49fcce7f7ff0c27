"""The compiled term hash against hashlib (issue #14): the same number for every text.

``schema.term_hash`` is part of the stored format (each ``ps_terms`` row's ``h``): a copy
that differed on any text would make the SQL target miss stored terms and store them twice.
The compiled copy (patchsync/apply/targets/sql/_native_hash.pxi) implements BLAKE2b from RFC 7693, so
it is checked here against hashlib's BLAKE2b, the reference, on the lengths where a BLAKE2b
implementation goes wrong: the empty message (one all-zero final block, RFC 7693 §3.3), and
messages around the 128-byte block size (the last block is the final one even when full).
"""

from __future__ import annotations

import random
from hashlib import blake2b

import pytest

from patchsync.apply.targets.sql import _native, schema, speedups
from patchsync.codec import _native as codec_native


def reference(text: str) -> int:
    # Written out here rather than taken from schema.py, so a change there fails too.
    return int.from_bytes(blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


# Lengths in UTF-8 bytes: empty, one byte, and each side of one, two and three blocks.
BOUNDARIES = [0, 1, 7, 8, 9, 63, 64, 111, 112, 127, 128, 129, 255, 256, 257, 383, 384, 385, 1000]


@pytest.mark.parametrize("size", BOUNDARIES)
def test_ascii_text_of_every_boundary_length(size: int) -> None:
    text = "".join(chr(33 + (i * 7) % 94) for i in range(size))
    assert _native.term_hash(text) == reference(text)


@pytest.mark.parametrize("size", BOUNDARIES)
def test_multibyte_text_straddling_the_block_boundaries(size: int) -> None:
    # A 2-, 3- or 4-byte character cut by the block boundary: the bytes hashed are the
    # UTF-8 ones, not the str's internal form (Latin-1, UCS-2 or UCS-4).
    for char in ("\u00e9", "\u65e5", "\U0001f600"):
        for pad in range(4):
            text = "a" * pad + char * max(1, size // len(char.encode()))
            assert _native.term_hash(text) == reference(text), (char, pad, size)


def test_random_terms() -> None:
    rng = random.Random(14)
    alphabets = [(32, 127), (0x80, 0x800), (0x800, 0xD800), (0xE000, 0x10000), (0x10000, 0x110000)]
    for _ in range(3000):
        length = rng.choice([0, 1, 2, 30, 60, 127, 128, 129, 300])
        text = "".join(chr(rng.randrange(*rng.choice(alphabets))) for _ in range(length))
        assert _native.term_hash(text) == reference(text), repr(text)


def test_every_bit_of_the_digest() -> None:
    # 2,000 digests compared whole check the byte order of the conversion (a swapped order
    # would match only on byte palindromes), and both signs occurring checks the sign.
    values = [_native.term_hash(f"<http://example.org/{i}>") for i in range(2000)]
    assert values == [reference(f"<http://example.org/{i}>") for i in range(2000)]
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_text_utf8_cannot_carry_fails_as_hashlib_path_fails() -> None:
    with pytest.raises(UnicodeEncodeError):
        _native.term_hash("\ud800")
    with pytest.raises(UnicodeEncodeError):
        reference("\ud800")


def test_the_sql_target_uses_the_compiled_hash_unless_pure_is_forced() -> None:
    # Where the speed-ups are built the target hashes in C; PATCHSYNC_PURE=1 keeps hashlib's.
    expected = schema.term_hash_pure if speedups.native() is None else _native.term_hash
    assert schema.term_hash is expected
    assert schema.term_hash_pure("<x:y>") == reference("<x:y>")


def test_the_codec_core_holds_no_sql_code() -> None:
    # The hash is the SQL layer's, built into that layer's extension, not the codec's.
    assert not hasattr(codec_native, "term_hash")
