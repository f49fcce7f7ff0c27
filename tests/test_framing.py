"""Delimited framing, bare-frame detection and partial frames (docs/design.md §1)."""

from __future__ import annotations

import pytest

from patchsync.codec.framing import Framer, encode_varint, read_varint
from patchsync.errors import DecodeError


def delimited(*frames: bytes) -> bytes:
    return b"".join(encode_varint(len(f)) + f for f in frames)


# A frame body whose first row starts with field 1, like a real options row.
FRAME_A = b"\x0a\x04\x0a\x02\x78\x01"
FRAME_B = b"\x0a\x02\x7a\x00"


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**63])
def test_varint_round_trip(value: int) -> None:
    data = encode_varint(value)
    assert read_varint(data, 0, len(data)) == (value, len(data))
    assert read_varint(data, 0, len(data) - 1) is None


def test_varint_longer_than_ten_bytes_is_rejected() -> None:
    with pytest.raises(ValueError):
        read_varint(b"\xff" * 11, 0, 11)


def test_delimited_frames_with_offsets() -> None:
    data = delimited(FRAME_A, FRAME_B)
    framer = Framer()
    framer.feed(data)
    framer.close()
    assert framer.next_frame() == (0, FRAME_A)
    assert framer.next_frame() == (1 + len(FRAME_A), FRAME_B)
    assert framer.next_frame() is None


def test_partial_frame_waits_until_closed() -> None:
    data = delimited(FRAME_A, FRAME_B)
    framer = Framer(source="log.jellyp")
    framer.feed(data[:-2])
    assert framer.next_frame() == (0, FRAME_A)
    assert framer.next_frame() is None  # need more data, not an error
    framer.close()
    with pytest.raises(DecodeError) as info:
        framer.next_frame()
    assert "log.jellyp" in str(info.value)
    assert f"byte {1 + len(FRAME_A)}" in str(info.value)
    assert "truncated" in str(info.value)


def test_byte_at_a_time_yields_the_same_frames() -> None:
    data = delimited(FRAME_A, FRAME_B, FRAME_A)
    framer = Framer()
    frames = []
    for i in range(len(data)):
        framer.feed(data[i : i + 1])
        while (frame := framer.next_frame()) is not None:
            frames.append(frame)
    framer.close()
    assert framer.next_frame() is None
    assert [f for _, f in frames] == [FRAME_A, FRAME_B, FRAME_A]


def test_bare_single_frame_is_detected() -> None:
    framer = Framer()
    framer.feed(FRAME_A)
    assert framer.next_frame() is None  # a bare frame ends only with the input
    framer.close()
    assert framer.next_frame() == (0, FRAME_A)
    assert framer.framing == "single"


def test_frame_length_limit_is_checked_before_allocating() -> None:
    framer = Framer(max_frame_bytes=100, source="big.jellyp")
    framer.feed(encode_varint(1 << 40) + b"\x0a")
    with pytest.raises(DecodeError, match="exceeds the limit of 100 bytes"):
        framer.next_frame()


def test_empty_input_is_an_empty_stream() -> None:
    framer = Framer()
    framer.close()
    assert framer.next_frame() is None
