"""A log's identity: the fingerprint of its first frame (Jelly) or first line (text).

The applier (``patchsync apply``) and the tail daemon both store it with a source's
checkpoint and compare it on every start (docs/design.md §3), so both compute it here, from the
same first bytes, with the same notion of "first frame".
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from patchsync.codec.framing import Framer
from patchsync.errors import CheckpointError, DecodeError
from patchsync.logs.patch_logs import CHUNK_SIZE

#: Bytes read up front to fingerprint a log (its first frame or line, cut at this size).
FINGERPRINT_BYTES = CHUNK_SIZE


@dataclass(frozen=True, slots=True)
class LogStart:
    """What the first bytes of a Jelly log say about it (its start; a log's *head* is its last patch)."""

    #: ``"delimited"``, ``"single"`` (one bare frame) or ``"auto"`` (too short to tell).
    framing: str
    #: Offset just past the first whole frame; ``None`` if the bytes hold none (yet) or
    #: start malformed. A bare frame is never whole here: its end is the end of the log.
    first_frame_end: int | None


def jelly_start(start: bytes) -> LogStart:
    """Look at the start of a Jelly log: its framing and where its first frame ends."""
    framer = Framer(max_frame_bytes=1 << 62)
    framer.feed(start)
    try:
        frame = framer.next_frame()
    except DecodeError:
        frame = None
    return LogStart(framer.framing, framer.offset if frame is not None else None)


def fingerprint(start: bytes, fmt: str) -> str:
    """A log's identity (docs/design.md §3): the hash of its first frame (Jelly) or first line (text).

    ``start`` is the start of the log (up to ``FINGERPRINT_BYTES``). Appending to a log
    keeps its fingerprint; replacing it with another log changes it.
    """
    first = start
    if fmt == "jellyp":
        end = jelly_start(start).first_frame_end
        if end is not None:
            first = start[:end]
    else:
        end = start.find(b"\n")
        if end >= 0:
            first = start[: end + 1]
    return hashlib.sha256(first).hexdigest()


# -- a log that is no longer the one being read ---------------------------------------
# A reader that follows a growing log (the tail daemon, Spark's streaming source, an
# incremental replay) stops with one of these lines when the file stops being the log it
# read: a writer only appends, so anything else means another log, not more of this one.


def log_removed(name: str) -> CheckpointError:
    """The log was removed while being read."""
    return CheckpointError(f"{name}: the log was removed while being tailed")


def log_replaced(name: str) -> CheckpointError:
    """The log's first frame (its identity, :func:`fingerprint`) changed."""
    return CheckpointError(f"{name}, byte 0: the log's first frame changed: it was replaced")


def log_shrank(name: str, size: int, position: int) -> CheckpointError:
    """The log is shorter (``size`` bytes) than the ``position`` already decoded from it."""
    return CheckpointError(
        f"{name}, byte {size}: the log shrank below what was already decoded (byte {position}); "
        "it was truncated or rewritten"
    )


__all__ = ["FINGERPRINT_BYTES", "LogStart", "fingerprint", "jelly_start", "log_removed", "log_replaced", "log_shrank"]
