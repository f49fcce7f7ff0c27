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
    stats = FrameStats()
    framer = Framer(source=source)
    framer.feed(data)
    framer.close()
    last = {"names": 0, "prefixes": 0, "datatypes": 0}
    entries: Counter[str] = Counter()
    highest: Counter[str] = Counter()
    options: Any = None
    while (item := framer.next_frame()) is not None:
        offset, payload = item
        try:
            frame = patch_pb2.RdfPatchFrame.FromString(payload)
        except ProtobufDecodeError:
            raise DecodeError("frame is not a valid RdfPatchFrame", source=source, offset=offset) from None
        stats.frames += 1
        for row in frame.rows:
            kind = row.WhichOneof("row")
            if kind in _ENTRY_ROWS:
                table = _ENTRY_ROWS[kind]
                entry = getattr(row, kind)
                entry_id = entry.id or last[table] + 1
                last[table] = entry_id
                entries[table] += 1
                highest[table] = max(highest[table], entry_id)
                stats.rows[f"{kind} entry"] += 1
            elif kind == "options":
                options = options or row.options
                stats.rows["options"] += 1
            elif kind == "punctuation":
                stats.rows["punctuation"] += 1
    for table, size_field in _SIZE_FIELDS.items():
        stats.lookups[table] = {
            "entries": entries[table],
            "highest_id": highest[table],
            "max_size": getattr(options, size_field) if options is not None else 0,
        }
    return stats
