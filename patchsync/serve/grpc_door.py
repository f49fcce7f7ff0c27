"""The gRPC front door: the Jelly ``RdfStreamService``, patchsync's ``PatchService``, health.

An adapter over the topics (docs/decisions/0001-serve-and-topics.md): each method reads
its request, checks the token (``authorization: Bearer TOKEN`` metadata), calls one topic
operation and maps a refusal to its status (:mod:`patchsync.serve.errors`).

- ``SubscribeRdf``: a target topic's snapshot as Jelly-RDF frames, the position in the
  first frame's metadata, ``requested_options`` honoured or refused naming the option
  (:mod:`patchsync.serve.rdf_frames`); a log topic is refused naming ``PatchService``.
- ``PublishRdf``: each frame is one RDF message and becomes one patch adding its
  statements (a new id, ``prev`` the head) on the topic named by the ``topic`` metadata
  (or the one log topic served). A target topic is read-only.
- ``SubscribePatch`` / ``PublishPatch`` / ``Describe``: see ``proto/patchsync/v1/patch_service.proto``.

A subscriber that does not read is held by gRPC flow control: the handler waits in its
``write`` and the topic keeps at most the subscriber's queue for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from patchsync._proto import grpc_pb2, grpc_pb2_grpc, patch_service_pb2, patch_service_pb2_grpc, rdf_pb2
from patchsync.errors import PatchsyncError, UsageError
from patchsync.options import PatchOptions, StatementType
from patchsync.serve.auth import Access, bearer
from patchsync.serve.errors import Forbidden, WrongKind, status_of
from patchsync.serve.rdf_frames import FrameStatements, negotiate, reencode
from patchsync.serve.settings import Address
from patchsync.serve.topics import Entry, LogTopic, Start, TargetTopic, flatten, thread_batches
from patchsync.streams.payloads import encode_patch, read_payload

DOOR = "grpc"
RDF_SERVICE = "eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService"
PATCH_SERVICE = "patchsync.v1.PatchService"
#: The metadata key naming the topic of a ``PublishRdf`` stream (its frames cannot).
TOPIC_KEY = "topic"
#: Most patches appended in one write by a ``PublishPatch`` stream.
GROUP = 64
#: Most patches in one ``SubscribePatch`` response, whatever the subscriber asks.
MAX_BATCH = 1024
#: Most payload bytes in one ``SubscribePatch`` response (unless one patch is larger).
MAX_BATCH_BYTES = 4 << 20


def _metadata(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for item in context.invocation_metadata() or ():
        if item.key == key:
            value = item.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


class _Door:
    """What both servicers share: the serve context, and the guard every method runs in."""

    def __init__(self, context: Any) -> None:
        self.ctx = context

    @contextlib.asynccontextmanager
    async def guard(
        self, rpc: grpc.aio.ServicerContext, method: str, topic: str, access: Access
    ) -> AsyncIterator[None]:
        """Authenticate, count the stream against the limits, and answer a refusal with its status."""
        try:
            self.ctx.authorize(bearer(_metadata(rpc, "authorization")), access, f"{method} {topic}")
            self.ctx.refuse_if_stopping(f"{method} {topic}")
            async with self.ctx.stream(DOOR, method, topic):
                yield
        except PatchsyncError as exc:
            await rpc.abort(getattr(grpc.StatusCode, status_of(exc).grpc), str(exc))

    def log_topic(self, name: str, service: str) -> LogTopic:
        return self.ctx.topics.log(name, service)  # type: ignore[no-any-return]


class RdfStreamServicer(_Door, grpc_pb2_grpc.RdfStreamServiceServicer):  # type: ignore[misc]
    """The Jelly gRPC streaming protocol's ``RdfStreamService``."""

    async def SubscribeRdf(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        name = request.topic
        async with self.guard(context, "SubscribeRdf", name, Access.READ):
            topic = self.ctx.topics.get(name)
            if not isinstance(topic, TargetTopic):
                raise WrongKind(
                    f"SubscribeRdf {name}: a log topic streams patches, not RDF: subscribe with "
                    f"{PATCH_SERVICE}/SubscribePatch"
                )
            options = negotiate(request.requested_options if request.HasField("requested_options") else None)
            snapshot = await topic.snapshot()  # type: ignore[attr-defined]
            frames = snapshot.frames
            if options is not None:
                # Re-encoded as it is read: the snapshot is never held in memory whole.
                stored = _blocking(frames, asyncio.get_running_loop())
                frames = flatten(thread_batches(lambda: reencode(stored, options, f"topic {name}"), batch=8))
            sent = self.ctx.metrics.bytes.labels(name, "out")
            async for frame in frames:
                sent.inc(len(frame))
                yield rdf_pb2.RdfStreamFrame.FromString(frame)

    async def PublishRdf(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        name = _metadata(context, TOPIC_KEY) or self._only_log_topic()
        async with self.guard(context, "PublishRdf", name, Access.WRITE):
            topic = self.ctx.topics.get(name)
            if not isinstance(topic, LogTopic):
                raise Forbidden(f"PublishRdf {name}: a target topic is read-only")
            statements = FrameStatements(f"PublishRdf {name}")
            received = self.ctx.metrics.bytes.labels(name, "in")
            async for frame in request_iterator:
                self.ctx.refuse_if_stopping(f"PublishRdf {name}")
                data = frame.SerializeToString()
                received.inc(len(data))
                quads = await asyncio.to_thread(statements.frame, data)
                if quads:
                    await topic.append_statements(quads)
            return grpc_pb2.RdfStreamReceived()
        raise AssertionError("guard aborts")  # pragma: no cover

    def _only_log_topic(self) -> str:
        logs = [t.name for t in self.ctx.topics if isinstance(t, LogTopic)]
        return logs[0] if len(logs) == 1 else ""


class PatchServicer(_Door, patch_service_pb2_grpc.PatchServiceServicer):  # type: ignore[misc]
    """patchsync's ``PatchService``: patch logs, caught up then live, and appends that keep the chain."""

    async def SubscribePatch(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        name = request.topic
        async with self.guard(context, "SubscribePatch", name, Access.READ):
            topic = self.log_topic(name, "SubscribePatch")
            start = _start(request.start) if request.HasField("start") else Start.beginning()
            options = _patch_options(request.requested_options) if request.HasField("requested_options") else None
            subscribers = self.ctx.metrics.subscribers.labels(name)
            sent = self.ctx.metrics.bytes.labels(name, "out")
            subscribers.inc()
            limit = min(request.max_batch, MAX_BATCH) if request.max_batch > 1 else 1
            # A response stays well under the message limit (a larger patch goes alone), and
            # a subscriber's few buffered responses stay small.
            max_bytes = min(self.ctx.settings.max_message_bytes // 2, MAX_BATCH_BYTES)
            message = patch_service_pb2.PatchMessage
            try:
                batches = topic.read_batches(start, follow=not request.stop_at_head, limit=limit, max_bytes=max_bytes)
                async with contextlib.aclosing(batches):
                    async for batch in batches:
                        if options is not None:
                            batch = await asyncio.to_thread(_reencode_batch, batch, options, name)
                        sent.inc(sum(len(e.payload) for e in batch))
                        patches = [message(version=e.version, patch_id=e.patch_id, patch=e.payload) for e in batch]
                        yield patches[0] if limit == 1 else message(batch=patches)
            finally:
                subscribers.dec()

    async def PublishPatch(self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        iterator = request_iterator.__aiter__()
        first = await anext(iterator, None)
        name = first.topic if first is not None else ""
        async with self.guard(context, "PublishPatch", name, Access.WRITE):
            topic = self.ctx.topics.get(name)
            if not isinstance(topic, LogTopic):
                raise Forbidden(f"PublishPatch {name}: a target topic is read-only")
            appended = duplicates = 0
            received = self.ctx.metrics.bytes.labels(name, "in")
            number = 0
            # The messages that arrived while the last group was appended are the next
            # group: one write for many patches when the publisher is ahead, none waiting
            # for it when not.
            arrived: asyncio.Queue[Any] = asyncio.Queue(GROUP)
            reader = asyncio.create_task(_read_ahead(first, iterator, arrived))
            try:
                ended = False
                while not ended:
                    group = [await arrived.get()]
                    while not arrived.empty() and len(group) < GROUP:
                        group.append(arrived.get_nowait())
                    if group[-1] is None:
                        group.pop()
                        ended = True
                    if not group:
                        continue
                    if isinstance(group[-1], BaseException):
                        raise group[-1]
                    payloads = []
                    for request in group:
                        number += 1
                        if request.topic and request.topic != name:
                            raise UsageError(
                                f"PublishPatch {name} message {number}: names topic {request.topic}; "
                                "one stream, one topic"
                            )
                        self.ctx.refuse_if_stopping(f"PublishPatch {name} message {number}")
                        received.inc(len(request.patch))
                        payloads.append((request.patch, f"PublishPatch {name} message {number}"))
                    for result in await topic.append_many(payloads):
                        if result.duplicate:
                            duplicates += 1
                            self.ctx.metrics.duplicates.labels(name).inc()
                        else:
                            appended += 1
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            info = topic.describe()
            return patch_service_pb2.PublishPatchResponse(
                version=info.version, head=info.head or "", appended=appended, duplicates=duplicates
            )
        raise AssertionError("guard aborts")  # pragma: no cover

    async def Describe(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with self.guard(context, "Describe", request.topic, Access.READ):
            info = self.ctx.topics.get(request.topic).describe()
            return patch_service_pb2.TopicDescription(
                topic=info.name, kind=info.kind, head=info.head or "", version=info.version
            )
        raise AssertionError("guard aborts")  # pragma: no cover


def _blocking(items: AsyncIterator[bytes], loop: asyncio.AbstractEventLoop) -> Iterator[bytes]:
    """``items`` for a worker thread: each one is fetched on the event loop ``loop``."""
    while True:
        try:
            yield asyncio.run_coroutine_threadsafe(anext(items), loop).result()  # type: ignore[arg-type]
        except StopAsyncIteration:
            return


async def _read_ahead(first: Any, iterator: AsyncIterator[Any], arrived: asyncio.Queue[Any]) -> None:
    """Queue the requests of a stream as they arrive, then ``None`` (or the error that ended it)."""
    try:
        request = first
        while request is not None:
            await arrived.put(request)
            request = await anext(iterator, None)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the stream broke: the appender raises it in its own task
        await arrived.put(exc)
        return
    await arrived.put(None)


def _start(start: Any) -> Start:
    which = start.WhichOneof("position")
    if which == "after_id":
        return Start.after_patch(start.after_id)
    if which == "after_version":
        return Start.after_version(start.after_version)
    if which == "now":
        return Start.now()
    return Start.beginning()


def _patch_options(requested: Any) -> PatchOptions | None:
    """The options to re-encode patches with, or ``None`` when the request asks for nothing."""
    if requested.ByteSize() == 0:
        return None
    defaults = PatchOptions()
    names = requested.max_name_table_size or defaults.max_name_table_size
    if names < 8:
        raise UsageError(f"requested_options.max_name_table_size {names}: the spec's minimum is 8")
    statement = StatementType(requested.statement_type) if requested.statement_type else defaults.statement_type
    return PatchOptions(
        statement_type=statement,
        rdf_star=requested.rdf_star,
        generalized_statements=requested.generalized_statements,
        max_name_table_size=min(names, defaults.max_name_table_size),
        max_prefix_table_size=min(requested.max_prefix_table_size or 150, defaults.max_prefix_table_size),
        max_datatype_table_size=min(requested.max_datatype_table_size or 32, defaults.max_datatype_table_size),
    )


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


class GrpcDoor:
    """The gRPC listener (``--listen HOST:PORT``) of one serve process."""

    def __init__(self, context: Any, address: Address) -> None:
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
            ],
            # The process's own count (ServeContext.stream) refuses with a reason; this is
            # the transport's backstop, with room for health checks.
            maximum_concurrent_rpcs=settings.max_streams * 2 + 8,
        )
        grpc_pb2_grpc.add_RdfStreamServiceServicer_to_server(RdfStreamServicer(self.ctx), server)
        patch_service_pb2_grpc.add_PatchServiceServicer_to_server(PatchServicer(self.ctx), server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        target = str(self.address)
        if settings.tls:
            credentials = grpc.ssl_server_credentials([(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())])
            port = server.add_secure_port(target, credentials)
        else:
            port = server.add_insecure_port(target)
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


__all__ = ["PATCH_SERVICE", "RDF_SERVICE", "TOPIC_KEY", "GrpcDoor", "PatchServicer", "RdfStreamServicer"]
