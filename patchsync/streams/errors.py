"""Errors of the stream layer, and the one table that translates the NATS client's.

Every exception nats-py raises is translated here, at the boundary, into the patchsync
tree; callers never see a ``nats.*`` exception::

    PatchsyncError
    ├── UsageError
    │   ├── StreamNotFound     the named stream does not exist (and was not to be created)
    │   ├── StreamRefused      refused for good (bad config, permissions, a host name that does not resolve)
    │   └── MessageTooLarge    a patch does not fit in one message of this server
    └── ApplyError
        ├── ChainError         (patchsync.errors) a patch does not follow the stream's head
        ├── CheckpointError
        │   └── StreamGap      messages after a replica's position are gone from the stream
        └── TargetUnavailable
            └── StreamUnavailable  server unreachable, no leader, timed out (retrying may help)

``StreamUnavailable`` derives from ``TargetUnavailable`` so the tail daemon's existing
reconnect-with-backoff path treats a lost stream like a lost target.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from patchsync.errors import CheckpointError, PatchsyncError, TargetUnavailable, UsageError, permanent_failure


class StreamUnavailable(TargetUnavailable):
    """The stream's server is out of reach for now (connection lost, no leader, timeout)."""


class StreamNotFound(UsageError):
    """The named stream does not exist on the server."""


class StreamRefused(UsageError):
    """The server refused a request in a way retrying cannot fix."""


class MessageTooLarge(UsageError):
    """A patch is larger than the largest message the server (or the stream) accepts."""


class StreamGap(CheckpointError):
    """The messages following a replica's position were removed from the stream."""


#: How a translated error is built from the stream's name and the client's exception.
Factory = Callable[[str, BaseException], PatchsyncError]


def _unavailable(what: str) -> Factory:
    return lambda where, exc: StreamUnavailable(f"{where}: {what} ({_describe(exc)})")


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "description", None) or str(exc) or type(exc).__name__
    return str(text).removeprefix("nats: ")


@cache
def _rules() -> tuple[tuple[type[BaseException], Factory], ...]:
    """(client exception type, factory), most specific first; built on first use."""
    # Imported here: nats-py is an optional extra, needed only once a stream is used.
    import nats.errors as ne
    import nats.js.errors as je

    return (
        (je.ServiceUnavailableError, _unavailable("the stream has no leader or JetStream is unavailable")),
        (je.NotFoundError, lambda where, exc: StreamNotFound(f"{where}: no such stream on the server")),
        (je.APIError, lambda where, exc: StreamRefused(f"{where}: the server refused the request: {_describe(exc)}")),
        (je.NoStreamResponseError, _unavailable("no stream answered (missing stream, or no leader yet)")),
        (ne.AuthorizationError, lambda where, exc: StreamRefused(f"{where}: not authorized ({_describe(exc)})")),
        (ne.MaxPayloadError, lambda where, exc: MessageTooLarge(f"{where}: {_describe(exc)}")),
        (ne.NoServersError, _unavailable("cannot connect to the server")),
        (ne.TimeoutError, _unavailable("the server did not answer in time")),
        (ne.Error, _unavailable("the connection failed")),
        (TimeoutError, _unavailable("the server did not answer in time")),
        (ConnectionError, _unavailable("cannot connect to the server")),
        (OSError, _unavailable("cannot connect to the server")),
    )


def translate(exc: BaseException, where: str) -> PatchsyncError | None:
    """The patchsync error for a client exception (``None`` if it is not the client's)."""
    if isinstance(exc, PatchsyncError):
        return exc
    cause = permanent_failure(exc)
    if cause is not None:
        # Whatever the client calls it (an unresolvable host is "no servers available").
        return StreamRefused(f"{where}: cannot connect: {_describe(cause)}; retrying cannot fix this")
    for kind, factory in _rules():
        if isinstance(exc, kind):
            return factory(where, exc)
    return None
