"""Publishing patch logs to a stream, and committing a recorder's patches to one.

Resuming (a rerun, or after ``kill -9``): the stream itself says how far a previous run
got. :func:`publish_logs` reads the stream's head (the id of its last message) and skips
the patches of the logs up to and including that patch; the first patch it sends is the
one whose ``prev`` is the head. This holds however long ago the previous run was, where
the server's deduplication by ``Nats-Msg-Id`` only covers the stream's duplicate window
(2 minutes by default). Deduplication still covers the one patch whose acknowledgement a
crash lost, and a concurrent publisher of the same logs. If no patch of the logs follows
the head, the first one is sent anyway and the server refuses it: a :class:`ChainError`
naming both ids, nothing published.

Message size: a patch travels in exactly one message, never split. A patch whose message
(payload and headers) exceeds the server's ``max_payload`` (from the connection's INFO,
1 MiB by default) or the stream's ``max_msg_size`` is refused before sending, with one
:class:`MessageTooLarge` line naming the file, the patch, its size and the limit; the
patches before it stay published (a prefix of the chain, which a rerun continues).
Splitting was rejected: the stream sequence would no longer be a per-patch checkpoint,
the conditional append and deduplication would guard fragments rather than patches, and
every replica would have to reassemble fragments across its own crashes. The limit is
the operator's to raise (``max_payload`` up to 64 MiB), or the writer's to respect
(smaller transactions).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

from patchsync.chains import held_prefix
from patchsync.options import Limits, PatchOptions
from patchsync.streams.errors import MessageTooLarge
from patchsync.streams.nats_log import (
    EXPECTED_LAST_ID,
    EXPECTED_LAST_SEQ,
    EXPECTED_STREAM,
    MSG_ID,
    NatsLog,
    PublishResult,
)
from patchsync.streams.payloads import LogPatch, PatchMessage, read_patches
from patchsync.streams.url import StreamURL
from patchsync.streams.writer import PatchWriter
from patchsync.terms import TermAdapter


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """How a missing stream is created (an existing one keeps its configuration)."""

    create: bool = True
    replicas: int = 1
    max_age: float | None = None
    max_bytes: int | None = None
    max_msgs: int | None = None
    duplicate_window: float | None = None

    def apply(self, log: NatsLog) -> None:
        log.ensure_stream(
            create=self.create,
            replicas=self.replicas,
            max_age=self.max_age,
            max_bytes=self.max_bytes,
            max_msgs=self.max_msgs,
            duplicate_window=self.duplicate_window,
        )


@dataclass(frozen=True, slots=True)
class PublishReport:
    """What one :func:`publish_logs` run did."""

    published: int
    #: Patches the stream already held (skipped before the head, or answered "duplicate").
    skipped: int
    #: The stream's head after the run: its last sequence and patch id.
    last_seq: int
    head: str | None


def message_size(payload: bytes, patch_id: str, prev: str | None, stream: str) -> int:
    """Bytes of the published message counted against ``max_payload`` (headers included)."""
    headers = {MSG_ID: patch_id, EXPECTED_STREAM: stream}
    headers[EXPECTED_LAST_ID if prev is not None else EXPECTED_LAST_SEQ] = prev or "0"
    # NATS/1.0 CRLF, then "Key: value" CRLF per header, then an empty line. The fallback
    # to a sequence (publish_patch) is never longer than an id-based expectation plus 20.
    block = len("NATS/1.0\r\n") + sum(len(k) + 2 + len(v) + 2 for k, v in headers.items()) + 2
    return len(payload) + block + 20


def check_size(message: PatchMessage, log: NatsLog) -> None:
    """Refuse a patch whose message exceeds what the stream takes (:class:`MessageTooLarge`)."""
    size = message_size(message.payload, message.patch_id, message.prev, log.name)
    limit = log.max_message_bytes
    if size > limit:
        raise MessageTooLarge(
            f"{message.source}: patch {message.number} ({message.patch_id}) needs a {size}-byte message, "
            f"{log.url} takes at most {limit} bytes; a patch is never split: raise the server's "
            "max_payload or write smaller patches"
        )


def publish_logs(
    paths: Iterable[str | os.PathLike[str]],
    url: StreamURL | str | NatsLog,
    *,
    settings: StreamSettings | None = None,
    limits: Limits | None = None,
    on_published: Callable[[PatchMessage, PublishResult], None] | None = None,
) -> PublishReport:
    """Publish every complete patch of the logs, in order, continuing the stream's head.

    ``url`` is a stream address or an open :class:`NatsLog` (left open). The stream is
    created when missing (``settings``). See the module docstring for resuming and for
    patches larger than a message. ``on_published`` is called after each patch the
    server acknowledged (progress reports).
    """
    logs = [os.fspath(p) for p in paths]
    own = not isinstance(url, NatsLog)
    log = NatsLog(url) if not isinstance(url, NatsLog) else url
    try:
        (settings or StreamSettings()).apply(log)
        head = log.head()
        published = 0
        pending, skipped = patches_after_head(logs, head.patch_id, limits)
        last_seq, last_id = head.seq, head.patch_id
        for patch in pending:
            message = patch.message()
            check_size(message, log)
            result = log.publish_patch(message.payload, message.patch_id, message.prev)
            if result.duplicate:
                skipped += 1
            else:
                published += 1
                last_seq, last_id = result.seq, message.patch_id
            if on_published is not None:
                on_published(message, result)
        return PublishReport(published, skipped, last_seq, last_id)
    finally:
        if own:
            log.close()


def patches_after_head(logs: list[str], head: str | None, limits: Limits | None) -> tuple[Iterator[LogPatch], int]:
    """The patches of ``logs`` to publish after the log's ``head``; how many it holds already.

    The chain rule of every writer (:func:`patchsync.chains.held_prefix`): the patches up to
    and including the head are held, the rest are sent and the server appends each only if
    it follows the head (a :class:`ChainError` naming both ids otherwise). Patches are
    encoded only when sent: a rerun skips the published ones unencoded.
    """

    def patches() -> Iterator[LogPatch]:
        return chain.from_iterable(read_patches(p, limits=limits) for p in logs)

    skipped, pending = held_prefix(patches, _chain_ids, head)
    return pending, skipped


def _chain_ids(patch: LogPatch) -> tuple[str | None, str | None]:
    return patch.patch_id, patch.prev


class StreamWriter(PatchWriter):
    """Where a recorder commits its patches when they go straight to a stream.

    A :class:`~patchsync.streams.writer.PatchWriter` (``Recorder(graph, StreamWriter(url))``,
    or simply ``Recorder(graph, "nats://HOST:PORT/STREAM")``). Each patch is published as
    one message on :meth:`commit`, appended only if it follows the stream's head; the head
    is read from the stream on opening. A failed commit raises (:class:`ChainError`,
    :class:`StreamUnavailable`, :class:`MessageTooLarge`) and the patch is not in the stream.
    """

    destination = "a stream"

    def __init__(
        self,
        url: StreamURL | str | NatsLog,
        options: PatchOptions | None = None,
        adapter: TermAdapter[Any] | None = None,
        *,
        settings: StreamSettings | None = None,
    ) -> None:
        super().__init__(options, adapter)
        self._own = not isinstance(url, NatsLog)
        self.log = NatsLog(url) if not isinstance(url, NatsLog) else url
        try:
            (settings or StreamSettings()).apply(self.log)
            self.head = self.log.head().patch_id
        except BaseException:
            self.close()
            raise

    def _send(self, patch_id: str, payload: bytes) -> None:
        message = PatchMessage(patch_id, self.head, payload, str(self.log.url), self.patches + 1)
        check_size(message, self.log)
        self.last_seq = self.log.publish_patch(message.payload, patch_id, self.head).seq

    def close(self) -> None:
        """Disconnect (a stream needs no finishing: every patch was one message)."""
        if self._own:
            self.log.close()
