"""A log topic on a NATS JetStream stream (``nats://HOST:PORT/STREAM``): one patch per message.

The stream's sequence is the version. The stream itself keeps the chain: every publish
carries the patch's ``prev`` as the expected last message id (:meth:`NatsLog.publish_patch`),
so two servers appending to one stream never fork it, whichever of them a client reaches.

One follower per topic reads every message as the stream stores it (this server's appends
and any other writer's), records its patch id in the stream's id index on disk
(:mod:`patchsync.nats.stream_index`, in ``--index-dir``; in memory without one) before it
counts the message as seen, and hands each message to the subscribers. An append returns
once the follower has seen its message, so a reader asked right after finds it.

Opening checks the index against the stream (its identity, and the message at the last
sequence indexed) and reads only the messages after the last one indexed: a restart costs
what was published while the server was down, not the stream's length, and the topic
keeps no entry per patch in memory. A fetch by version is a direct get by sequence; a
fetch by id (and an append's duplicate check) looks the id up in the index. An index
found broken while serving is built again by the follower from the stream's first
message; meanwhile an id it does not hold yet is answered "unavailable, try again",
never "no such patch".
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from patchsync.errors import ChainError, PatchsyncError
from patchsync.logs.payloads import PatchMessage, StreamMessage, encode_patch, text_options
from patchsync.logs.version_index import IndexCorrupt
from patchsync.nats.headers import check_size
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.publish import prepare
from patchsync.nats.stream_index import StreamIndex, index_file, message_id
from patchsync.nats.url import StreamURL
from patchsync.options import Limits
from patchsync.remote.errors import StreamUnavailable
from patchsync.serve.incoming import Incoming, decode_patch, statement_patch
from patchsync.serve.topics import BATCH_BYTES, Appended, Entry, LogTopic, TopicOptions, stored_entries

#: Messages read per request.
BATCH = 256
#: Seconds the follower waits for new messages per request.
FOLLOW_WAIT = 1.0
#: Seconds between two attempts to reach a server that was lost.
RETRY_WAIT = 1.0


class NatsTopic(LogTopic):
    """A NATS JetStream stream served as a log topic (see the module docstring)."""

    def __init__(
        self,
        name: str,
        spec: str,
        url: StreamURL,
        *,
        subscriber_buffer: int = 1024,
        subscriber_bytes: int = 8 << 20,
        limits: Limits | None = None,
        index_dir: Path | None = None,
    ) -> None:
        super().__init__(name, spec, subscriber_buffer=subscriber_buffer, subscriber_bytes=subscriber_bytes)
        self.url = url
        self.limits = limits
        #: Where the stream's id index is kept (``None``: in memory).
        self.index_dir = index_dir
        #: Messages read from the stream while opening (those after the last one indexed).
        self.read_on_open = 0
        self._index: StreamIndex | None = None
        #: Why the index must be built again (found broken while serving), or ``None``.
        self._broken: str | None = None
        self._log: NatsLog | None = None
        self._follow: NatsLog | None = None
        self._io = threading.Lock()
        self._follower: asyncio.Task[None] | None = None
        self._seen = asyncio.Condition()
        self.error: str | None = None

    async def open(self) -> None:
        def connect() -> tuple[NatsLog, NatsLog]:
            log = NatsLog(self.url)
            try:
                prepare(log, None)
                return log, NatsLog(self.url)
            except BaseException:
                log.close()
                raise

        log, follow = await asyncio.to_thread(connect)
        self._log, self._follow = log, follow
        path = None if self.index_dir is None else index_file(self.index_dir, self.url)
        self._index = index = await asyncio.to_thread(StreamIndex, path, self.url)
        try:
            # The index checked against the stream, then only the messages after it read.
            self.read_on_open = await asyncio.to_thread(index.sync, follow)
        except BaseException:
            self._index = None
            await asyncio.to_thread(index.close)
            raise
        self.version, self.head = index.end, index.head
        self._follower = asyncio.create_task(self._run_follower(), name=f"follow {self.name}")

    async def _read_more(self, wait: float) -> bool:
        follow, index = self._follow, self._index
        assert follow is not None and index is not None
        first = self.version + 1

        def read() -> list[StreamMessage]:
            messages = follow.fetch(first, BATCH, wait)
            # Indexed before they count as seen: an id the topic knows always has its row.
            index.add(messages)
            return messages

        messages = await asyncio.to_thread(read)
        for message in messages:
            self._see(message)
        if messages:
            async with self._seen:
                self._seen.notify_all()
        return bool(messages)

    def _see(self, message: StreamMessage) -> None:
        patch_id = message_id(message)
        self.head = patch_id
        self.version = message.seq
        self._appended(Entry(message.seq, patch_id, message.payload))

    async def _run_follower(self) -> None:
        while not self.hub.closed:
            try:
                if self._broken is not None:
                    await self._rebuild_index(self._broken)
                await self._read_more(FOLLOW_WAIT)
                self.error = None
            except IndexCorrupt as exc:
                self._broken = self.error = str(exc)
                await asyncio.sleep(RETRY_WAIT)
            except PatchsyncError as exc:
                self.error = str(exc)
                await asyncio.sleep(RETRY_WAIT)

    async def _rebuild_index(self, reason: str) -> None:
        index, follow = self._index, self._follow
        assert index is not None and follow is not None

        def rebuild() -> None:
            index.rebuild(reason)
            index.sync(follow)

        await asyncio.to_thread(rebuild)
        self._broken = None

    async def close(self) -> None:
        await super().close()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        for log in (self._log, self._follow):
            if log is not None:
                await asyncio.to_thread(log.close)
        self._log = self._follow = None
        index, self._index = self._index, None
        if index is not None:
            await asyncio.to_thread(index.close)

    def version_of(self, patch_id: str) -> int | None:
        index = self._index
        if index is None:
            return None
        try:
            seq = index.sequence_of(patch_id)
        except IndexCorrupt as exc:
            self._broken = self._broken or str(exc)
            seq = None
        # A message counts once the follower has seen it (its row may be committed just before).
        if seq is not None and seq <= self.version:
            return seq
        if self._broken is not None or index.end < self.version:
            raise StreamUnavailable(
                f"topic {self.name}: its patch id index is being built again ({self._broken or 'found broken'}); "
                "try again shortly"
            )
        return None

    async def append(self, payload: bytes, *, where: str = "") -> Appended:
        incoming = await self.in_writer(decode_patch, payload, where or f"topic {self.name}", self.limits)
        return await self._publish(incoming, payload)

    async def append_statements(self, quads: list[tuple[str, str, str, str]], *, where: str = "") -> Appended:
        # prev is the head as this server last saw it; the stream refuses it if another
        # writer moved the head meanwhile (a ChainError, nothing appended).
        incoming = statement_patch(quads, self.head)
        payload = encode_patch(incoming.events, text_options(incoming.events))
        return await self._publish(incoming, payload)

    async def _publish(self, incoming: Incoming, payload: bytes) -> Appended:
        known = self.version_of(incoming.patch_id)
        if known is not None:
            return Appended(known, incoming.patch_id, duplicate=True)
        log = self._log
        if log is None:
            raise ChainError(f"topic {self.name}: closed")

        def publish() -> tuple[int, bool]:
            with self._io:
                message = PatchMessage(incoming.patch_id, incoming.prev, payload, f"topic {self.name}", 1)
                check_size(message, log.name, str(log.url), log.max_message_bytes)
                result = log.publish_patch(payload, incoming.patch_id, incoming.prev)
                return result.seq, result.duplicate

        seq, duplicate = await self.in_writer(publish)
        async with self._seen:
            await self._seen.wait_for(lambda: self.version >= seq or self.hub.closed)
        return Appended(seq, incoming.patch_id, duplicate=duplicate)

    def _stored(self, first: int, last: int, max_bytes: int = BATCH_BYTES) -> AsyncIterator[list[Entry]]:
        return stored_entries(lambda: self._entries(first, last), max_bytes)

    def _entries(self, first: int, last: int) -> Iterator[Entry]:
        log = self._log
        assert log is not None
        if first == last:
            # One patch (a fetch by version): a direct get by sequence, no consumer made.
            with self._io:
                message = log.message(first)
            if message is not None:
                yield Entry(message.seq, message_id(message), message.payload)
            return
        seq = first
        while seq <= last:
            with self._io:
                messages = log.fetch(seq, BATCH, 0.1)
            if not messages:
                return
            for message in messages:
                if message.seq > last:
                    return
                yield Entry(message.seq, message_id(message), message.payload)
                seq = message.seq + 1


def nats_topic(name: str, spec: str, url: StreamURL, options: TopicOptions) -> NatsTopic:
    """The log topic of a NATS JetStream stream (the source registry's ``topic`` role of
    ``nats://``; the stream itself is synced as its server is configured)."""
    return NatsTopic(
        name,
        spec,
        url,
        subscriber_buffer=options.subscriber_buffer,
        subscriber_bytes=options.subscriber_bytes,
        index_dir=options.index_dir,
    )


__all__ = ["NatsTopic", "nats_topic"]
