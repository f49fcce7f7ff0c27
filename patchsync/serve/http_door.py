"""The HTTP front door: RDF Delta's patch log protocol, a change feed, metrics and health.

``patchsync serve --http HOST:PORT``, on aiohttp, over the process's topics
(docs/decisions/0001-serve-and-topics.md; the protocol facts: 0002-rdf-delta-http.md):

- ``POST /$/rpc``: RDF Delta's JSON operations (:mod:`patchsync.serve.delta_protocol`), its
  patch log lock among them (:mod:`patchsync.serve.delta_locks`);
  ``GET /$/ping``: the ``ping`` answer;
- ``POST /{ref}``: append one patch (RDF Patch text, or Jelly-Patch as
  ``application/x-jelly-rdf-patch``); the answer is ``{"version", "location"}``; a patch
  whose ``prev`` is not the head gets RDF Delta's 400 with a ``patch-conflict`` JSON body
  and nothing is appended; a patch id already in the log gets its version again;
- ``OPTIONS /{ref}``: 204 with the methods the topic takes in ``Allow`` (``POST`` only for a
  log topic: the catalog's one rule, as an append meets it) and its kind in ``Patchsync-Kind``:
  what a writer asks before writing, as a gRPC client asks ``Describe``;
- ``GET /{ref}/{version}``, ``GET /{ref}/{patch-id}`` (also ``?version=N``, ``?patch=ID``):
  one patch, as RDF Patch text unless ``Accept`` prefers Jelly-Patch;
- ``GET /{ref}/init`` (RDF Delta's ``GET /init-data?datasource=REF`` too): the bootstrap
  snapshot, delimited Jelly-RDF frames (N-Quads when ``Accept`` prefers them): a target
  topic's state now, or the snapshot kept beside a log topic
  (:mod:`patchsync.serve.datasource_files`), its position rewritten for this log and the
  version it stands at in ``Patchsync-Version`` (the change feed continues after it);
- ``GET /{ref}/changes?after=V&limit=N&wait=S``: the patches after version ``V`` in order,
  at most ``N`` and about 4 MiB; when there is none yet, waits up to ``S`` seconds for one
  (a long poll); framed by :mod:`patchsync.serve.feed` (JSON, or binary records), written
  as it is framed;
- ``GET /$/metrics`` (the process's one registry), ``/$/healthz``, ``/$/ready``.

Every request but ``/$/healthz``, ``/$/ready`` and ``/$/ping`` passes the process's token
check (``Authorization: Bearer``) first, whatever its path, then is routed
(:mod:`patchsync.serve.http_routes`: its topic, the access it needs, the largest body it
may send), and only then is its body read: within the body timeout at the minimum rate,
outside the stream limit, which it joins once its body is whole. Every refusal is answered
with the status of the one error mapping (:func:`status_of`) and one line of
``text/plain``, counted by reason; a bug is logged and answered 500 without its text. The
connections themselves are bounded by :mod:`patchsync.serve.http_listener`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web

from patchsync.codec.framing import encode_varint
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.logs.payloads import NT_TERMS, encode_patch, text_options
from patchsync.serve import datasource_files as df
from patchsync.serve import delta_protocol as dp
from patchsync.serve import feed, rpc
from patchsync.serve import http_routes as routes
from patchsync.serve.answers import (
    Answer,
    appended_answer,
    conflict_answer,
    json_answer,
    line_answer,
    patch_answer,
    service_answer,
)
from patchsync.serve.auth import Access, bearer
from patchsync.serve.catalog import Use
from patchsync.serve.connections import ConnectionTable, body_deadline, connection_budget
from patchsync.serve.context import DoorContext
from patchsync.serve.delta_locks import LockTable
from patchsync.serve.errors import NotFound, OverLimit, TooBusy, TooSlow, client_message, status_of
from patchsync.serve.feed import patch_text
from patchsync.serve.http_listener import LINGER, Listener, http_log
from patchsync.serve.settings import Address
from patchsync.serve.target_topic import read_frames
from patchsync.serve.topics import INLINE_BYTES, LogTopic, Start, flatten, in_reader, thread_batches

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = feed.FEED_BINARY

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: What a request's refusal is counted under, and its answer once its headers are sent.
TOPIC = web.RequestKey("topic", str)
RESPONSE = web.RequestKey("response", web.StreamResponse)

log = logging.getLogger("patchsync.serve")


def text_payload(body: bytes, where: str) -> bytes:
    """RDF Patch text as a one-patch Jelly-Patch stream (the topic checks it whole)."""
    events = read_rdfp(body, NT_TERMS, source=where)
    return encode_patch(events, text_options(events))


async def _headers_only(response: web.StreamResponse) -> web.StreamResponse:
    """End a streamed answer to ``HEAD`` after its headers: a server must send no content
    with it (RFC 9110 §9.3.2), and aiohttp writes whatever a handler writes."""
    await response.write_eof()
    return response


class HttpDoor:
    """The HTTP listener of one serve process (see the module docstring)."""

    def __init__(self, context: DoorContext, address: Address) -> None:
        self.ctx = context
        self.address = address
        self.settings = context.settings
        self.metrics = context.metrics
        #: The ``uri`` given to ``create_datasource``, by name; kept with the data source
        #: (:mod:`patchsync.serve.datasource_files`), read again on starting.
        self.uris: dict[str, str] = {}
        #: RDF Delta's patch log locks (advisory: an append does not need the lock).
        self.locks = LockTable()
        self._runner: web.AppRunner | None = None
        self._listener: Listener | None = None
        #: What each kind of route (:mod:`patchsync.serve.http_routes`) is answered by.
        self._handlers: dict[str, Callable[[web.Request, routes.Route], Awaitable[web.StreamResponse]]] = {
            routes.SERVICE: self._service,
            routes.RPC: self._rpc,
            routes.APPEND: self._append,
            routes.FETCH: self._fetch,
            routes.CHANGES: self._changes,
            routes.INIT: self._init,
            routes.ALLOW: self._allow,
        }

    # -- listening ---------------------------------------------------------------------

    async def start(self) -> str:
        for topic in self.ctx.topics.logs():
            uri = await asyncio.to_thread(df.read_uri, topic)
            if uri:
                self.uris[topic.name] = uri
        settings = self.settings
        app = web.Application(client_max_size=settings.max_message_bytes, middlewares=[self._errors])
        app.router.add_route("*", "/{path:.*}", self.dispatch)
        handler_args: dict[str, Any] = {
            "access_log": None,
            "logger": http_log,
            "keepalive_timeout": settings.idle_timeout,
            "lingering_time": LINGER,
        }
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=settings.grace, **handler_args)
        await self._runner.setup()
        table = ConnectionTable(settings.max_client_connections, connection_budget())
        self._listener = Listener(
            self._runner,
            table,
            header_timeout=settings.header_timeout,
            on_refused=self._connection_refused,
            handler_args=handler_args,
        )
        context = self.ctx.tls.ssl_context() if self.ctx.tls is not None else None
        try:
            port = await self._listener.start(self.address.host, self.address.port, context)
        except OSError as exc:
            await self._runner.cleanup()
            raise UsageError(f"--http {self.address}: {exc.strerror or exc}") from None
        return str(Address(self.address.host, port))

    async def stop(self, grace: float) -> None:
        if self._listener is not None:
            await self._listener.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _connection_refused(self, why: str) -> None:
        self.ctx.refused("", TooBusy(why))

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        guard = self._listener.guard_of(request.protocol) if self._listener is not None else None
        if guard is not None:
            guard.request_started()
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except ConnectionError:
            # The client went away mid-request: nobody to answer, nothing to log. (aiohttp
            # would log it as a server error; an answer it cannot send it drops quietly.)
            return web.Response(status=400, text="the connection was lost\n")
        except Exception as exc:
            self.ctx.refused(request.get(TOPIC, ""), exc)
            if not isinstance(exc, PatchsyncError):
                log.error("%s %s: internal error", request.method, request.path[:200], exc_info=exc)
            started: web.StreamResponse | None = request.get(RESPONSE)
            if started is not None and started.prepared:
                # Part of the answer is sent: nothing can be said, the connection ends.
                if request.transport is not None:
                    request.transport.abort()
                return started
            response = self._answer(line_answer(status_of(exc).http, client_message(exc)))
            if isinstance(exc, TooSlow | OverLimit):
                response.force_close()  # the rest of the body is not read
            return response
        finally:
            if guard is not None:
                guard.request_ended()

    # -- routing -----------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if routes.needs_token(path):
            # Before anything else, so that no path tells anything without a token.
            self._authorize(request, Access.READ)
        route = routes.route(
            request.method, path, request.query, [t.name for t in self.ctx.topics], self.settings.max_message_bytes
        )
        request[TOPIC] = route.topic
        if route.access is Access.WRITE:
            self._authorize(request, Access.WRITE)
        declared = request.content_length
        if declared is not None and declared > route.body_limit:
            raise OverLimit(
                f"{request.method} {path}: a body of {declared} bytes, over the {route.body_limit} byte limit "
                "of this request"
            )
        return await self._handlers[route.kind](request, route)

    def _authorize(self, request: web.Request, needed: Access) -> None:
        what = f"{request.method} {dp.shorten(request.path)}"
        self.ctx.authorize(bearer(request.headers.get("Authorization")), needed, what)

    async def _service(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        name = route.service
        if name == "metrics":
            body = await asyncio.to_thread(self.metrics.render)
            return self._answer(Answer(200, {"Content-Type": self.metrics.content_type}, body))
        errors = {t.name: t.error for t in self.ctx.topics if t.error}
        required = self.settings.tokens.required
        return self._answer(service_answer(name, self.ctx.stopping, errors, tokens_required=required))

    async def _body(self, request: web.Request, limit: int) -> bytes:
        """The request body, at most ``limit`` bytes (its declared length was checked), read
        within the body timeout at the minimum rate (:func:`body_deadline`)."""
        loop = asyncio.get_running_loop()
        settings = self.settings
        started = loop.time()
        body = bytearray()
        while True:
            deadline = body_deadline(started, len(body), settings.body_timeout, settings.min_body_rate)
            try:
                chunk = await asyncio.wait_for(request.content.readany(), max(deadline - loop.time(), 0))
            except TimeoutError:
                raise TooSlow(
                    f"{request.method} {dp.shorten(request.path)}: the body came too slowly ({len(body)} bytes in "
                    f"{loop.time() - started:.0f} s; at least {settings.min_body_rate} bytes a second after "
                    f"{settings.body_timeout:g} s)"
                ) from None
            if not chunk:
                return bytes(body)
            body += chunk
            if len(body) > limit:
                raise OverLimit(f"{request.method} {dp.shorten(request.path)}: a body over the {limit} byte limit")

    async def _send(self, request: web.Request, response: web.StreamResponse, chunk: bytes) -> None:
        """Write part of a streamed answer; a reader that takes nothing for the send timeout
        is dropped (the connection ends)."""
        timeout = self.settings.send_timeout
        try:
            await asyncio.wait_for(response.write(chunk), timeout)
        except TimeoutError:
            raise TooSlow(f"GET {dp.shorten(request.path)}: the reader took nothing for {timeout:g} s") from None

    async def _send_all(self, request: web.Request, response: web.StreamResponse, parts: list[bytes]) -> int:
        """Write ``parts`` (emptied as they go out); the bytes sent."""
        sent = 0
        parts.reverse()
        while parts:
            part = parts.pop()
            sent += len(part)
            await self._send(request, response, part)
        return sent

    async def _stream(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        """A streamed answer with ``headers``, its headers sent."""
        response = web.StreamResponse(headers=headers)
        request[RESPONSE] = response
        await response.prepare(request)
        return response

    def _answer(self, answer: Answer) -> web.Response:
        """A whole answer of the pure core as aiohttp's response."""
        return web.Response(status=answer.status, body=answer.body, headers=answer.headers)

    # -- RPC ---------------------------------------------------------------------------

    async def _rpc(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        # The token was checked (read) before the body was read; a write op needs more.
        call = dp.parse_rpc(await self._body(request, route.body_limit))
        if rpc.needs_write(call):
            self._authorize(request, Access.WRITE)
        with self.metrics.timed("http", f"rpc {call.op}", ""):
            logs = {t.name: t.describe() for t in self.ctx.topics.logs()}
            done = rpc.step(call, rpc.Datasources(logs, self.uris, self.locks))
            if isinstance(done, rpc.Create):
                self.ctx.refuse_if_stopping(f"create_datasource {dp.shorten(done.name)}")
                topic = await self.ctx.create_topic(done.name)
                if done.uri:
                    await asyncio.to_thread(df.write_uri, topic, done.uri)
                    self.uris[done.name] = done.uri
                done = rpc.created(done.name)
            elif isinstance(done, rpc.Remove):
                await self.ctx.remove_topic(done.name)
                self.uris.pop(done.name, None)
                self.locks.forget(done.name)
                done = rpc.removed(done.name)
            return self._answer(json_answer(done))

    # -- appending ---------------------------------------------------------------------

    async def _allow(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        topics = self.ctx.topics
        kind = topics.get(route.topic).kind
        methods = "OPTIONS, GET, HEAD, POST, PATCH" if topics.offers(route.topic, Use.APPEND) else "OPTIONS, GET, HEAD"
        return self._answer(Answer(204, {"Allow": methods, "Patchsync-Kind": kind}))

    async def _append(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        name = route.topic
        where = f"POST {request.path}"
        topic = self.ctx.topics.writable(name, where)
        self.ctx.refuse_if_stopping(where)
        kind = dp.body_format(request.headers.get("Content-Type"))
        # The body is read before a stream slot is taken: a client sending it slowly holds
        # a connection (bounded per client, and by the body timeout), not a slot.
        body = await self._body(request, route.body_limit)
        async with self.ctx.stream("http", "append", name):
            self.ctx.refuse_if_stopping(where)
            self.metrics.bytes.labels(name, "in").inc(len(body))
            try:
                if kind == "jellyp":
                    appended = await topic.append(body, where=where)
                else:
                    events = (
                        read_rdfp(body, NT_TERMS, source=where)
                        if len(body) <= INLINE_BYTES
                        else await asyncio.to_thread(read_rdfp, body, NT_TERMS, source=where)
                    )
                    appended = await topic.append_events(events, where=where)
            except ChainError as exc:
                self.ctx.refused(name, exc)
                return self._answer(conflict_answer(topic.describe(), self.uris.get(name, ""), str(exc)))
            if appended.duplicate:
                self.metrics.duplicates.labels(name).inc()
            return self._answer(appended_answer(request.path, appended.version, duplicate=appended.duplicate))

    # -- reading -----------------------------------------------------------------------

    async def _fetch(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        name, ref = route.topic, route.ref
        assert ref is not None  # a fetch route names what it fetches
        topic = self.ctx.topics.log(name, "fetching a patch")
        async with self.ctx.stream("http", "fetch", name):
            if ref.kind == "version":
                version: int | None = ref.version
                missing = f"version={ref.version}"
            else:
                candidates = (topic.version_of(c) for c in dp.patch_id_candidates(ref.patch_id))
                version = next((v for v in candidates if v is not None), None)
                missing = f"id={dp.shorten(ref.patch_id)}"
            jelly = dp.accepts_jelly(request.headers.get("Accept"))
            body: bytes | None = None
            if version is not None and jelly:
                entry = await topic.fetch(version)
                body = entry.payload if entry is not None else None
            elif version is not None:  # made from the patch as the log holds it, no Jelly in between
                text = await topic.fetch_text(version)
                body = text.encode() if text is not None else None
            if version is None or body is None:
                raise NotFound(
                    f"GET {dp.shorten(request.path)}: Patch not found: {missing} (the head is version {topic.version})"
                )
            self.metrics.bytes.labels(name, "out").inc(len(body))
            return self._answer(patch_answer(version, body, jelly=jelly))

    async def _changes(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        name = route.topic
        topic = self.ctx.topics.log(name, "the change feed")
        async with self.ctx.stream("http", "changes", name):
            query = dp.feed_query(request.query)
            if query.after > topic.version:
                raise dp.BadRequest(
                    f"GET {request.path}: after={query.after} is beyond the head (version {topic.version})"
                )
            if request.method != "HEAD":  # a HEAD answers now, with the headers a GET would
                await self._wait_for_news(topic, query)
            binary = feed.FEED_BINARY in (request.headers.get("Accept") or "")
            info = topic.describe()
            answer = feed.FeedAnswer(query.after, query.limit, binary=binary)
            headers = feed.binary_headers(query.after, info.version) if binary else {"Content-Type": dp.JSON}
            response = await self._stream(request, headers)
            if request.method == "HEAD":
                return await _headers_only(response)
            sent = 0
            # Written as read: the first patch goes out once it is read, not once the batch is
            # (a failure after it ends the connection, the middleware's rule, docs/serving.md).
            batches = topic.read_batches(
                Start.after_version(query.after),
                follow=False,
                limit=feed.STEP,
                until=query.after + query.limit,
                first_alone=True,
            )
            parts = [answer.start()]
            async with contextlib.aclosing(batches):
                async for batch in batches:
                    taken = answer.take(batch) if binary else await in_reader(answer.take, batch)
                    parts = feed.coalesce(parts + taken)
                    del batch, taken  # while the write waits, the parts alone hold the patches
                    sent += await self._send_all(request, response, parts)
                    if answer.done:
                        break
            parts = feed.coalesce([*parts, answer.end((info.version, info.head))])
            sent += await self._send_all(request, response, parts)
            await response.write_eof()
            self.metrics.bytes.labels(name, "out").inc(sent)
            return response

    async def _wait_for_news(self, topic: LogTopic, query: dp.FeedQuery) -> None:
        """When the log holds nothing after ``after``, wait up to ``wait`` seconds for an append."""
        if topic.version > query.after or query.wait <= 0 or self.ctx.stopping:
            return
        follower = topic.read(Start.after_version(query.after), follow=True)
        try:
            await asyncio.wait_for(anext(follower, None), query.wait)
        except TimeoutError:
            return
        finally:
            await follower.aclose()

    async def _init(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        name = route.topic
        if not self.ctx.topics.offers(name, Use.STATE):
            # A log's bootstrap: the snapshot file kept beside it (RDF Delta's init-data).
            return await self._log_init(request, self.ctx.topics.log(name, f"GET {request.path}"))
        topic = self.ctx.topics.target(name, f"GET {request.path}")
        # N-Quads when asked for, as a log topic's bootstrap answers (the frames are turned
        # into text in a reader thread, a frame at a time).
        text = df.NQuadsOfFrames(name) if dp.accepts_nquads(request.headers.get("Accept")) else None
        async with self.ctx.stream("http", "init", name):
            snapshot = await topic.snapshot()
            response = await self._stream(request, {"Content-Type": dp.JELLY_RDF if text is None else dp.NQUADS})
            sent = 0
            async with contextlib.aclosing(snapshot.frames) as frames:
                async for frame in frames:
                    chunk = encode_varint(len(frame)) + frame if text is None else await in_reader(text.feed, frame)
                    sent += len(chunk)
                    await self._send(request, response, chunk)
            if text is not None:
                tail = await in_reader(text.close)
                sent += len(tail)
                await self._send(request, response, tail)
            self.metrics.bytes.labels(name, "out").inc(sent)
            await response.write_eof()
            return response

    async def _log_init(self, request: web.Request, topic: LogTopic) -> web.StreamResponse:
        """A log topic's bootstrap snapshot (:mod:`patchsync.serve.datasource_files`): Jelly-RDF
        with the position rewritten for this log, or N-Quads; the version it stands at in
        ``Patchsync-Version`` (the change feed continues after it)."""
        name = topic.name
        async with self.ctx.stream("http", "init", name):
            path = df.init_path(topic)
            if path is None:
                raise NotFound(
                    f"GET {request.path}: data source {name} keeps no bootstrap snapshot (a NATS stream has no "
                    "directory here); start a replica from a target topic's snapshot (--base "
                    "http://HOST:PORT/TARGET/init) or from a snapshot file (--base FILE)"
                )
            if not path.is_file():
                raise NotFound(
                    f"GET {request.path}: data source {name} has no bootstrap snapshot "
                    f"(patchsync snapshot -o {path} from a replica of it makes one)"
                )
            address = self._address_of(request, name)
            position, version = await asyncio.to_thread(df.snapshot_version, topic, path)
            served = df.served_position(position, version, address)
            nquads = dp.accepts_nquads(request.headers.get("Accept"))

            def chunks() -> Iterator[bytes]:
                frames = read_frames(path)
                return df.nquads_chunks(frames, str(path)) if nquads else df.jelly_chunks(frames, served)

            headers = {
                "Content-Type": dp.NQUADS if nquads else dp.JELLY_RDF,
                "Patchsync-Version": str(version),
                "Patchsync-Head": position.head or "",
            }
            response = await self._stream(request, headers)
            if request.method == "HEAD":
                return await _headers_only(response)
            sent = 0
            async with contextlib.aclosing(flatten(thread_batches(chunks, batch=8))) as parts:
                async for chunk in parts:
                    sent += len(chunk)
                    await self._send(request, response, chunk)
            self.metrics.bytes.labels(name, "out").inc(sent)
            await response.write_eof()
            return response

    def _address_of(self, request: web.Request, name: str) -> str:
        """This log's address as the client reached it (its ``Host``), for the snapshot's
        position; a ``Host`` that is not ``HOST[:PORT]`` is the client's fault (400)."""
        # Imported here: the HTTP client (and the gRPC one behind it) is no part of
        # answering the first request, and costs start-up (decision 0024).
        from patchsync.remote.http_client import parse_http_url

        scheme = "https" if self.ctx.tls is not None else "http"
        try:
            return str(parse_http_url(f"{scheme}://{request.host}/{name}"))
        except (UsageError, ValueError):
            raise dp.BadRequest(f"GET {request.path}: Host {dp.shorten(request.host)!r} is not HOST[:PORT]") from None


__all__ = ["FEED_BINARY", "HttpDoor", "patch_text", "text_payload"]
