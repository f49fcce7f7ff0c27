"""How a served log refuses a request, on the wire and back: one table for server and clients.

Each :class:`Status` row says how ``patchsync serve`` answers one kind of refusal on each
door (a gRPC ``StatusCode`` name, an HTTP status), how it is counted, whether a client
should try again later, and which error the client raises for it. The server picks a row
by the class of the error it refuses with (``patchsync.serve.errors.STATUSES`` maps its
classes to these rows, most specific first); the clients (:mod:`.grpc_client`,
:mod:`.http_client`) map what they received back through the same rows with
:func:`refusal`, so the two directions cannot drift apart:

- a row a client may retry (the server is busy or stopping, what it serves is out of reach,
  it dropped a client too slow for it, or failed on its own) comes back as
  :class:`~patchsync.remote.errors.StreamUnavailable`, which the tail daemon retries; gRPC
  cannot tell a retryable ``RESOURCE_EXHAUSTED`` from one that is not by its code, so the
  server says so in trailing metadata (:data:`RETRYABLE_KEY`);
- a code that only one kind of client error has (``FAILED_PRECONDITION``: the patch does
  not follow the head) comes back as that error (:class:`~patchsync.errors.ChainError`);
- anything else is a :class:`~patchsync.errors.UsageError` line, with what to do about a
  credential when the server wants one.

HTTP 400 stands for several rows; RDF Delta tells its conflict apart by a JSON body, which
the HTTP client reads where it appends.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.remote.connect_errors import credential_hint
from patchsync.remote.errors import StreamUnavailable

#: Trailing metadata key of a gRPC refusal worth retrying later: RESOURCE_EXHAUSTED alone
#: cannot tell "too many streams now" from "this message is too large".
RETRYABLE_KEY = "patchsync-retryable"


@dataclass(frozen=True, slots=True)
class Status:
    """How a server answers one kind of refusal, and what a client makes of it."""

    #: A ``grpc.StatusCode`` member name.
    grpc: str
    #: An HTTP status code.
    http: int
    #: The ``reason`` label of the server's ``patchsync_topic_refusals_total``.
    reason: str = "other"
    #: Whether a client should send the request again later rather than give up.
    retryable: bool = False
    #: What a client raises for it (when not retryable).
    client: type[PatchsyncError] = UsageError


UNAUTHENTICATED = Status("UNAUTHENTICATED", 401, "auth")
FORBIDDEN = Status("PERMISSION_DENIED", 403, "auth")
READ_ONLY = Status("PERMISSION_DENIED", 403, "kind")
UNKNOWN_TOPIC = Status("NOT_FOUND", 404, "topic")
MISSING = Status("NOT_FOUND", 404, "missing")
NOT_ALLOWED = Status("UNIMPLEMENTED", 405)
BUSY = Status("RESOURCE_EXHAUSTED", 503, "limit", retryable=True)
OVER_LIMIT = Status("RESOURCE_EXHAUSTED", 413, "limit")
TOO_SLOW = Status("RESOURCE_EXHAUSTED", 408, "timeout", retryable=True)
UNSUPPORTED_MEDIA = Status("INVALID_ARGUMENT", 415, "decode")
STOPPING = Status("UNAVAILABLE", 503, "unavailable", retryable=True)
# RDF Delta answers a version conflict with 400 and a JSON body (docs/decisions/0002).
CHAIN = Status("FAILED_PRECONDITION", 400, "chain", client=ChainError)
REPLACED = Status("OUT_OF_RANGE", 410)
UNAVAILABLE = Status("UNAVAILABLE", 503, "unavailable", retryable=True)
DECODE = Status("INVALID_ARGUMENT", 400, "decode")
WRONG_KIND = Status("INVALID_ARGUMENT", 400, "kind")
BAD_REQUEST = Status("INVALID_ARGUMENT", 400)
TARGET_REFUSED = Status("ABORTED", 409)
#: A patchsync error of the server's own (its disk, say): not the request's fault.
SERVER = Status("INTERNAL", 500, retryable=True)
#: An error that is not a patchsync error (a bug): its text stays in the server's log.
INTERNAL = Status("INTERNAL", 500, "internal", retryable=True)

#: Every row a server answers with.
STATUSES = (
    UNAUTHENTICATED,
    FORBIDDEN,
    READ_ONLY,
    UNKNOWN_TOPIC,
    MISSING,
    NOT_ALLOWED,
    BUSY,
    OVER_LIMIT,
    TOO_SLOW,
    UNSUPPORTED_MEDIA,
    STOPPING,
    CHAIN,
    REPLACED,
    UNAVAILABLE,
    DECODE,
    WRONG_KIND,
    BAD_REQUEST,
    TARGET_REFUSED,
    SERVER,
    INTERNAL,
)
#: What a client's gRPC library reports of a call it gave up on itself (no server said it).
TRANSPORT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})


def refusal(text: str, code: str | int, *, retryable: bool = False, token_sent: bool = False) -> PatchsyncError:
    """The error a client raises for a refusal with ``code`` (a gRPC code name or an HTTP
    status; ``retryable``: the server said so), worded ``text`` (naming the request and the
    server's line). ``token_sent``: whether the request carried a token (for the hint)."""
    rows = [s for s in STATUSES if code in (s.grpc, s.http)]
    if retryable or code in TRANSPORT or (rows and all(s.retryable for s in rows)):
        return StreamUnavailable(text)
    if not rows and isinstance(code, int) and code >= 500:
        return StreamUnavailable(text)  # a proxy's or gateway's answer: the server out of reach
    if code in (UNAUTHENTICATED.grpc, UNAUTHENTICATED.http):
        return UsageError(f"{text}; {credential_hint(token_sent=token_sent)}")
    kinds = {s.client for s in rows if not s.retryable}
    return (kinds.pop() if len(kinds) == 1 else UsageError)(text)


def read_only(where: str, kind: str) -> PatchsyncError:
    """What a client raises for a topic whose server takes no writes to it (a ``kind`` topic),
    found out before writing (gRPC ``Describe``, HTTP ``OPTIONS``): the same line through
    either door, the error of the :data:`READ_ONLY` row."""
    return READ_ONLY.client(f"{where}: a {kind} topic is read-only; write to a log topic")


__all__ = [
    "BAD_REQUEST",
    "BUSY",
    "CHAIN",
    "DECODE",
    "FORBIDDEN",
    "INTERNAL",
    "MISSING",
    "NOT_ALLOWED",
    "OVER_LIMIT",
    "READ_ONLY",
    "REPLACED",
    "RETRYABLE_KEY",
    "SERVER",
    "STATUSES",
    "STOPPING",
    "TARGET_REFUSED",
    "TOO_SLOW",
    "TRANSPORT",
    "UNAUTHENTICATED",
    "UNAVAILABLE",
    "UNKNOWN_TOPIC",
    "UNSUPPORTED_MEDIA",
    "WRONG_KIND",
    "Status",
    "read_only",
    "refusal",
]
