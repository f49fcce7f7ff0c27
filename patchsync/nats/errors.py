"""The one table that translates the NATS client's exceptions into remote-log errors.

Every exception nats-py raises is translated here, at the boundary, into the remote-log
error tree drawn in :mod:`patchsync.remote.errors` (``StreamNotFound``, ``StreamRefused``,
``MessageTooLarge``, ``StreamGap``, ``StreamUnavailable``); callers never see a ``nats.*``
exception.
"""

from __future__ import annotations

from functools import cache

from patchsync.errors import ErrorRule, ErrorTable, PatchsyncError, permanent_failure
from patchsync.remote.errors import (
    MessageTooLarge,
    StreamGap,
    StreamNotFound,
    StreamRefused,
    StreamUnavailable,
)


def _unavailable(kind: type[BaseException], what: str) -> ErrorRule:
    return ErrorRule(what, (kind,), StreamUnavailable, say=lambda exc: f"{what} ({_describe(exc)})")


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "description", None) or str(exc) or type(exc).__name__
    return str(text).removeprefix("nats: ")


def _permanent(exc: BaseException) -> str:
    cause = permanent_failure(exc)
    return f"cannot connect: {_describe(cause or exc)}; retrying cannot fix this"


@cache
def _table() -> ErrorTable:
    """The client's exceptions, most specific first; built on first use. Only the error
    itself is matched (its chain is the client's internals), except for a failure no retry
    can fix, which the client reports beside its "no servers"."""
    # Imported here: nats-py is an optional extra, needed only once a stream is used.
    import nats.errors as ne
    import nats.js.errors as je

    return ErrorTable(
        (
            # Whatever the client calls it (an unresolvable host is "no servers available").
            ErrorRule(
                "no retry can fix it",
                (Exception,),
                StreamRefused,
                lambda e: permanent_failure(e) is not None,
                _permanent,
            ),
            _unavailable(je.ServiceUnavailableError, "the stream has no leader or JetStream is unavailable"),
            ErrorRule(
                "no such stream", (je.NotFoundError,), StreamNotFound, say=lambda exc: "no such stream on the server"
            ),
            ErrorRule(
                "refused",
                (je.APIError,),
                StreamRefused,
                say=lambda exc: f"the server refused the request: {_describe(exc)}",
            ),
            _unavailable(je.NoStreamResponseError, "no stream answered (missing stream, or no leader yet)"),
            ErrorRule(
                "not authorized",
                (ne.AuthorizationError,),
                StreamRefused,
                say=lambda exc: f"not authorized ({_describe(exc)})",
            ),
            ErrorRule("too large", (ne.MaxPayloadError,), MessageTooLarge, say=_describe),
            _unavailable(ne.NoServersError, "cannot connect to the server"),
            _unavailable(ne.TimeoutError, "the server did not answer in time"),
            _unavailable(ne.Error, "the connection failed"),
            _unavailable(TimeoutError, "the server did not answer in time"),
            _unavailable(ConnectionError, "cannot connect to the server"),
            _unavailable(OSError, "cannot connect to the server"),
        ),
        chain=False,
        default=None,
    )


def translate(exc: BaseException, where: str) -> PatchsyncError | None:
    """The patchsync error for a client exception (``None`` if it is not the client's)."""
    return _table().find(exc, where)


__all__ = ["MessageTooLarge", "StreamGap", "StreamNotFound", "StreamRefused", "StreamUnavailable", "translate"]
