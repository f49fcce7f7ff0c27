"""A patch log held in a NATS JetStream stream, behind a synchronous facade.

One message per patch, published on ``patchsync.<STREAM>``. JetStream gives the chain its
two guarantees on the server:

- ``Nats-Msg-Id`` = the patch id: the server drops a second copy of a message it has seen
  within the stream's duplicate window and answers "duplicate" (reported as
  ``PublishResult.duplicate``, nothing stored).
- ``Nats-Expected-Last-Msg-Id`` = the patch's ``prev`` (``Nats-Expected-Last-Sequence: 0``
  when it has none): the server stores the message only if the stream's last message is
  that patch, so two writers cannot fork the stream; a refusal is a :class:`ChainError`
  naming the patch, its ``prev`` and the stream's real head.

The server checks duplicates before expectations, so resending a stored patch is always
"duplicate", never a fork. Outside the duplicate window (and after a server restart, which
forgets the last message id when the last message is older than the window) the facade
reads the stream's last message itself: if that is this very patch the result is
"duplicate"; if it is the patch's ``prev`` the append is retried conditional on the last
sequence instead, which pins the same state of the stream.

Reading uses an ephemeral pull consumer (no acknowledgements, started at the wanted
sequence; :mod:`patchsync.nats.pull`): the reader's position lives with the reader (the tail daemon keeps it in the
target's checkpoint), never on the server. See :mod:`patchsync.nats._loop` for why the
facade runs the asyncio client on a private thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.logs.payloads import MSG_ID, PatchMessage, StreamMessage
from patchsync.nats._client import import_client
from patchsync.nats._loop import LoopThread
from patchsync.nats.errors import StreamGap, translate
from patchsync.nats.headers import EXPECTED_LAST_ID, EXPECTED_LAST_SEQ, check_size
from patchsync.nats.pull import PullReader
from patchsync.nats.url import StreamURL, parse_stream_url, subject_matches
from patchsync.remote.interface import Appended, LogHead, LogLag, RemoteLog
from patchsync.remote.rules import lag

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.client import JetStreamContext

T = TypeVar("T")


# JetStream error codes (server's errors.json) the facade acts on.
_WRONG_LAST_ID = 10070
_WRONG_LAST_SEQ = 10071
_NO_MESSAGE = 10037

_RECONNECT_WAIT = 0.5


#: The answer to one published patch, the head, the lag: every remote log's types
#: (:mod:`patchsync.remote.interface`), by the names the stream API has always used.
PublishResult = Appended
StreamHead = LogHead
StreamLag = LogLag


@dataclass(frozen=True, slots=True)
class StreamState:
    """What :meth:`NatsLog.ensure_stream` found or made."""

    first_seq: int
    last_seq: int
    messages: int
    replicas: int
    max_message_bytes: int
    created: bool


class NatsLog(RemoteLog):
    """A connection to one stream (``nats://HOST:PORT/STREAM``), used synchronously.

    Connects on construction; every call waits at most about ``request_timeout`` seconds.
    Client failures are translated (:mod:`patchsync.nats.errors`): a lost server is
    :class:`StreamUnavailable`, never a ``nats`` exception. ``reconnect_attempts`` bounds the
    client's own reconnecting; after that, calls fail and the caller reopens (the tail
    daemon does so with its backoff). Use as a context manager or call :meth:`close`.
    One thread at a time: the reader's position is the facade's state. ``read_ahead``:
    see :meth:`fetch`. A :class:`~patchsync.remote.interface.RemoteLog` whose positions are
    stream sequences.
    """

    position_word = "seq"
    url: StreamURL

    def __init__(
        self,
        url: StreamURL | str,
        *,
        connect_timeout: float = 2.0,
        request_timeout: float = 5.0,
        reconnect_attempts: int = 5,
        read_ahead: bool = False,
    ) -> None:
        self.url = url if isinstance(url, StreamURL) else parse_stream_url(url)
        self.name = self.url.stream
        self.subject = self.url.subject
        self.request_timeout = request_timeout
        self._connect_timeout = connect_timeout
        if reconnect_attempts < 1:
            raise UsageError("reconnect_attempts must be at least 1")
        self._reconnect_attempts = reconnect_attempts
        #: The client's last asynchronous error (reported by callbacks, not raised).
        self.last_error: BaseException | None = None
        self._stream_max_msg_size = -1
        self._reader: PullReader | None = None
        self._next_seq = 0
        self._read_ahead = read_ahead
        self._loop = LoopThread()
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        try:
            # The client tries reconnect_attempts times, each bounded by connect_timeout
            # and spaced by its reconnect wait.
            self._call(self._connect, timeout=(connect_timeout + _RECONNECT_WAIT) * (self._reconnect_attempts + 1) + 1)
        except BaseException:
            self._loop.close()
            raise

    # -- plumbing -----------------------------------------------------------------------

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn()`` (an async function using :attr:`js`) on the facade's loop, errors translated.

        For what the facade does not cover (cluster details, administration).
        """
        return self._call(fn)

    def _call(self, fn: Callable[[], Awaitable[T]], *, timeout: float | None = None) -> T:
        async def run() -> T:
            return await fn()

        try:
            # Each request to the server is bounded by request_timeout already; this deadline
            # is the safety net over a call's few sequential requests.
            return self._loop.run(run(), self.request_timeout * 4 + 2 if timeout is None else timeout)
        except PatchsyncError:
            raise
        except Exception as exc:
            error = translate(exc, str(self.url))
            if error is None:
                raise
            raise error from exc

    async def _connect(self) -> None:
        nats = import_client()

        async def on_error(exc: Exception) -> None:
            # Without a callback the client logs tracebacks; the facade reports through
            # its return values and translated exceptions instead.
            self.last_error = exc

        try:
            self._nc = await nats.connect(
                servers=[self.url.server],
                name="patchsync",
                connect_timeout=self._connect_timeout,
                allow_reconnect=True,
                # 0 would mean "no limit" to the client.
                max_reconnect_attempts=self._reconnect_attempts,
                reconnect_time_wait=_RECONNECT_WAIT,
                error_cb=on_error,
            )
        except Exception as exc:
            # The client raises "no servers available"; why (an unresolvable host name, a
            # refused connection) is the last error it reported, which translation needs.
            if self.last_error is not None and exc.__cause__ is None:
                raise exc from self.last_error
            raise
        self._js = self._nc.jetstream(timeout=self.request_timeout)

    @property
    def js(self) -> JetStreamContext:
        """The client's JetStream context (for what the facade does not cover)."""
        assert self._js is not None
        return self._js

    @property
    def max_payload(self) -> int:
        """The largest message (headers and payload) the connected server accepts."""
        assert self._nc is not None
        return int(self._nc.max_payload)

    @property
    def max_message_bytes(self) -> int:
        """The largest message this stream takes: the server's limit or the stream's, if lower."""
        limit = self.max_payload
        if self._stream_max_msg_size > 0:
            limit = min(limit, self._stream_max_msg_size)
        return limit

    # -- the stream ---------------------------------------------------------------------

    def ensure_stream(
        self,
        *,
        create: bool = True,
        replicas: int = 1,
        max_age: float | None = None,
        max_bytes: int | None = None,
        max_msgs: int | None = None,
        duplicate_window: float | None = None,
    ) -> StreamState:
        """Find the stream, creating it (file storage) when missing and ``create`` is true.

        ``replicas`` is the number of servers holding the stream (1 to 5; more than 1
        needs a JetStream cluster); ``max_age`` (seconds), ``max_bytes`` and ``max_msgs``
        bound its retention (old patches are removed first: a replica further behind
        than that needs a snapshot); ``duplicate_window`` (seconds, server default 120)
        is how long a resent patch is recognised by its id alone. An existing stream
        keeps its configuration; it must carry the subject ``patchsync.<STREAM>``.
        """
        return self._call(
            lambda: self._ensure(create, replicas, max_age, max_bytes, max_msgs, duplicate_window),
            timeout=self.request_timeout * 2 + 2,
        )

    async def _ensure(
        self,
        create: bool,
        replicas: int,
        max_age: float | None,
        max_bytes: int | None,
        max_msgs: int | None,
        duplicate_window: float | None,
    ) -> StreamState:
        import nats.js.errors as je
        from nats.js.api import StorageType, StreamConfig

        from patchsync.nats.errors import StreamNotFound, StreamRefused

        created = False
        try:
            info = await self.js.stream_info(self.name)
        except je.NotFoundError:
            if not create:
                raise StreamNotFound(f"{self.url}: no such stream on the server") from None
            config = StreamConfig(
                name=self.name,
                subjects=[self.subject],
                num_replicas=replicas,
                storage=StorageType.FILE,
                max_age=max_age,
                max_bytes=max_bytes,
                max_msgs=max_msgs,
                duplicate_window=duplicate_window or 0,
            )
            info = await self.js.add_stream(config)
            created = True
        subjects = info.config.subjects or []
        if not any(subject_matches(pattern, self.subject) for pattern in subjects):
            raise StreamRefused(
                f"{self.url}: the stream exists but does not take subject {self.subject!r} "
                f"(its subjects: {', '.join(subjects) or 'none'})"
            )
        self._stream_max_msg_size = info.config.max_msg_size or -1
        state = info.state
        return StreamState(
            first_seq=state.first_seq,
            last_seq=state.last_seq,
            messages=state.messages,
            replicas=info.config.num_replicas or 1,
            max_message_bytes=self.max_message_bytes,
            created=created,
        )

    def delete_stream(self) -> bool:
        """Delete the stream and every message in it; ``False`` if there was none."""
        import nats.js.errors as je

        async def delete() -> bool:
            try:
                return bool(await self.js.delete_stream(self.name))
            except je.NotFoundError:
                return False

        return self._call(delete)

    def head(self) -> LogHead:
        """The stream's last message (sequence 0 and no id when it is empty)."""
        return self._call(self._head)

    async def _head(self) -> LogHead:
        import nats.js.errors as je

        try:
            msg = await self.js.get_msg(self.name, subject=self.subject)
        except je.NotFoundError as exc:
            if exc.err_code != _NO_MESSAGE:
                raise
            return LogHead(0, None, None)
        headers = msg.headers or {}
        published = msg.time.timestamp() if msg.time is not None else None
        return LogHead(int(msg.seq or 0), headers.get(MSG_ID), published)

    def message(self, seq: int) -> StreamMessage | None:
        """The message at ``seq``, or ``None`` when the stream does not hold it (never, or removed)."""
        import nats.js.errors as je

        async def get() -> StreamMessage | None:
            try:
                msg = await self.js.get_msg(self.name, seq=seq)
            except je.NotFoundError:
                return None
            published = msg.time.timestamp() if msg.time is not None else 0.0
            return StreamMessage(int(msg.seq or seq), published, msg.headers or {}, msg.data or b"")

        return self._call(get)

    def last_seq(self) -> int:
        """The sequence of the stream's last message (0 when empty)."""

        async def last() -> int:
            return int((await self.js.stream_info(self.name)).state.last_seq)

        return self._call(last)

    def fingerprint(self) -> str:
        """What identifies this stream across restarts and failovers: its name and creation time.

        A stream deleted and created again restarts its sequences; its fingerprint
        differs, so a checkpoint taken on the old one is recognised as stale.
        """

        async def fingerprint() -> str:
            info = await self.js.stream_info(self.name)
            created = info.created.isoformat() if info.created is not None else "?"
            return f"jetstream:{self.name}:{created}"

        return self._call(fingerprint)

    def leader(self) -> str | None:
        """The server leading the stream in a cluster (``None`` on a single server)."""

        async def leader() -> str | None:
            cluster = (await self.js.stream_info(self.name)).cluster
            return cluster.leader if cluster is not None else None

        return self._call(leader)

    def first_seq(self) -> int:
        """The sequence of the oldest message still held (retention may have removed older)."""

        async def first() -> int:
            return int((await self.js.stream_info(self.name)).state.first_seq)

        return self._call(first)

    # -- writing ------------------------------------------------------------------------

    def publish_patch(self, payload: bytes, patch_id: str, prev: str | None) -> Appended:
        """Append one patch if it follows the stream's head; see the module docstring.

        Returns the stored sequence, or the existing one with ``duplicate=True`` when the
        stream already holds this patch. Raises :class:`ChainError` naming the patch, its
        ``prev`` and the stream's head when the patch does not follow the head.
        """
        return self._call(lambda: self._publish(payload, patch_id, prev))

    async def _publish(self, payload: bytes, patch_id: str, prev: str | None) -> Appended:
        import nats.js.errors as je

        expect = {EXPECTED_LAST_SEQ: "0"} if prev is None else {EXPECTED_LAST_ID: prev}
        try:
            return await self._send(payload, patch_id, expect)
        except je.APIError as exc:
            if exc.err_code not in (_WRONG_LAST_ID, _WRONG_LAST_SEQ):
                raise
        head = await self._head()
        if head.patch_id == patch_id:
            return Appended(head.seq, duplicate=True)
        if prev is not None and head.patch_id == prev:
            # The server forgot its last message id (restart, or older than the
            # duplicate window): the same condition, stated by sequence.
            try:
                return await self._send(payload, patch_id, {EXPECTED_LAST_SEQ: str(head.seq)})
            except je.APIError as exc:
                if exc.err_code != _WRONG_LAST_SEQ:
                    raise
            head = await self._head()
        raise self._fork(patch_id, prev, head)

    async def _send(self, payload: bytes, patch_id: str, expect: dict[str, str]) -> Appended:
        headers = {MSG_ID: patch_id, **expect}
        ack = await self.js.publish(
            self.subject, payload, timeout=self.request_timeout, stream=self.name, headers=headers
        )
        return Appended(int(ack.seq), bool(ack.duplicate))

    def _fork(self, patch_id: str, prev: str | None, head: LogHead) -> ChainError:
        if head.seq == 0:
            where = "the stream is empty"
        else:
            where = f"the stream's head is {head.patch_id or '(a message without id)'} (sequence {head.seq})"
        return ChainError(
            f"{self.url}: patch {patch_id} does not follow the stream's head: "
            f"its prev is {prev or '(none)'}, {where}; refusing to fork the stream"
        )

    # -- reading ------------------------------------------------------------------------

    def fetch(self, from_seq: int, batch: int = 256, timeout: float = 1.0) -> list[StreamMessage]:
        """Up to ``batch`` messages from sequence ``from_seq`` on, in stream order.

        Waits up to ``timeout`` seconds for the first; an empty list means nothing beyond
        ``from_seq - 1`` exists yet. Consecutive calls continuing where the last ended
        reuse one consumer (:class:`~patchsync.nats.pull.PullReader`). Raises
        :class:`StreamGap` when ``from_seq`` was removed by the stream's retention (the
        reader must start from a snapshot).

        With ``read_ahead``, the consumer is asked for more than ``batch`` at a time, and
        for the next messages as soon as it answered in full (a backlog), so the server
        and the client's parsing work while the caller applies what it took; messages
        already received are taken on the caller's thread, without waiting for the
        client's. A call elsewhere than where the last ended drops what was read ahead
        with its consumer.
        """
        if from_seq < 1:
            raise ValueError("stream sequences start at 1")
        reader = self._reader
        if reader is not None and self._next_seq == from_seq:
            # Read ahead: what the reader holds already is taken here, not on the loop.
            msgs = reader.take(from_seq, batch)
            if msgs:
                self._next_seq = msgs[-1].seq + 1
                if len(msgs) == batch:
                    self._loop.submit(reader.top_up(timeout))
                return msgs
        return self._call(lambda: self._fetch(from_seq, batch, timeout), timeout=timeout + self.request_timeout * 3 + 2)

    async def _fetch(self, from_seq: int, batch: int, timeout: float) -> list[StreamMessage]:
        reader = self._reader
        if reader is None or self._next_seq != from_seq or reader.broken:
            reader = await self._open_reader(from_seq)
        try:
            msgs = await reader.fetch(batch, timeout)
        except Exception:
            await self._drop_reader()
            raise
        if not msgs:
            # A consumer lost with a restarted server delivers nothing and says nothing:
            # an empty answer is believed only if the stream has nothing from from_seq on.
            info = await self.js.stream_info(self.name)
            if info.state.last_seq >= from_seq:
                await self._drop_reader()
            if info.state.first_seq > from_seq and info.state.messages:
                raise self._gap(from_seq, info.state.first_seq)
            return []
        if msgs[0].seq > from_seq:
            first = (await self.js.stream_info(self.name)).state.first_seq
            if first > from_seq:
                await self._drop_reader()
                raise self._gap(from_seq, first)
        self._next_seq = msgs[-1].seq + 1
        return msgs

    def _gap(self, wanted: int, first: int) -> StreamGap:
        return StreamGap(
            f"{self.url}: message {wanted} is gone (the stream now starts at {first}; "
            "removed by its retention limits): start this replica from a snapshot"
        )

    async def _open_reader(self, from_seq: int) -> PullReader:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.nuid import NUID

        await self._drop_reader()
        assert self._nc is not None
        name = "patchsync_" + NUID().next().decode()
        config = ConsumerConfig(
            name=name,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=from_seq,
            ack_policy=AckPolicy.NONE,
            filter_subject=self.subject,
            # The server removes the consumer of a reader that died (kill -9) by itself.
            inactive_threshold=60.0,
            mem_storage=True,
        )
        reader = PullReader(self._nc, self.js, self.name, read_ahead=self._read_ahead)
        try:
            await reader.start(name, config)
        except BaseException:
            await reader.stop()
            raise
        self._reader, self._next_seq = reader, from_seq
        return reader

    async def _drop_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    def lag(self, applied_seq: int) -> LogLag:
        """How far a reader that applied everything up to ``applied_seq`` is behind
        (:func:`patchsync.remote.rules.lag`)."""
        return lag(self, applied_seq)

    # -- the remote log interface ----------------------------------------------------------

    @property
    def reads_ahead(self) -> bool:
        return self._read_ahead

    def read(self, after: int, limit: int, wait: float) -> list[StreamMessage]:
        return self.fetch(after + 1, limit, timeout=wait if wait > 0 else self.request_timeout)

    def append(self, message: PatchMessage) -> Appended:
        check_size(message, self.name, str(self.url), self.max_message_bytes)
        return self.publish_patch(message.payload, message.patch_id, message.prev)

    def patch_id_at(self, position: int) -> str | None:
        message = self.message(position) if position >= 1 else None
        return None if message is None else message.headers.get(MSG_ID, "")

    def published_at(self, position: int) -> float | None:
        message = self.message(position) if position >= 1 else None
        return None if message is None else message.published

    # -- closing ------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the reader, close the connection and stop the private loop."""
        if self._loop.loop.is_closed():
            return

        async def shut() -> None:
            await self._drop_reader()
            if self._nc is not None:
                await self._nc.close()

        try:
            self._loop.run(shut(), self.request_timeout)
        except Exception:
            pass  # closing a connection that is already gone
        finally:
            self._loop.close()


def connect(url: StreamURL | str, *, timeout: float | None = None, follow: bool = False) -> NatsLog:
    """A connection to a stream (the source kind's ``connect`` role): for following it (the
    daemon: a few reconnect attempts, reading ahead; beyond those the daemon's own backoff
    reopens the connection), or for one question (``status``: one attempt). ``timeout``
    bounds each request (2 s by default)."""
    request = 2.0 if timeout is None else timeout
    return NatsLog(
        url,
        connect_timeout=min(2.0 if follow else 1.0, request),
        request_timeout=request,
        reconnect_attempts=3 if follow else 1,
        read_ahead=follow,
    )
