"""The rules of ``PatchService`` calls, apart from gRPC (no I/O, no grpc import).

:mod:`patchsync.serve.grpc_door` moves messages; what they mean is decided here:

- how a call is refused (:func:`refusal_of`: status, line, trailing metadata);
- where a ``SubscribePatch`` starts (:func:`start_of`) and how large its responses may be
  (:func:`batch_bounds`); the options it asks for are :mod:`patchsync.serve.patch_options`'s;
- how a ``PublishPatch`` stream becomes appends (:class:`PublishTally`): the messages that
  arrived while the last group was appended form the next group (:func:`take_group`, at
  most :data:`GROUP`), every message must name the stream's one topic, and the answer counts
  what was appended and what was there already, and names the head as the stream left it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from patchsync.errors import PatchsyncError, UsageError
from patchsync.remote.statuses import RETRYABLE_KEY
from patchsync.serve.errors import TooSlow, client_message, is_retryable, status_of
from patchsync.serve.topics import Appended, Start, TopicInfo

#: The trailing metadata key of a dropped subscriber: the last version it was sent.
RESUME_KEY = "patchsync-resume-after"
#: Most patches appended in one write by a ``PublishPatch`` stream.
GROUP = 64
#: Most patches in one ``SubscribePatch`` response, whatever the subscriber asks.
MAX_BATCH = 1024
#: Most bytes in one ``SubscribePatch`` response, as serialized: well within the 4 MiB a
#: stock gRPC client takes, and what a subscriber that stops reading holds the server to
#: (about three copies of one response: its patches, the message, gRPC's buffer) until it
#: is dropped. A patch larger than that goes alone, in a message of its own size (up to
#: ``--max-message-bytes``): a subscriber of such a log must allow that size.
MAX_BATCH_BYTES = 1 << 20


class PatchStart(Protocol):
    """A ``PatchStart`` message (its ``position`` oneof)."""

    after_id: str
    after_version: int

    def WhichOneof(self, group: str) -> str | None: ...


class PublishRequest(Protocol):
    """A ``PublishPatchRequest`` message."""

    topic: str
    patch: bytes


@dataclass(frozen=True, slots=True)
class Refusal:
    """How a gRPC call is refused: a ``StatusCode`` name, the one line, trailing metadata."""

    code: str
    line: str
    trailing: tuple[tuple[str, str], ...] = ()


def refusal_of(exc: BaseException, method: str, topic: str) -> Refusal:
    """The refusal of a call that raised ``exc``: the status of the one table, the client's
    line (never a bug's text), ``patchsync-retryable`` when the client should try again
    later, and the version a dropped subscriber resumes after."""
    trailing: tuple[tuple[str, str], ...] = ((RETRYABLE_KEY, "1"),) if is_retryable(exc) else ()
    if isinstance(exc, TooSlow) and exc.resume_after is not None:
        trailing += ((RESUME_KEY, str(exc.resume_after)),)
    line = client_message(exc)
    if not isinstance(exc, PatchsyncError):
        line = f"{method} {topic}: {line}"
    return Refusal(status_of(exc).grpc, line, trailing)


def start_of(start: PatchStart | None) -> Start:
    """Where a subscription starts: after an id, after a version, now, or (unset) the beginning."""
    which = start.WhichOneof("position") if start is not None else None
    if start is not None and which == "after_id":
        return Start.after_patch(start.after_id)
    if start is not None and which == "after_version":
        return Start.after_version(start.after_version)
    if which == "now":
        return Start.now()
    return Start.beginning()


def batch_bounds(max_batch: int, max_message_bytes: int) -> tuple[int, int]:
    """The most patches and bytes of one ``SubscribePatch`` response: ``max_batch`` as asked
    (1 when not above 1: one ``PatchMessage`` each) up to :data:`MAX_BATCH`; the bytes
    within half the message limit, since a subscriber's buffered responses are what a
    stalled one costs, and :data:`MAX_BATCH_BYTES`."""
    limit = min(max_batch, MAX_BATCH) if max_batch > 1 else 1
    return limit, min(max_message_bytes // 2, MAX_BATCH_BYTES)


class _End:
    """The type of :data:`END`."""

    def __repr__(self) -> str:
        return "END"


#: The end of a publish stream, as queued after its last message (never ``None``: ``None``
#: is what :func:`take_group`'s ``more`` says when nothing more is ready).
END = _End()


@dataclass(slots=True)
class Group:
    """One group of a publish stream: its messages; whether the stream ended after them;
    the error that broke the stream (raised at once: a broken stream appends no more)."""

    requests: list[Any]
    ended: bool = False
    error: BaseException | None = None


def take_group(first: Any, more: Callable[[], Any | None], most: int = GROUP) -> Group:
    """The group starting with ``first`` and what ``more()`` has ready (``None`` when
    nothing): requests, then the end marker (:data:`END`) or an exception, at most ``most``."""
    items = [first]
    while len(items) < most and items[-1] is not END and not isinstance(items[-1], BaseException):
        nxt = more()
        if nxt is None:
            break
        items.append(nxt)
    group = Group(items)
    last = items[-1]
    if last is END:
        items.pop()
        group.ended = True
    elif isinstance(last, BaseException):
        items.pop()
        group.error = last
    return group


class PublishTally:
    """What one ``PublishPatch`` stream appended (see the module docstring)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.number = 0
        self.appended = 0
        self.duplicates = 0
        self.last: Appended | None = None
        self.head: tuple[str, int] = ("", 0)

    def payloads(self, requests: Sequence[PublishRequest], check: Callable[[str], None]) -> list[tuple[bytes, str]]:
        """The ``(payload, where)`` of each request of a group, numbered from the stream's
        first; a message naming another topic is refused, and ``check(where)`` (the server
        stopping) runs before each."""
        out = []
        for request in requests:
            self.number += 1
            where = f"PublishPatch {self.topic} message {self.number}"
            if request.topic and request.topic != self.topic:
                raise UsageError(f"{where}: names topic {request.topic}; one stream, one topic")
            check(where)
            out.append((request.patch, where))
        return out

    def count(self, results: Sequence[Appended], info: TopicInfo) -> int:
        """Count a group's results; ``info``: the topic as the group left it (read before
        anything else could append). Returns how many were there already."""
        dups = sum(1 for r in results if r.duplicate)
        self.duplicates += dups
        self.appended += len(results) - dups
        if results:
            last = results[-1]
            self.last = last
            # The head: the stream's own last patch when it was appended, else the log's.
            self.head = (last.patch_id, last.version) if not last.duplicate else (info.head or "", info.version)
        return dups

    def answer(self, info: TopicInfo) -> dict[str, Any]:
        """The ``PublishPatchResponse`` fields (``info``: the topic now, for a stream that
        appended nothing)."""
        last = self.last
        head = self.head if last is not None else (info.head or "", info.version)
        return {
            "version": last.version if last is not None else 0,
            "patch_id": last.patch_id if last is not None else "",
            "head": head[0],
            "head_version": head[1],
            "appended": self.appended,
            "duplicates": self.duplicates,
        }


__all__ = [
    "END",
    "GROUP",
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "Group",
    "PatchStart",
    "PublishRequest",
    "RESUME_KEY",
    "PublishTally",
    "Refusal",
    "batch_bounds",
    "refusal_of",
    "start_of",
    "take_group",
]
