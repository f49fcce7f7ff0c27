"""Frame-level statistics of a Jelly-Patch stream, for ``patchsync inspect``.

The decoder hides lookup entries and punctuation (they are encoding, not content); this
pass counts them straight from the frames.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError as ProtobufDecodeError

from patchsync._proto import patch_pb2
from patchsync.codec.framing import Framer
from patchsync.errors import DecodeError

_ENTRY_ROWS = {"name": "names", "prefix": "prefixes", "datatype": "datatypes"}
_SIZE_FIELDS = {
    "names": "max_name_table_size",
    "prefixes": "max_prefix_table_size",
    "datatypes": "max_datatype_table_size",
}


@dataclass
class FrameStats:
    """Frame count, rows of encoding-only kinds, and lookup usage."""

    frames: int = 0
    rows: Counter[str] = field(default_factory=Counter)
    lookups: dict[str, dict[str, int]] = field(default_factory=dict)


def frame_stats(data: bytes, source: str) -> FrameStats:
    """Count frames, option/entry/punctuation rows and lookup ids used in ``data``."""
    counter = FrameCounter(source)
    counter.feed(data)
    return counter.finish()


class FrameCounter:
    """:func:`frame_stats` fed a piece at a time, so a log of any size is counted in the
    memory of its largest frame (``inspect`` reads the file once, for this and the decoder).

    An invalid frame stops the count; its error is raised by :meth:`finish`, so that a
    decoder fed the same bytes can report its own, more precise error first.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.stats = FrameStats()
        self._framer = Framer(source=source)
        self._last = {"names": 0, "prefixes": 0, "datatypes": 0}
        self._entries: Counter[str] = Counter()
        self._highest: Counter[str] = Counter()
        self._options: Any = None
        self._error: DecodeError | None = None

    def feed(self, data: bytes) -> None:
        """Count the frames that ``data`` completes."""
        if self._error is None:
            self._framer.feed(data)
            self._count()

    def finish(self) -> FrameStats:
        """The statistics of the whole stream; raises :class:`DecodeError` for an invalid one."""
        if self._error is None:
            self._framer.close()
            self._count()
        if self._error is not None:
            raise self._error
        for table, size_field in _SIZE_FIELDS.items():
            self.stats.lookups[table] = {
                "entries": self._entries[table],
                "highest_id": self._highest[table],
                "max_size": getattr(self._options, size_field) if self._options is not None else 0,
            }
        return self.stats

    def _count(self) -> None:
        try:
            while (item := self._framer.next_frame()) is not None:
                self._frame(*item)
        except DecodeError as exc:
            self._error = exc

    def _frame(self, offset: int, payload: bytes) -> None:
        stats, last = self.stats, self._last
        try:
            frame = patch_pb2.RdfPatchFrame.FromString(payload)
        except ProtobufDecodeError:
            raise DecodeError("frame is not a valid RdfPatchFrame", source=self.source, offset=offset) from None
        stats.frames += 1
        for row in frame.rows:
            kind = row.WhichOneof("row")
            if kind in _ENTRY_ROWS:
                table = _ENTRY_ROWS[kind]
                entry = getattr(row, kind)
                entry_id = entry.id or last[table] + 1
                last[table] = entry_id
                self._entries[table] += 1
                self._highest[table] = max(self._highest[table], entry_id)
                stats.rows[f"{kind} entry"] += 1
            elif kind == "options":
                self._options = self._options or row.options
                stats.rows["options"] += 1
            elif kind == "punctuation":
                stats.rows["punctuation"] += 1
