"""The frame being built by an encoder, and the bytes of the frames already finished.

Jelly-Patch and Jelly-RDF frames have the same shape on the wire (``rows`` is field 1 of
both ``RdfPatchFrame`` and ``RdfStreamFrame``), so both encoders collect their rows here.
Each row is framed as it is added, so finishing a frame is one join; a finished frame is
written delimited (length varint first) unless the stream is the bare single-frame variant.
"""

from __future__ import annotations

from patchsync.codec import wire
from patchsync.errors import EncodeError


class FrameBuffer:
    """Rows of the open frame, plus the finished frames' bytes waiting for :meth:`take`."""

    __slots__ = ("delimited", "frames", "out", "rows", "rows_written", "size")

    def __init__(self, *, delimited: bool = True) -> None:
        self.delimited = delimited
        self.rows: list[bytes] = []  # each already framed as a ``rows`` field
        self.size = 0  # bytes of the open frame
        self.out = bytearray()
        self.frames = 0  # frames finished
        self.rows_written = 0

    def reset(self) -> None:
        """Drop everything: the buffer is as new (the encoder's term state emits into this
        same object, so a restarted encoder keeps it)."""
        self.rows.clear()
        self.size = self.frames = self.rows_written = 0
        self.out.clear()

    def add(self, row: bytes) -> None:
        """Append a row (the serialized body of an ``RdfPatchRow`` / ``RdfStreamRow``)."""
        framed = wire.ld(wire.FRAME_ROW, row)
        self.rows.append(framed)
        self.size += len(framed)
        self.rows_written += 1

    def flush(self, *, force: bool = False) -> None:
        """Finish the open frame; an empty one only when ``force`` (a FRAME stream's empty patch)."""
        if not self.rows and not force:
            return
        if not self.delimited and self.frames:
            raise EncodeError("a non-delimited stream holds exactly one frame")
        frame = b"".join(self.rows)
        self.rows.clear()
        self.size = 0
        if self.delimited:
            self.out += wire.varint(len(frame))
        self.out += frame
        self.frames += 1

    def take(self) -> bytes:
        """The bytes of all frames finished since the last call."""
        out = bytes(self.out)
        self.out.clear()
        return out
