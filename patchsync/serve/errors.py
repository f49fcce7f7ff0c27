"""The errors of the network services, and the one mapping of every error to a status.

Each front door is an adapter: it calls a topic operation and, when that raises, answers
with the status :func:`status_of` gives for the error's class, the same for every door
(docs/decisions/0001-serve-and-topics.md). gRPC codes are named by their ``StatusCode``
name so that this module needs no gRPC import; HTTP statuses are numbers. The rows live in
:mod:`patchsync.remote.statuses`, where the clients map a refusal back to an error.
"""

from __future__ import annotations

from patchsync.errors import (
    ApplyError,
    ChainError,
    CheckpointError,
    DecodeError,
    EncodeError,
    FormatError,
    PatchsyncError,
    TargetUnavailable,
    UsageError,
)
from patchsync.remote import statuses as wire
from patchsync.remote.statuses import Status


class ServeError(PatchsyncError):
    """A request a server refuses for a reason of its own (not the log's or the codec's)."""


class Unauthenticated(ServeError):
    """No token, or a token the server does not know."""


class Forbidden(ServeError):
    """The token may not do this (a read token publishing), or the topic is read-only."""


class NotFound(ServeError):
    """Nothing of that name here: a patch, a version, a bootstrap snapshot, a path."""


class NotAllowed(ServeError):
    """A method the path does not take (``GET /$/rpc``, ``DELETE /NAME``)."""


class UnknownTopic(NotFound):
    """No topic of that name is served."""


class ReadOnlyTopic(ServeError):
    """A write to a topic that takes none (a target topic is served read-only): one answer
    for every door and every kind of write."""


class OverLimit(ServeError):
    """A request over one of the server's limits (message size, concurrent streams)."""


class TooSlow(ServeError):
    """A client too slow for the server's timeouts: a request that did not arrive in time,
    or a subscriber that took nothing for too long (``resume_after``: the last version it
    was sent, after which it subscribes again)."""

    def __init__(self, message: str, *, resume_after: int | None = None) -> None:
        super().__init__(message)
        self.resume_after = resume_after


class TooBusy(OverLimit):
    """The server already serves as many concurrent streams as it may."""


class UnsupportedMedia(ServeError):
    """A body in a media type the server cannot read."""


class WrongKind(UsageError):
    """An operation the topic's kind does not offer (a snapshot of a log topic, say)."""


class ShuttingDown(ServeError):
    """The server is stopping: the request was refused whole, nothing of it done."""


#: From the most specific class to the root; the first class the error is an instance of wins.
#: The rows (gRPC code, HTTP status, metrics reason, retryable, the client's error) are
#: :mod:`patchsync.remote.statuses`', which the clients read back.
STATUSES: tuple[tuple[type[BaseException], Status], ...] = (
    (Unauthenticated, wire.UNAUTHENTICATED),
    (Forbidden, wire.FORBIDDEN),
    (ReadOnlyTopic, wire.READ_ONLY),
    (UnknownTopic, wire.UNKNOWN_TOPIC),
    (NotFound, wire.MISSING),
    (NotAllowed, wire.NOT_ALLOWED),
    (TooBusy, wire.BUSY),
    (OverLimit, wire.OVER_LIMIT),
    (TooSlow, wire.TOO_SLOW),
    (UnsupportedMedia, wire.UNSUPPORTED_MEDIA),
    (ShuttingDown, wire.STOPPING),
    (ChainError, wire.CHAIN),
    (CheckpointError, wire.REPLACED),
    (TargetUnavailable, wire.UNAVAILABLE),
    (DecodeError, wire.DECODE),
    (EncodeError, wire.DECODE),
    (FormatError, wire.DECODE),
    (WrongKind, wire.WRONG_KIND),
    (UsageError, wire.BAD_REQUEST),
    (ApplyError, wire.TARGET_REFUSED),
    (PatchsyncError, wire.SERVER),
)

#: The answer to an error that is not a :class:`PatchsyncError` (a bug): its text stays in
#: the server's log, the client gets this line.
INTERNAL = wire.INTERNAL
INTERNAL_MESSAGE = "internal error of the server (its log has the details)"


def status_of(exc: BaseException) -> Status:
    """The status both doors answer ``exc`` with (``INTERNAL``/500 for anything unexpected)."""
    for cls, status in STATUSES:
        if isinstance(exc, cls):
            return status
    return INTERNAL


def is_retryable(exc: BaseException) -> bool:
    """Whether a client should try the same request again later (the server is busy or
    stopping, what it serves is out of reach, it dropped a client too slow for it, or it
    failed on its own), rather than give up: the row's word, from the same table."""
    return status_of(exc).retryable


def reason_of(exc: BaseException) -> str:
    """The refusal's label for metrics (``chain``, ``decode``, ``auth``, ...), from the same table."""
    return status_of(exc).reason


def client_message(exc: BaseException) -> str:
    """What a client is told of ``exc``: a patchsync error's one line; never the text of
    anything else (a bug's message may hold paths, data or internals)."""
    if isinstance(exc, PatchsyncError):
        return " ".join(str(exc).split())
    return INTERNAL_MESSAGE


__all__ = [
    "INTERNAL",
    "INTERNAL_MESSAGE",
    "STATUSES",
    "Forbidden",
    "NotAllowed",
    "NotFound",
    "OverLimit",
    "ReadOnlyTopic",
    "ServeError",
    "ShuttingDown",
    "Status",
    "TooBusy",
    "TooSlow",
    "Unauthenticated",
    "UnknownTopic",
    "UnsupportedMedia",
    "WrongKind",
    "client_message",
    "is_retryable",
    "reason_of",
    "status_of",
]
