"""The errors of the network services, and the one mapping of every error to a status.

Each front door is an adapter: it calls a topic operation and, when that raises, answers
with the status :func:`status_of` gives for the error's class, the same for every door
(docs/decisions/0001-serve-and-topics.md). gRPC codes are named by their ``StatusCode``
name so that this module needs no gRPC import; HTTP statuses are numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

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


class ServeError(PatchsyncError):
    """A request a server refuses for a reason of its own (not the log's or the codec's)."""


class Unauthenticated(ServeError):
    """No token, or a token the server does not know."""


class Forbidden(ServeError):
    """The token may not do this (a read token publishing), or the topic is read-only."""


class UnknownTopic(ServeError):
    """No topic of that name is served."""


class OverLimit(ServeError):
    """A request over one of the server's limits (message size, concurrent streams)."""


class TooBusy(OverLimit):
    """The server already serves as many concurrent streams as it may."""


class UnsupportedMedia(ServeError):
    """A body in a media type the server cannot read."""


class WrongKind(UsageError):
    """An operation the topic's kind does not offer (a snapshot of a log topic, say)."""


class ShuttingDown(ServeError):
    """The server is stopping: the request was refused whole, nothing of it done."""


@dataclass(frozen=True, slots=True)
class Status:
    """How a door answers one class of error."""

    #: A ``grpc.StatusCode`` member name.
    grpc: str
    #: An HTTP status code.
    http: int


#: From the most specific class to the root; the first class the error is an instance of wins.
STATUSES: tuple[tuple[type[BaseException], Status], ...] = (
    (Unauthenticated, Status("UNAUTHENTICATED", 401)),
    (Forbidden, Status("PERMISSION_DENIED", 403)),
    (UnknownTopic, Status("NOT_FOUND", 404)),
    (TooBusy, Status("RESOURCE_EXHAUSTED", 503)),
    (OverLimit, Status("RESOURCE_EXHAUSTED", 413)),
    (UnsupportedMedia, Status("INVALID_ARGUMENT", 415)),
    (ShuttingDown, Status("UNAVAILABLE", 503)),
    # RDF Delta answers a version conflict with 400 and a JSON body (docs/decisions/0002).
    (ChainError, Status("FAILED_PRECONDITION", 400)),
    (CheckpointError, Status("OUT_OF_RANGE", 410)),
    (TargetUnavailable, Status("UNAVAILABLE", 503)),
    (DecodeError, Status("INVALID_ARGUMENT", 400)),
    (EncodeError, Status("INVALID_ARGUMENT", 400)),
    (FormatError, Status("INVALID_ARGUMENT", 400)),
    (UsageError, Status("INVALID_ARGUMENT", 400)),
    (ApplyError, Status("FAILED_PRECONDITION", 409)),
    (PatchsyncError, Status("INTERNAL", 500)),
)

INTERNAL = Status("INTERNAL", 500)


def status_of(exc: BaseException) -> Status:
    """The status both doors answer ``exc`` with (``INTERNAL``/500 for anything unexpected)."""
    for cls, status in STATUSES:
        if isinstance(exc, cls):
            return status
    return INTERNAL


def is_retryable(exc: BaseException) -> bool:
    """Whether a client should try the same request again later (the server is busy or
    stopping, or what it serves is out of reach), rather than give up."""
    return isinstance(exc, TooBusy | ShuttingDown | TargetUnavailable)


def reason_of(exc: BaseException) -> str:
    """A short label of the refusal for metrics (``chain``, ``decode``, ``auth``, ...)."""
    if isinstance(exc, Unauthenticated | Forbidden):
        return "auth"
    if isinstance(exc, ChainError):
        return "chain"
    if isinstance(exc, DecodeError | EncodeError):
        return "decode"
    if isinstance(exc, OverLimit):
        return "limit"
    if isinstance(exc, UnknownTopic):
        return "topic"
    if isinstance(exc, TargetUnavailable):
        return "unavailable"
    return "other"


__all__ = [
    "STATUSES",
    "Forbidden",
    "OverLimit",
    "ServeError",
    "ShuttingDown",
    "Status",
    "TooBusy",
    "Unauthenticated",
    "UnknownTopic",
    "UnsupportedMedia",
    "WrongKind",
    "is_retryable",
    "reason_of",
    "status_of",
]
