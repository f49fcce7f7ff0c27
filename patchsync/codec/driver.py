"""The pull side shared by every sans-I/O decoder (Jelly-Patch, Jelly-RDF, RDF Patch text).

A decoder subclass only knows how to turn the next chunk of input it holds (a frame, a
line) into events: :meth:`PullDecoder._advance`. This class owns the rest of the contract,
h11 style:

* :meth:`next_event` answers an event, ``NEED_DATA`` (feed more bytes) or ``END`` (the
  closed input is exhausted);
* an error found while decoding a chunk is raised only after the events decoded before it
  have been handed out, so a consumer can act on the complete units preceding a bad row
  (docs/design.md §2);
* after an error the decoder stays failed and raises the same error again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Final, Generic, TypeVar

from google.protobuf.message import DecodeError as ProtobufDecodeError

from patchsync.codec.framing import Framer
from patchsync.errors import DecodeError

E = TypeVar("E")


class Signal:
    """A sentinel answered by ``next_event`` instead of an event."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: ``next_event`` holds no complete frame or line: feed more bytes.
NEED_DATA: Final = Signal("NEED_DATA")
#: ``next_event`` has handed out everything of a closed stream.
END: Final = Signal("END")

#: Rows of a frame decoded per step. A frame is parsed whole, but its events are queued a
#: batch at a time as the consumer takes them, so a 16 MiB frame of millions of tiny rows
#: (repeated-term statements are 4 bytes) never holds millions of events at once.
ROW_BATCH = 4096


class PullDecoder(Generic[E]):
    """Queue, deferred errors and iteration for a decoder; subclasses implement ``_advance``."""

    def __init__(self) -> None:
        self._queue: deque[E] = deque()
        self._pending_error: DecodeError | None = None
        self._failed: DecodeError | None = None
        self._finished = False

    def _advance(self) -> bool:
        """Decode the next chunk into the queue.

        Return False when more input is needed; at the end of closed input, do the
        end-of-stream checks, set ``_finished`` and return True. Raise ``DecodeError`` for an
        error that is not preceded by events, or store it in ``_pending_error``.
        """
        raise NotImplementedError

    def next_event(self) -> E | Signal:
        """The next event, ``NEED_DATA`` or ``END``; raises ``DecodeError`` on bad input."""
        while True:
            if self._queue:
                return self._queue.popleft()
            if self._failed is not None:
                raise self._failed
            if self._pending_error is not None:
                self._failed, self._pending_error = self._pending_error, None
                raise self._failed
            if self._finished:
                return END
            try:
                progressed = self._advance()
            except DecodeError as exc:
                self._failed = exc
                raise
            if not progressed:
                return NEED_DATA

    def __iter__(self) -> Iterator[E]:
        """Every event available now; stops at ``NEED_DATA`` or ``END``."""
        queue = self._queue
        while True:
            # Drain decoded events directly; next_event() only to decode more.
            while queue:
                yield queue.popleft()
            event = self.next_event()
            if isinstance(event, Signal):
                return
            yield event


class FramedDecoder(PullDecoder[E]):
    """A :class:`PullDecoder` fed through a :class:`~patchsync.codec.framing.Framer`.

    Subclasses set ``_frame_type`` (the frame message), ``self._framer`` and ``self.frames``
    (frames finished), and implement ``_error(rule, offset, row)``;
    ``_decode_rows(offset, rows, start)``, which
    decodes up to ``ROW_BATCH`` rows from ``start`` and then either sets ``_row_next`` or
    calls :meth:`_close_frame`; and ``_finish()`` (end-of-stream checks once the closed
    input has no frame left).
    """

    _framer: Framer
    frames: int
    #: The protobuf frame message this decoder reads (set by each subclass).
    _frame_type: Any
    # The rows of the frame being decoded (None between frames) and the next row index.
    # A decoder holding rows is inside a frame: not resumable from a frame boundary
    # (between_frames is False), so the tail daemon's snapshots refuse it.
    _rows: Any = None
    _row_next = 0
    _row_offset = 0
    #: The compiled core (``codec/_native.pyx``) that scans this decoder's frames, or None for
    #: the pure-Python path; ``_native_rdf`` picks its Jelly-RDF schema (subclasses set both).
    _native: Any = None
    _native_rdf = False

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Give the decoder more bytes of the stream."""
        self._framer.feed(data)

    def close(self) -> None:
        """Say that the stream is complete; a trailing partial frame is then an error."""
        self._framer.close()

    @property
    def offset(self) -> int:
        """Byte offset just past the last frame taken from the input."""
        return self._framer.offset

    @property
    def between_frames(self) -> bool:
        """Whether the decoder stands between frames with nothing held back.

        True when every byte fed forms whole frames that were decoded, every event was
        taken, no error is pending and the input is not closed: the decoder's state could
        then be carried over to another decoder starting at :attr:`offset`.
        """
        return (
            not self._queue
            and self._rows is None
            and self._failed is None
            and self._pending_error is None
            and self._framer.at_boundary
        )

    def _advance(self) -> bool:
        if self._rows is not None:
            self._decode_rows(self._row_offset, self._rows, self._row_next)
            return True
        frame = self._framer.next_frame()
        if frame is None:
            if not self._framer.closed:
                return False
            self._finish()
        else:
            self._decode_frame(*frame)
        return True

    def _decode_frame(self, offset: int, payload: bytes) -> None:
        """Parse a frame of ``_frame_type`` and start on its rows, or record why it is not one."""
        native = self._native
        if native is not None:
            # The compiled core takes every plainly encoded frame (codec/backend.py); the
            # rest, and everything when it is not built, goes through the protobuf messages.
            frame = native.scan(payload, self._native_rdf)
            if frame is not None:
                self._open_frame(offset, frame)
                return
        try:
            frame = self._frame_type.FromString(payload)
        except ProtobufDecodeError:
            self._pending_error = self._error(
                f"frame is not a valid {self._frame_type.__name__} (malformed protobuf, invalid UTF-8 in a "
                "string, or messages nested past protobuf's depth limit of 100)",
                offset,
                None,
            )
            self.frames += 1
            return
        self._open_frame(offset, frame.rows)

    def _error(self, rule: str, offset: int, row: int | None) -> DecodeError:
        raise NotImplementedError

    def _open_frame(self, offset: int, rows: Any) -> None:
        """Start decoding the rows of the frame at ``offset`` (the first batch at once)."""
        self._rows, self._row_next, self._row_offset = rows, 0, offset
        self._decode_rows(offset, rows, 0)

    def _decode_rows(self, offset: int, rows: Any, start: int) -> None:
        raise NotImplementedError

    def _close_frame(self) -> None:
        """The open frame is done (decoded or failed): drop its rows, count it."""
        self._rows = None
        self.frames += 1

    def _finish(self) -> None:
        self._finished = True
