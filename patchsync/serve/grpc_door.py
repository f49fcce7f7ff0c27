"""The gRPC front door: the Jelly ``RdfStreamService``, patchsync's ``PatchService``, health.

An adapter over the topics (docs/decisions/0001-serve-and-topics.md): each method checks
the token (``authorization: Bearer TOKEN`` metadata) before it reads a message, calls one
topic operation and maps a refusal to its status (:mod:`patchsync.serve.errors`); an error
that is not a patchsync error (a bug) is logged and answered ``INTERNAL`` without its text.

- ``SubscribeRdf``: a target topic's snapshot as Jelly-RDF frames, the position in the
  first frame's metadata, ``requested_options`` honoured or refused naming the option
  (:mod:`patchsync.serve.rdf_frames`); a log topic is refused naming ``PatchService``.
- ``PublishRdf``: each frame is one RDF message and becomes one patch adding its
  statements (a new id, ``prev`` the head) on the topic named by the ``topic`` metadata
  (or the one log topic served). A target topic is read-only.
- ``SubscribePatch`` / ``PublishPatch`` / ``Describe``: see ``proto/patchsync/v1/patch_service.proto``.

A subscriber that does not read is held by gRPC flow control: the handler waits in its
``write``, the topic keeps at most the subscriber's queue for it, and one that takes
nothing for ``--send-timeout`` seconds is dropped with ``RESOURCE_EXHAUSTED`` saying the
version to resume after (trailing metadata ``patchsync-resume-after``), so a stalled
reader holds the server's memory and a stream slot for a bounded time only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from patchsync._proto import grpc_pb2, grpc_pb2_grpc, patch_service_pb2, patch_service_pb2_grpc, rdf_pb2
from patchsync.errors import PatchsyncError, UsageError
from patchsync.logs.payloads import encode_patch, read_payload
from patchsync.options import PatchOptions
from patchsync.serve.auth import Access, bearer
from patchsync.serve.context import DoorContext
from patchsync.serve.errors import TooSlow
from patchsync.serve.patch_calls import (
    END,
    GROUP,
    MAX_BATCH_BYTES,
    RESUME_KEY,
    PublishTally,
    batch_bounds,
    refusal_of,
    start_of,
    take_group,
)
from patchsync.serve.patch_options import negotiate_patch
from patchsync.serve.patch_wire import batch_message, patch_message
from patchsync.serve.rdf_frames import FrameStatements, negotiate, reencode
from patchsync.serve.settings import Address
from patchsync.serve.topics import Entry, LogTopic, flatten, in_reader, thread_batches

DOOR = "grpc"
RDF_SERVICE = "eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService"
PATCH_SERVICE = "patchsync.v1.PatchService"
#: The metadata key naming the topic of a ``PublishRdf`` stream (its frames cannot).
TOPIC_KEY = "topic"
log = logging.getLogger("patchsync.serve")


def _metadata(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for item in context.invocation_metadata() or ():
        if item.key == key:
            value = item.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


class _ClientGone(Exception):
    """The call ended on the client's side while the server was writing to it."""


@dataclass(slots=True)
class _Call:
    """What a refusal of one call is counted and answered by: its method and topic (a
    publish stream learns its topic from its first message)."""

    method: str
    topic: str


class _Door:
    """What both servicers share: the serve context, and the boundary every method runs in."""

    def __init__(self, context: DoorContext) -> None:
        self.ctx = context

    @contextlib.asynccontextmanager
    async def boundary(self, rpc: grpc.aio.ServicerContext, call: _Call) -> AsyncIterator[None]:
        """Answer a refusal with its status (and count it); a bug is logged and answered
        ``INTERNAL`` with no text of it."""
        try:
            yield
        except grpc.aio.AbortError:
            raise
        except _ClientGone:
            return  # nobody to answer (only streaming methods write, and end here)
        except Exception as exc:
            self.ctx.refused(call.topic, exc)
            if not isinstance(exc, PatchsyncError):
                log.error("%s %s: internal error", call.method, call.topic, exc_info=exc)
            refusal = refusal_of(exc, call.method, call.topic)
            await rpc.abort(getattr(grpc.StatusCode, refusal.code), refusal.line, trailing_metadata=refusal.trailing)

    def authorize(self, rpc: grpc.aio.ServicerContext, call: _Call, access: Access) -> None:
        """The token check, before any message of the call is read."""
        self.ctx.authorize(bearer(_metadata(rpc, "authorization")), access, f"{call.method} {call.topic}".strip())
        self.ctx.refuse_if_stopping(f"{call.method} {call.topic}".strip())

    async def send(self, rpc: grpc.aio.ServicerContext, message: Any, call: _Call, resume_after: int | None) -> None:
        """Write one response; a reader that takes nothing for the send timeout is dropped."""
        timeout = self.ctx.settings.send_timeout
        try:
            await asyncio.wait_for(rpc.write(message), timeout)
        except grpc.aio.AbortError:
            raise
        except TimeoutError:
            raise TooSlow(
                f"{call.method} {call.topic}: the subscriber took nothing for {timeout:g} s and was dropped; "
                + (f"subscribe again after version {resume_after}" if resume_after is not None else "ask again"),
                resume_after=resume_after,
            ) from None
        except Exception as exc:
            # A write fails only once the call is over: the client cancelled or went away.
            raise _ClientGone from exc

    async def next_message(self, iterator: AsyncIterator[Any], call: _Call) -> Any:
        """The next message of a client stream (``None`` at its end); a publisher that sends
        nothing for the body timeout is dropped, so it cannot hold a stream slot."""
        timeout = self.ctx.settings.body_timeout
        try:
            return await asyncio.wait_for(anext(iterator, None), timeout)
        except TimeoutError:
            raise TooSlow(f"{call.method} {call.topic}: no message for {timeout:g} s; the stream was ended") from None


class RdfStreamServicer(_Door, grpc_pb2_grpc.RdfStreamServiceServicer):  # type: ignore[misc]
    """The Jelly gRPC streaming protocol's ``RdfStreamService``."""

    async def SubscribeRdf(self, request: Any, context: grpc.aio.ServicerContext) -> None:
        call = _Call("SubscribeRdf", request.topic)
        async with self.boundary(context, call):
            self.authorize(context, call, Access.READ)
            async with self.ctx.stream(DOOR, call.method, call.topic):
                topic = self.ctx.topics.target(call.topic, f"SubscribeRdf {call.topic}")
                options = negotiate(request.requested_options if request.HasField("requested_options") else None)
                snapshot = await topic.snapshot()
                frames = snapshot.frames
                if options is not None:
                    # Re-encoded as it is read: the snapshot is never held in memory whole.
                    stored = _blocking(frames, asyncio.get_running_loop())
                    frames = flatten(thread_batches(lambda: reencode(stored, options, f"topic {call.topic}"), batch=8))
                sent = self.ctx.metrics.bytes.labels(call.topic, "out")
                async with contextlib.aclosing(frames):
                    async for frame in frames:
                        sent.inc(len(frame))
                        await self.send(context, rdf_pb2.RdfStreamFrame.FromString(frame), call, None)

    async def PublishRdf(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        call = _Call("PublishRdf", _metadata(context, TOPIC_KEY) or self._only_log_topic())
        async with self.boundary(context, call):
            self.authorize(context, call, Access.WRITE)
            topic = self.ctx.topics.writable(call.topic, call.method)
            iterator = request_iterator.__aiter__()
            frame = await self.next_message(iterator, call)
            async with self.ctx.stream(DOOR, call.method, call.topic):
                statements = FrameStatements(f"PublishRdf {call.topic}")
                received = self.ctx.metrics.bytes.labels(call.topic, "in")
                while frame is not None:
                    self.ctx.refuse_if_stopping(f"PublishRdf {call.topic}")
                    data = frame.SerializeToString()
                    received.inc(len(data))
                    quads = await asyncio.to_thread(statements.frame, data)
                    if quads:
                        await topic.append_statements(quads)
                    frame = await self.next_message(iterator, call)
                return grpc_pb2.RdfStreamReceived()
        raise AssertionError("the boundary aborts")  # pragma: no cover

    def _only_log_topic(self) -> str:
        logs = self.ctx.topics.logs()
        return logs[0].name if len(logs) == 1 else ""


class PatchServicer(_Door, patch_service_pb2_grpc.PatchServiceServicer):  # type: ignore[misc]
    """patchsync's ``PatchService``: patch logs, caught up then live, and appends that keep the chain."""

    async def SubscribePatch(self, request: Any, context: grpc.aio.ServicerContext) -> None:
        call = _Call("SubscribePatch", request.topic)
        async with self.boundary(context, call):
            self.authorize(context, call, Access.READ)
            async with self.ctx.stream(DOOR, call.method, call.topic):
                await self._subscribe(request, context, call)

    async def _subscribe(self, request: Any, context: grpc.aio.ServicerContext, call: _Call) -> None:
        name = call.topic
        topic = self.ctx.topics.log(name, "SubscribePatch")
        start = start_of(request.start if request.HasField("start") else None)
        options = negotiate_patch(request.requested_options if request.HasField("requested_options") else None)
        subscribers = self.ctx.metrics.subscribers.labels(name)
        sent = self.ctx.metrics.bytes.labels(name, "out")
        limit, max_bytes = batch_bounds(request.max_batch, self.ctx.settings.max_message_bytes)
        last: int | None = None
        subscribers.inc()
        try:
            batches = topic.read_batches(start, follow=not request.stop_at_head, limit=limit, max_bytes=max_bytes)
            async with contextlib.aclosing(batches):
                async for batch in batches:
                    if options is not None:
                        batch = await in_reader(_reencode_batch, batch, options, name)
                    sent.inc(sum(len(e.payload) for e in batch))
                    response = patch_message(batch[0]) if limit == 1 else batch_message(batch)
                    before, last = last if last is not None else batch[0].version - 1, batch[-1].version
                    del batch  # while the write waits, the response's bytes alone hold the patches
                    await self.send(context, response, call, before)
        finally:
            subscribers.dec()

    async def PublishPatch(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        call = _Call("PublishPatch", "")
        async with self.boundary(context, call):
            # The token is in the metadata: checked before any message is read.
            self.authorize(context, call, Access.WRITE)
            iterator = request_iterator.__aiter__()
            first = await self.next_message(iterator, call)
            call.topic = first.topic if first is not None else ""
            topic = self.ctx.topics.writable(call.topic, call.method)
            async with self.ctx.stream(DOOR, call.method, call.topic):
                return await self._publish(topic, first, iterator, call)
        raise AssertionError("the boundary aborts")  # pragma: no cover

    async def _publish(self, topic: LogTopic, first: Any, iterator: AsyncIterator[Any], call: _Call) -> Any:
        tally = PublishTally(call.topic)
        received = self.ctx.metrics.bytes.labels(call.topic, "in")
        duplicates = self.ctx.metrics.duplicates.labels(call.topic)
        # The messages that arrived while the last group was appended are the next
        # group: one write for many patches when the publisher is ahead, none waiting
        # for it when not.
        arrived: asyncio.Queue[Any] = asyncio.Queue(GROUP)
        reader = asyncio.create_task(self._read_ahead(first, iterator, arrived, call))

        def ready() -> Any | None:
            return arrived.get_nowait() if not arrived.empty() else None

        try:
            ended = False
            while not ended:
                group = take_group(await arrived.get(), ready)
                if group.error is not None:
                    raise group.error
                ended = group.ended
                if not group.requests:
                    continue
                payloads = tally.payloads(group.requests, self.ctx.refuse_if_stopping)
                received.inc(sum(len(p) for p, _ in payloads))
                results = await topic.append_many(payloads)
                # The head as this group left it, read before anything else can append.
                duplicates.inc(tally.count(results, topic.describe()))
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        return patch_service_pb2.PublishPatchResponse(**tally.answer(topic.describe()))

    async def _read_ahead(
        self, first: Any, iterator: AsyncIterator[Any], arrived: asyncio.Queue[Any], call: _Call
    ) -> None:
        """Queue the requests of a stream as they arrive, then ``END`` (or the error that ended it)."""
        try:
            request = first
            while request is not None:
                await arrived.put(request)
                request = await self.next_message(iterator, call)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke: the appender raises it in its own task
            await arrived.put(exc)
            return
        await arrived.put(END)

    async def Describe(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        call = _Call("Describe", request.topic)
        async with self.boundary(context, call):
            self.authorize(context, call, Access.READ)
            async with self.ctx.stream(DOOR, call.method, call.topic):
                info = self.ctx.topics.get(call.topic).describe()
                return patch_service_pb2.TopicDescription(
                    topic=info.name, kind=info.kind, head=info.head or "", version=info.version
                )
        raise AssertionError("the boundary aborts")  # pragma: no cover


def _blocking(items: AsyncIterator[bytes], loop: asyncio.AbstractEventLoop) -> Iterator[bytes]:
    """``items`` for a worker thread: each one is fetched on the event loop ``loop``."""
    while True:
        try:
            yield asyncio.run_coroutine_threadsafe(anext(items), loop).result()  # type: ignore[arg-type]
        except StopAsyncIteration:
            return


def _reencode_batch(batch: list[Entry], options: PatchOptions, topic: str) -> list[Entry]:
    return [e._replace(payload=_reencode_patch(e.payload, options, topic, e.version)) for e in batch]


def _reencode_patch(payload: bytes, options: PatchOptions, topic: str, version: int) -> bytes:
    from patchsync.errors import EncodeError

    try:
        return encode_patch(read_payload(payload, f"topic {topic} version {version}"), options)
    except EncodeError as exc:
        raise UsageError(
            f"SubscribePatch {topic}: version {version} cannot be sent with the requested options: {exc}"
        ) from None


def _patch_service(servicer: PatchServicer) -> dict[str, grpc.RpcMethodHandler]:
    """``PatchService``'s handlers: those generated from the schema, except that
    ``SubscribePatch`` sends the bytes :mod:`patchsync.serve.patch_wire` made as they are
    (the generated registration cannot be overridden for one method)."""
    pb = patch_service_pb2
    return {
        "SubscribePatch": grpc.unary_stream_rpc_method_handler(
            servicer.SubscribePatch,
            request_deserializer=pb.SubscribePatchRequest.FromString,
            response_serializer=bytes,
        ),
        "PublishPatch": grpc.stream_unary_rpc_method_handler(
            servicer.PublishPatch,
            request_deserializer=pb.PublishPatchRequest.FromString,
            response_serializer=pb.PublishPatchResponse.SerializeToString,
        ),
        "Describe": grpc.unary_unary_rpc_method_handler(
            servicer.Describe,
            request_deserializer=pb.DescribeRequest.FromString,
            response_serializer=pb.TopicDescription.SerializeToString,
        ),
    }


def _check_free(address: Address) -> None:
    """Refuse an address this process cannot listen at, in one line, before gRPC tries (it
    writes a log line of its own on failing)."""
    if address.port == 0:
        return
    try:
        infos = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise UsageError(f"--listen {address}: {exc.strerror or exc}") from None
    family, kind, proto, _, where = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(where)
        except OSError as exc:
            raise UsageError(f"--listen {address}: cannot listen there ({exc.strerror or exc})") from None


class GrpcDoor:
    """The gRPC listener (``--listen HOST:PORT``) of one serve process."""

    def __init__(self, context: DoorContext, address: Address) -> None:
        self.ctx = context
        self.address = address
        self.server: grpc.aio.Server | None = None
        self.health = health.aio.HealthServicer()

    async def start(self) -> str:
        settings = self.ctx.settings
        limit = settings.max_message_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.max_send_message_length", limit),
                ("grpc.so_reuseport", 0),
                # A connection that has not finished its handshake in the header timeout,
                # or has had no call for the idle timeout, is closed.
                ("grpc.server_handshake_timeout_ms", int(settings.header_timeout * 1000)),
                ("grpc.max_connection_idle_ms", int(settings.idle_timeout * 1000)),
            ],
            # The process's own count (ServeContext.stream) refuses with a reason; this is
            # the transport's backstop, with room for health checks.
            maximum_concurrent_rpcs=settings.max_streams * 2 + 8,
        )
        grpc_pb2_grpc.add_RdfStreamServiceServicer_to_server(RdfStreamServicer(self.ctx), server)
        handlers = _patch_service(PatchServicer(self.ctx))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(PATCH_SERVICE, handlers),))
        server.add_registered_method_handlers(PATCH_SERVICE, handlers)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        target = str(self.address)
        _check_free(self.address)
        tls = self.ctx.tls
        try:
            if tls is not None:
                credentials = grpc.ssl_server_credentials([(tls.key_pem, tls.cert_pem)])
                port = server.add_secure_port(target, credentials)
            else:
                port = server.add_insecure_port(target)
        except RuntimeError:
            # grpcio raises "Failed to bind" (older ones returned 0): the address, not the
            # certificate, which was checked before (patchsync.serve.tls).
            port = 0
        if port == 0:
            raise UsageError(f"--listen {target}: cannot listen there (in use, or not an address of this machine)")
        await server.start()
        self.server = server
        for service in ("", RDF_SERVICE, PATCH_SERVICE):
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        return str(Address(self.address.host, port))

    async def stop(self, grace: float) -> None:
        if self.server is None:
            return
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        self.server = None


__all__ = [
    "MAX_BATCH_BYTES",
    "PATCH_SERVICE",
    "RDF_SERVICE",
    "RESUME_KEY",
    "TOPIC_KEY",
    "GrpcDoor",
    "PatchServicer",
    "RdfStreamServicer",
]
