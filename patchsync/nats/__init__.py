"""Patch logs in NATS JetStream streams: one patch per message (layer 8, above ``remote``).

- :mod:`.url`: ``nats://HOST:PORT/STREAM`` addresses.
- :mod:`.nats_log`: :class:`NatsLog`, a :class:`~patchsync.remote.interface.RemoteLog` behind a
  synchronous facade over nats-py's asyncio client: create a stream, append a patch
  conditionally on its ``prev``, read from a sequence.
- :mod:`.pull`: the reader behind :meth:`NatsLog.fetch` (an ephemeral pull consumer
  asked ahead, its messages taken off one inbox subscription).
- :mod:`.headers`: a patch's message headers, and the refusal of one too large.
- :mod:`.publish`: :func:`publish_logs` (the remote logs' publish loop on a stream created
  when missing) and :class:`StreamWriter` (a recorder committing straight to a stream).
- :mod:`.errors`: the table translating the client's exceptions.

The names of the stream API (``decode_message``, ``log_patches``, ``compact_logs``, the
errors) are exported here too, from where they live now (:mod:`patchsync.logs`,
:mod:`patchsync.remote`). nats-py is the optional ``nats`` extra: importing this package does
not need it, opening a :class:`NatsLog` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes

if TYPE_CHECKING:
    from patchsync.logs.compact import CompactReport, compact_logs
    from patchsync.logs.payloads import LogPatch, PatchMessage, StreamMessage, decode_message, log_patches, read_patches
    from patchsync.nats.nats_log import NatsLog, PublishResult, StreamHead, StreamLag, StreamState
    from patchsync.nats.publish import PublishReport, StreamSettings, StreamWriter, publish_logs
    from patchsync.nats.url import StreamURL, is_stream_url, parse_stream_url
    from patchsync.remote.errors import (
        MessageTooLarge,
        StreamGap,
        StreamNotFound,
        StreamRefused,
        StreamUnavailable,
    )

# Submodules load on first use: ``patchsync status`` asks only whether a source is a stream
# address (:mod:`.url`), and the client, asyncio and the encoder cost ~80 ms to import.
_LAZY = {
    **dict.fromkeys(("CompactReport", "compact_logs"), "patchsync.logs.compact"),
    **dict.fromkeys(
        ("MessageTooLarge", "StreamGap", "StreamNotFound", "StreamRefused", "StreamUnavailable"),
        "patchsync.remote.errors",
    ),
    **dict.fromkeys(("NatsLog", "PublishResult", "StreamHead", "StreamLag", "StreamState"), f"{__name__}.nats_log"),
    **dict.fromkeys(
        ("LogPatch", "PatchMessage", "StreamMessage", "decode_message", "log_patches", "read_patches"),
        "patchsync.logs.payloads",
    ),
    **dict.fromkeys(("PublishReport", "StreamSettings", "StreamWriter", "publish_logs"), f"{__name__}.publish"),
    **dict.fromkeys(("StreamURL", "is_stream_url", "parse_stream_url"), f"{__name__}.url"),
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "CompactReport",
    "LogPatch",
    "MessageTooLarge",
    "NatsLog",
    "PatchMessage",
    "PublishReport",
    "PublishResult",
    "StreamGap",
    "StreamHead",
    "StreamLag",
    "StreamMessage",
    "StreamNotFound",
    "StreamRefused",
    "StreamSettings",
    "StreamState",
    "StreamURL",
    "StreamUnavailable",
    "StreamWriter",
    "compact_logs",
    "decode_message",
    "is_stream_url",
    "log_patches",
    "parse_stream_url",
    "publish_logs",
    "read_patches",
]
