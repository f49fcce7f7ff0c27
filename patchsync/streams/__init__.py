"""Patch logs in NATS JetStream streams: one patch per message (layer 6, beside ``logs``).

- :mod:`.url`: ``nats://HOST:PORT/STREAM`` addresses.
- :mod:`.nats_log`: :class:`NatsLog`, a synchronous facade over nats-py's asyncio client:
  create a stream, append a patch conditionally on its ``prev``, read from a sequence.
- :mod:`.payloads`: a log's patches as self-contained one-patch Jelly-Patch messages, and
  the check of a received message before it is applied.
- :mod:`.publish`: :func:`publish_logs` (resumable) and :class:`StreamWriter` (a recorder
  committing straight to a stream).
- :mod:`.compact`: :func:`compact_logs`, the net effect of logs as one patch.
- :mod:`.errors`: the stream errors, and the table translating the client's exceptions.

nats-py is the optional ``nats`` extra: importing this package does not need it, opening a
:class:`NatsLog` does.
"""

from __future__ import annotations

from patchsync.streams.compact import CompactReport, compact_logs
from patchsync.streams.errors import MessageTooLarge, StreamGap, StreamNotFound, StreamRefused, StreamUnavailable
from patchsync.streams.nats_log import NatsLog, PublishResult, StreamHead, StreamLag, StreamMessage, StreamState
from patchsync.streams.payloads import LogPatch, PatchMessage, decode_message, log_patches, read_patches
from patchsync.streams.publish import PublishReport, StreamSettings, StreamWriter, publish_logs
from patchsync.streams.url import StreamURL, is_stream_url, parse_stream_url

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
