"""The change feed's framing, as bytes (no I/O): the JSON answer and the binary records.

``GET /{ref}/changes`` answers one batch of patches (:class:`~patchsync.serve.topics.Batch`:
at most ``limit`` of them and :data:`FEED_BYTES` of payload), written out as it is framed:

- JSON: ``{"changes": [{"version", "id", "patch"}, ...], "last_version", "head", "head_id"}``,
  each ``patch`` as RDF Patch text; the text is at most :data:`FEED_BYTES` too (a patch
  whose text alone is larger goes alone), and ``last_version`` is the last version written;
- binary (``Accept: application/x-patchsync-changes``): each patch's one-patch Jelly-Patch
  stream behind its length (a varint); the headers name the first version, the last one and
  the head, so the batch is known before its first byte is sent.

Either way a reader asks again after the last version it got; an answer never holds more
than a few megabytes, whatever ``limit`` asked for.
"""

from __future__ import annotations

import json

from patchsync.codec.framing import encode_varint
from patchsync.serve.topics import BATCH_BYTES

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = "application/x-patchsync-changes"
#: Most bytes of patches one answer carries (a single larger patch goes alone).
FEED_BYTES = BATCH_BYTES


def record_head(payload: bytes) -> bytes:
    """What comes before a payload in a binary feed record: its length."""
    return encode_varint(len(payload))


def record(payload: bytes) -> bytes:
    """One binary feed record: the payload's length, then the payload."""
    return record_head(payload) + payload


def binary_headers(after: int, last: int, head: int) -> dict[str, str]:
    """The headers of a binary answer holding versions ``after + 1`` to ``last``."""
    return {
        "Content-Type": FEED_BINARY,
        "Patchsync-First-Version": str(after + 1),
        "Patchsync-Last-Version": str(last),
        "Patchsync-Head": str(head),
    }


def json_start() -> bytes:
    """The start of a JSON answer."""
    return b'{"changes": ['


def json_change(version: int, patch_id: str, text: str, *, first: bool) -> bytes:
    """One change of a JSON answer (``first``: no comma before it)."""
    body = json.dumps({"version": version, "id": patch_id, "patch": text}).encode()
    return body if first else b", " + body


def json_end(last_version: int, head: int, head_id: str | None) -> bytes:
    """The end of a JSON answer: the last version in it and the head when it was made."""
    tail = json.dumps({"last_version": last_version, "head": head, "head_id": head_id})
    return b"], " + tail[1:].encode()


def fits(written: int, size: int, first: bool) -> bool:
    """Whether a change of ``size`` bytes may follow ``written`` bytes of changes in one
    answer: always the first, then while the answer stays within :data:`FEED_BYTES`."""
    return first or written + size <= FEED_BYTES


__all__ = [
    "FEED_BINARY",
    "FEED_BYTES",
    "binary_headers",
    "fits",
    "json_change",
    "json_end",
    "json_start",
    "record",
    "record_head",
]
