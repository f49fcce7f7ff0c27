"""Patch logs in NATS JetStream streams: one patch per message (layer 6, beside ``logs``).

- :mod:`.url`: ``nats://HOST:PORT/STREAM`` addresses.
- :mod:`.nats_log`: :class:`NatsLog`, a synchronous facade over nats-py's asyncio client:
  create a stream, append a patch conditionally on its ``prev``, read from a sequence.
- :mod:`.pull`: the reader behind :meth:`NatsLog.fetch` (an ephemeral pull consumer
  asked ahead, its messages taken off one inbox subscription).
- :mod:`.payloads`: a log's patches as self-contained one-patch Jelly-Patch messages, and
  the check of a received message before it is applied.
- :mod:`.publish`: :func:`publish_logs` (resumable) and :class:`StreamWriter` (a recorder
  committing straight to a stream).
- :mod:`.writer`: :class:`~.writer.PatchWriter`, what the recorder's network writers (to a
  stream, a gRPC topic, a log served over HTTP) share.
- :mod:`.compact`: :func:`compact_logs`, the net effect of logs as one patch.
- :mod:`.errors`: the stream errors, and the table translating the client's exceptions.

nats-py is the optional ``nats`` extra: importing this package does not need it, opening a
:class:`NatsLog` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes

if TYPE_CHECKING:
    from patchsync.streams.compact import CompactReport, compact_logs
    from patchsync.streams.errors import (
        MessageTooLarge,
        StreamGap,
        StreamNotFound,
        StreamRefused,
        StreamUnavailable,
    )
    from patchsync.streams.nats_log import NatsLog, PublishResult, StreamHead, StreamLag, StreamState
    from patchsync.streams.payloads import LogPatch, PatchMessage, decode_message, log_patches, read_patches
    from patchsync.streams.publish import PublishReport, StreamSettings, StreamWriter, publish_logs
    from patchsync.streams.pull import StreamMessage
    from patchsync.streams.url import StreamURL, is_stream_url, parse_stream_url

# Submodules load on first use: ``patchsync status`` asks only whether a source is a stream
# address (:mod:`.url`), and the client, asyncio and the encoder cost ~80 ms to import.
_LAZY = {
    **dict.fromkeys(("CompactReport", "compact_logs"), "compact"),
    **dict.fromkeys(("MessageTooLarge", "StreamGap", "StreamNotFound", "StreamRefused", "StreamUnavailable"), "errors"),
    **dict.fromkeys(("NatsLog", "PublishResult", "StreamHead", "StreamLag", "StreamState"), "nats_log"),
    "StreamMessage": "pull",
    **dict.fromkeys(("LogPatch", "PatchMessage", "decode_message", "log_patches", "read_patches"), "payloads"),
    **dict.fromkeys(("PublishReport", "StreamSettings", "StreamWriter", "publish_logs"), "publish"),
    **dict.fromkeys(("StreamURL", "is_stream_url", "parse_stream_url"), "url"),
}


__getattr__ = lazy_attributes(__name__, {name: f"{__name__}.{module}" for name, module in _LAZY.items()})


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
