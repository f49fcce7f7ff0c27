"""The tail daemon's decoder snapshots: :mod:`patchsync.logs.snapshot`, shared with ``apply``."""

from patchsync.logs.snapshot import (
    ANCHOR_BYTES,
    MAGIC,
    MAX_SNAPSHOT_BYTES,
    VERSION,
    Snapshot,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
)

__all__ = [
    "ANCHOR_BYTES",
    "MAGIC",
    "MAX_SNAPSHOT_BYTES",
    "VERSION",
    "Snapshot",
    "SnapshotError",
    "decode_snapshot",
    "encode_snapshot",
]
