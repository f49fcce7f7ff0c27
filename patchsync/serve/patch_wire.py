"""``SubscribePatch`` responses as bytes (no I/O): ``PatchMessage``, written directly.

The gRPC door sends these bytes as they are (its ``SubscribePatch`` handler has no response
serializer of its own), so a response exists once, as bytes, while it waits to be sent: not
also as the patches it was made from and as a protobuf message. A subscriber that stops
reading then holds about one response's worth of the server's memory beside what gRPC
buffers, until it is dropped. The bytes are those ``PatchMessage.SerializeToString`` gives
(``proto/patchsync/v1/patch_service.proto``; the protobuf encoding,
https://protobuf.dev/programming-guides/encoding/): fields in number order, proto3 defaults
left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from patchsync.codec.framing import encode_varint
from patchsync.serve.topics import Entry

#: Field keys of ``PatchMessage``: (number << 3) | wire type (0 varint, 2 length-delimited).
_VERSION = b"\x08"
_PATCH_ID = b"\x12"
_PATCH = b"\x1a"
_BATCH = b"\x22"


def _fields(entry: Entry) -> list[bytes]:
    parts: list[bytes] = []
    if entry.version:
        parts += (_VERSION, encode_varint(entry.version))
    patch_id = entry.patch_id.encode("utf-8")
    if patch_id:
        parts += (_PATCH_ID, encode_varint(len(patch_id)), patch_id)
    if entry.payload:
        parts += (_PATCH, encode_varint(len(entry.payload)), entry.payload)
    return parts


def patch_message(entry: Entry) -> bytes:
    """One patch as a ``PatchMessage`` (its version, id and one-patch stream)."""
    return b"".join(_fields(entry))


def batch_message(entries: Sequence[Entry]) -> bytes:
    """Patches as one ``PatchMessage`` whose ``batch`` holds them, in order."""
    parts: list[bytes] = []
    for entry in entries:
        inner = _fields(entry)
        parts += (_BATCH, encode_varint(sum(map(len, inner))), *inner)
    return b"".join(parts)


__all__ = ["batch_message", "patch_message"]
