"""Errors of remote logs (a NATS stream, a served topic or log), whatever carries them::

    PatchsyncError
    ├── UsageError
    │   ├── StreamNotFound     the named log does not exist (and was not to be created)
    │   ├── StreamRefused      refused for good (bad config, permissions, a host name that does not resolve)
    │   └── MessageTooLarge    a patch does not fit in one message of this server
    └── ApplyError
        ├── ChainError         (patchsync.errors) a patch does not follow the log's head
        ├── CheckpointError
        │   └── StreamGap      messages after a replica's position are gone from the log
        └── TargetUnavailable
            └── StreamUnavailable  server unreachable, no leader, timed out (retrying may help)

``StreamUnavailable`` derives from ``TargetUnavailable`` so the tail daemon's existing
reconnect-with-backoff path treats a lost log like a lost target. Each client translates its
own library's exceptions into these at its boundary (:mod:`patchsync.nats.errors` for NATS,
:mod:`.refusals` and the clients for gRPC and HTTP).
"""

from __future__ import annotations

from patchsync.errors import CheckpointError, TargetUnavailable, UsageError


class StreamUnavailable(TargetUnavailable):
    """The log's server is out of reach for now (connection lost, no leader, timeout)."""


class StreamNotFound(UsageError):
    """The named log does not exist on the server."""


class StreamRefused(UsageError):
    """The server refused a request in a way retrying cannot fix."""


class MessageTooLarge(UsageError):
    """A patch is larger than the largest message the server (or the log) accepts."""


class StreamGap(CheckpointError):
    """The messages following a replica's position were removed from the log."""


__all__ = ["MessageTooLarge", "StreamGap", "StreamNotFound", "StreamRefused", "StreamUnavailable"]
