"""The rules of reading a remote log, written once over :class:`~.interface.RemoteLog`.

- :func:`resume_position`: where a replica goes on from its checkpoint. The checkpoint's
  position (``offset``) is the last message the applier reached; that message was applied
  whole when its patch id is the checkpoint's ``last_id`` (the last patch passed), and then
  the replica goes on after it. A message the log no longer holds (a stream's retention, a
  served log shorter than the checkpoint) counts as applied: the applier's chain check
  refuses whatever does not follow. Otherwise the replica reads that message again and the
  applier passes over the units of it already applied (a patch of several transactions cut
  between two of them).
- :func:`lag`: how far a replica that applied everything up to a position is behind:
  messages (the head's position minus it) and seconds (the age of the first message not yet
  applied, when the server keeps times; 0 otherwise).
"""

from __future__ import annotations

import time
from typing import Protocol

from patchsync.remote.interface import LogLag, RemoteLog


class StoredCheckpoint(Protocol):
    """A replica's checkpoint as these rules read it (``patchsync.apply.Checkpoint``)."""

    @property
    def offset(self) -> int:
        """The position of the last message the applier reached."""

    @property
    def last_id(self) -> str | None:
        """The id of the last patch it passed whole."""


def resume_position(log: RemoteLog, stored: StoredCheckpoint | None) -> int:
    """The position a replica at ``stored`` reads next (1 without a checkpoint)."""
    if stored is None or stored.offset < 1:
        return 1
    held = log.patch_id_at(stored.offset)
    if held is None or (stored.last_id is not None and held == stored.last_id):
        return stored.offset + 1
    return stored.offset


def lag(log: RemoteLog, applied: int) -> LogLag:
    """How far a replica that applied every message up to ``applied`` is behind ``log``."""
    head = log.head()
    behind = max(0, head.seq - applied)
    if not behind or head.published is None:
        return LogLag(behind, 0.0)
    published = log.published_at(applied + 1)
    age = time.time() - published if published is not None else 0.0
    return LogLag(behind, max(0.0, age))


__all__ = ["StoredCheckpoint", "lag", "resume_position"]
