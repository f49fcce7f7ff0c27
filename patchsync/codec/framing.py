"""Splitting a byte stream into Jelly frames (sans-I/O).

A Jelly file is a sequence of frames, each prefixed by its length as a protobuf varint
(the "delimited variant"). Producers may also write one bare, non-delimited frame. The
:class:`Framer` tells the two apart from the first bytes, the way other Jelly readers do:
a bare frame starts with the tag of field 1 (``rows``, 0x0A), a varint, and then the tag of
the row's first field, while a delimited stream starts with a varint length, then 0x0A.

The framer is fed bytes and hands back whole frames; at the end of what it holds it
answers ``None`` (need more data). A partial frame is an error only once the caller has
said, with :meth:`Framer.close`, that no more input will come.
"""

from __future__ import annotations

from patchsync.errors import DecodeError

_MAX_VARINT_BYTES = 10


def read_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int] | None:
    """Decode a varint at ``pos``; ``(value, next_pos)`` or ``None`` if ``buf`` ends first.

    Raises ``ValueError`` for a varint longer than 10 bytes.
    """
    result = 0
    shift = 0
    i = pos
    while i < end:
        b = buf[i]
        result |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return result, i
        shift += 7
        if i - pos >= _MAX_VARINT_BYTES:
            raise ValueError("varint longer than 10 bytes")
    return None


def encode_varint(value: int) -> bytes:
    """The protobuf varint encoding of a non-negative integer."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def whole_frames(buf: bytes | bytearray | memoryview, max_frame_bytes: int) -> tuple[int, bool]:
    """How many leading bytes of ``buf`` are whole delimited frames, and whether bad bytes follow.

    Returns ``(end, malformed)``: ``buf[:end]`` is a run of complete frames; ``malformed``
    says the bytes after it start with a length prefix that can never be valid (a varint
    longer than 10 bytes, or a length above ``max_frame_bytes``), rather than a frame
    still being written. A reader of a growing file feeds only ``buf[:end]`` to its
    decoder, and a malformed rest too, so that the decoder reports the error.
    """
    pos, end = 0, len(buf)
    while pos < end:
        try:
            header = read_varint(buf, pos, end)
        except ValueError:
            return pos, True
        if header is None:
            break
        length, start = header
        if length > max_frame_bytes:
            return pos, True
        if start + length > end:
            break
        pos = start + length
    return pos, False


class Framer:
    """Cuts delimited frames (or one bare frame) out of a growing byte buffer.

    ``framing`` is ``"auto"`` (detect), ``"delimited"`` or ``"single"`` (one bare frame).
    Frame offsets are absolute byte offsets of the frame's length prefix from the start
    of the stream (``base_offset`` lets a reader start in the middle of a file).
    """

    def __init__(
        self,
        *,
        source: str = "<stream>",
        max_frame_bytes: int = 16 * 1024 * 1024,
        framing: str = "auto",
        base_offset: int = 0,
        base_frame: int = 0,
    ) -> None:
        if framing not in ("auto", "delimited", "single"):
            raise ValueError(f"unknown framing {framing!r}")
        self.source = source
        self.max_frame_bytes = max_frame_bytes
        self.framing = framing
        self._buf = bytearray()
        self._pos = 0  # consumed bytes at the front of _buf
        self._base = base_offset  # absolute offset of _buf[0]
        self._closed = False
        self._frames = base_frame  # frames before base_offset (they only number frames in errors)

    @property
    def frames(self) -> int:
        """Frames handed out so far, counting the ``base_frame`` ones before ``base_offset``."""
        return self._frames

    @property
    def at_boundary(self) -> bool:
        """Whether the framer stands between delimited frames with nothing buffered, still open.

        Only then can another framer go on from :attr:`offset` (``base_offset``) with
        nothing lost: a resumable position.
        """
        return self.framing == "delimited" and not self._closed and self.buffered == 0

    @property
    def offset(self) -> int:
        """Absolute offset of the first byte not yet handed out as part of a frame."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        """Bytes held that do not yet form a complete frame."""
        return len(self._buf) - self._pos

    @property
    def closed(self) -> bool:
        return self._closed

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append input bytes."""
        if self._closed:
            raise ValueError("feed() after close()")
        if self._pos > 1 << 20 and self._pos > len(self._buf) // 2:
            # Drop consumed bytes now and then so the buffer does not grow without bound.
            del self._buf[: self._pos]
            self._base += self._pos
            self._pos = 0
        self._buf += data

    def close(self) -> None:
        """Declare the input complete: a trailing partial frame becomes an error."""
        self._closed = True

    def next_frame(self) -> tuple[int, bytes] | None:
        """The next whole frame as ``(offset, payload)``, or ``None`` if none is complete.

        At the end of closed input ``None`` means the stream is finished.
        """
        if self.framing == "auto":
            decided = self._detect()
            if decided is None:
                return None
            self.framing = decided
        if self.framing == "single":
            return self._single()
        return self._delimited()

    def _error(self, rule: str, offset: int | None = None) -> DecodeError:
        return DecodeError(
            rule, source=self.source, offset=self.offset if offset is None else offset, frame=self._frames
        )

    def _detect(self) -> str | None:
        # Delimited: [len][0x0A rows tag][row len][0x0A options tag] ...
        # Bare:      [0x0A rows tag][row len][0x0A options tag] ...
        pos, end = self._pos, len(self._buf)
        if pos == end:
            return "delimited" if self._closed else None
        if self._buf[pos] != 0x0A:
            return "delimited"  # a bare frame must start with the rows tag
        try:
            delimited_ok = self._starts_with_row(pos, skip_length=True)
            bare_ok = self._starts_with_row(pos, skip_length=False)
        except ValueError:
            raise self._error("malformed length prefix: varint longer than 10 bytes") from None
        if delimited_ok is None or bare_ok is None:
            if not self._closed:
                return None
            # Too short to tell: let the delimited reader report what is wrong.
            return "delimited"
        if bare_ok and not delimited_ok:
            return "single"
        return "delimited"

    def _starts_with_row(self, pos: int, *, skip_length: bool) -> bool | None:
        """Whether the bytes at ``pos`` look like a frame whose first row starts with field 1.

        ``None`` when the buffer is too short to tell.
        """
        buf, end = self._buf, len(self._buf)
        if skip_length:
            head = read_varint(buf, pos, end)
            if head is None:
                return None
            pos = head[1]
        if pos >= end:
            return None
        if buf[pos] != 0x0A:
            return False
        row_len = read_varint(buf, pos + 1, end)
        if row_len is None or row_len[1] >= end:
            return None
        return bool(buf[row_len[1]] == 0x0A)

    def _single(self) -> tuple[int, bytes] | None:
        size = len(self._buf) - self._pos
        # Checked before the input is complete: a bare frame has no length prefix, so its
        # size is only known at the end, and buffering past the limit would be unbounded.
        if size > self.max_frame_bytes:
            raise self._error(
                f"frame of more than {self.max_frame_bytes} bytes exceeds the limit (non-delimited frame)"
            )
        if not self._closed or size == 0:
            return None
        offset = self.offset
        payload = bytes(self._buf[self._pos :])
        self._pos = len(self._buf)
        self._frames += 1
        return offset, payload

    def _delimited(self) -> tuple[int, bytes] | None:
        buf, pos, end = self._buf, self._pos, len(self._buf)
        if pos == end:
            return None
        try:
            head = read_varint(buf, pos, end)
        except ValueError:
            raise self._error("malformed length prefix: varint longer than 10 bytes") from None
        if head is None:
            if self._closed:
                raise self._error("stream ends inside a frame's length prefix (truncated frame)")
            return None
        size, start = head
        if size > self.max_frame_bytes:
            raise self._error(f"frame length {size} exceeds the limit of {self.max_frame_bytes} bytes")
        if start + size > end:
            if self._closed:
                raise self._error(
                    f"stream ends inside a frame: {size} bytes announced, {end - start} present (truncated frame)"
                )
            return None
        offset = self.offset
        payload = bytes(buf[start : start + size])
        self._pos = start + size
        self._frames += 1
        return offset, payload
