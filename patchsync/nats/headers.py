"""The headers of a patch's message in a NATS stream, and the size they add to it.

``Nats-Msg-Id`` names the patch (the server deduplicates by it); ``Nats-Expected-Last-Msg-Id``
(or ``Nats-Expected-Last-Sequence``) makes the append conditional on the stream's head (see
:mod:`patchsync.nats.nats_log`). A patch travels in exactly one message, never split, so a
message larger than the stream takes is refused before it is sent.
"""

from __future__ import annotations

from patchsync.logs.payloads import MSG_ID, PatchMessage
from patchsync.remote.errors import MessageTooLarge

EXPECTED_LAST_ID = "Nats-Expected-Last-Msg-Id"
EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
EXPECTED_STREAM = "Nats-Expected-Stream"


def message_size(payload: bytes, patch_id: str, prev: str | None, stream: str) -> int:
    """Bytes of the published message counted against ``max_payload`` (headers included)."""
    headers = {MSG_ID: patch_id, EXPECTED_STREAM: stream}
    headers[EXPECTED_LAST_ID if prev is not None else EXPECTED_LAST_SEQ] = prev or "0"
    # NATS/1.0 CRLF, then "Key: value" CRLF per header, then an empty line. The fallback
    # to a sequence (publish_patch) is never longer than an id-based expectation plus 20.
    block = len("NATS/1.0\r\n") + sum(len(k) + 2 + len(v) + 2 for k, v in headers.items()) + 2
    return len(payload) + block + 20


def check_size(message: PatchMessage, stream: str, where: str, limit: int) -> None:
    """Refuse a patch whose message exceeds ``limit``, what the stream ``stream`` (at
    ``where``) takes (:class:`MessageTooLarge`)."""
    size = message_size(message.payload, message.patch_id, message.prev, stream)
    if size > limit:
        raise MessageTooLarge(
            f"{message.source}: patch {message.number} ({message.patch_id}) needs a {size}-byte message, "
            f"{where} takes at most {limit} bytes; a patch is never split: raise the server's "
            "max_payload or write smaller patches"
        )


__all__ = ["EXPECTED_LAST_ID", "EXPECTED_LAST_SEQ", "EXPECTED_STREAM", "MSG_ID", "check_size", "message_size"]
