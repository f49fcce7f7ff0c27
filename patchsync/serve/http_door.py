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
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web

from patchsync.codec.framing import encode_varint
from patchsync.codec.rdfp import read_rdfp, write_rdfp
from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.events import Options
from patchsync.logs.payloads import NT_TERMS, encode_patch, read_payload, text_options
from patchsync.remote.http_client import parse_http_url
from patchsync.serve import datasource_files as df
from patchsync.serve import delta_protocol as dp
from patchsync.serve import feed
from patchsync.serve import http_routes as routes
from patchsync.serve.auth import Access, bearer
from patchsync.serve.connections import ConnectionTable, body_deadline, connection_budget
from patchsync.serve.delta_locks import LockTable
from patchsync.serve.errors import NotFound, OverLimit, TooBusy, TooSlow, UnknownTopic, client_message, status_of
from patchsync.serve.http_listener import LINGER, Listener, http_log
from patchsync.serve.settings import Address
from patchsync.serve.target_topic import read_frames
from patchsync.serve.topics import Entry, LogTopic, Start, TargetTopic, flatten, in_reader, thread_batches

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = feed.FEED_BINARY

#: Text bodies up to this size are parsed on the event loop: for a small patch that costs
#: less than handing it to a worker thread and waiting for the interpreter lock back.
INLINE_BYTES = 16 << 10

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: What a request's refusal is counted under, and its answer once its headers are sent.
TOPIC = web.RequestKey("topic", str)
RESPONSE = web.RequestKey("response", web.StreamResponse)

log = logging.getLogger("patchsync.serve")


def one_line(status: int, text: str) -> web.Response:
    """A refusal: ``text/plain``, one line."""
    return web.Response(status=status, text=" ".join(text.split()) + "\n", content_type="text/plain")


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer typed exactly ``application/json``: Java's RDF Delta client compares the
    whole header to recognise a conflict body (a charset parameter would hide it)."""
    return web.Response(
        status=status, body=json.dumps(body).encode(), headers={"Content-Type": dp.JSON, **(headers or {})}
    )


def patch_text(payload: bytes) -> str:
    """A one-patch Jelly-Patch stream as RDF Patch text."""
    events = [e for e in read_payload(payload) if type(e) is not Options]
    return write_rdfp(events, NT_TERMS, segments=False)


def text_payload(body: bytes, where: str) -> bytes:
    """RDF Patch text as a one-patch Jelly-Patch stream (the topic checks it whole)."""
    events = read_rdfp(body, NT_TERMS, source=where)
    return encode_patch(events, text_options(events))


class HttpDoor:
    """The HTTP listener of one serve process (see the module docstring)."""

    def __init__(self, context: Any, address: Address) -> None:
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

    # -- listening ---------------------------------------------------------------------

    async def start(self) -> str:
        for topic in self._logs():
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
            response = one_line(status_of(exc).http, client_message(exc))
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
        if route.kind == routes.SERVICE:
            return await self._service(request, route.service)
        if route.kind == routes.RPC:
            return await self._rpc(request, route)
        if route.kind == routes.APPEND:
            return await self._append(request, route)
        if route.kind == routes.CHANGES:
            return await self._changes(request, route.topic)
        if route.kind == routes.INIT:
            return await self._init(request, route.topic)
        assert route.ref is not None
        return await self._fetch(request, route.topic, route.ref)

    def _authorize(self, request: web.Request, needed: Access) -> None:
        what = f"{request.method} {dp.shorten(request.path)}"
        self.ctx.authorize(bearer(request.headers.get("Authorization")), needed, what)

    async def _service(self, request: web.Request, name: str) -> web.StreamResponse:
        if name == "healthz":
            return web.Response(text="ok\n")
        if name == "ready":
            why = self._not_ready()
            return one_line(503, why) if why else web.Response(text="ready\n")
        if name == "ping":
            return json_response(dp.ping_body())
        assert name == "metrics"
        body = await asyncio.to_thread(self.metrics.render)
        return web.Response(body=body, headers={"Content-Type": self.metrics.content_type})

    def _not_ready(self) -> str | None:
        if self.ctx.stopping:
            return "the server is stopping"
        for topic in self.ctx.topics:
            error = getattr(topic, "error", None)
            if error:
                # Without tokens only the fact: topic names are not told to anyone who asks.
                return f"topic {topic.name}: {error}" if not self.settings.tokens.required else "a topic is unavailable"
        return None

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

    async def _stream(self, request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
        """A streamed answer with ``headers``, its headers sent."""
        response = web.StreamResponse(headers=headers)
        request[RESPONSE] = response
        await response.prepare(request)
        return response

    # -- RPC ---------------------------------------------------------------------------

    def _logs(self) -> list[LogTopic]:
        return [t for t in self.ctx.topics if isinstance(t, LogTopic)]

    async def _rpc(self, request: web.Request, route: routes.Route) -> web.StreamResponse:
        # The token was checked (read) before the body was read; a write op needs more.
        call = dp.parse_rpc(await self._body(request, route.body_limit))
        if call.op in dp.WRITE_OPERATIONS:
            self._authorize(request, Access.WRITE)
        logs = {t.name: t for t in self._logs()}
        with self.metrics.timed("http", f"rpc {call.op}", ""):
            if call.op in dp.LOCK_OPERATIONS:
                return json_response(self.locks.answer(call, logs))
            if call.op == "ping":
                return json_response(dp.ping_body())
            if call.op == "list_datasource":
                return json_response({"array": [dp.datasource_id(n) for n in logs]})
            if call.op == "list_descriptions":
                infos = [dp.describe_datasource(t.describe(), self.uris.get(n, "")) for n, t in logs.items()]
                return json_response({"array": infos})
            if call.op == "list_log_info":
                infos = [dp.describe_log(t.describe(), self.uris.get(n, "")) for n, t in logs.items()]
                return json_response({"array": infos})
            if call.op == "describe_datasource":
                found = dp.find_datasource(call, logs, self.uris)
                if found is None:
                    return json_response({})
                return json_response(dp.describe_datasource(logs[found].describe(), self.uris.get(found, "")))
            if call.op == "describe_log":
                found = dp.datasource_arg(call, logs)
                if found is None:
                    return json_response({})
                return json_response(dp.describe_log(logs[found].describe(), self.uris.get(found, "")))
            if call.op == "create_datasource":
                name = call.string("name", required=True)
                assert name is not None
                self.ctx.refuse_if_stopping(f"create_datasource {dp.shorten(name)}")
                uri = call.string("uri")
                topic = await self.ctx.create_topic(name)
                if uri:
                    await asyncio.to_thread(df.write_uri, topic, uri)
                    self.uris[name] = uri
                return json_response({"id": dp.datasource_id(name)})
            assert call.op == "remove_datasource"
            found = dp.datasource_arg(call, logs)
            if found is None:
                raise UnknownTopic(
                    f"remove_datasource: No such datasource: '{dp.shorten(call.string('datasource') or '')}'"
                )
            await self.ctx.remove_topic(found)
            self.uris.pop(found, None)
            self.locks.forget(found)
            return json_response({})

    # -- appending ---------------------------------------------------------------------

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
                body_json = dp.conflict_body(topic.describe(), self.uris.get(name, "")) | {"message": str(exc)}
                return json_response(body_json, status=400)
            headers = {"Location": f"{request.path}?version={appended.version}"}
            if appended.duplicate:
                self.metrics.duplicates.labels(name).inc()
                headers["Patchsync-Duplicate"] = "true"
            return json_response(dp.appended_body(appended.version, headers["Location"]), headers=headers)

    # -- reading -----------------------------------------------------------------------

    async def _entry(self, topic: LogTopic, version: int) -> Entry | None:
        if not 1 <= version <= topic.version:
            return None
        reader = topic.read(Start.after_version(version - 1), follow=False)
        try:
            return await anext(reader, None)
        finally:
            await reader.aclose()

    async def _fetch(self, request: web.Request, name: str, ref: dp.PatchRef) -> web.StreamResponse:
        topic = self.ctx.topics.log(name, "fetching a patch")
        async with self.ctx.stream("http", "fetch", name):
            if ref.kind == "version":
                version: int | None = ref.version
                missing = f"version={ref.version}"
            else:
                candidates = (topic.version_of(c) for c in dp.patch_id_candidates(ref.patch_id))
                version = next((v for v in candidates if v is not None), None)
                missing = f"id={dp.shorten(ref.patch_id)}"
            entry = await self._entry(topic, version) if version is not None else None
            if entry is None:
                raise NotFound(
                    f"GET {dp.shorten(request.path)}: Patch not found: {missing} (the head is version {topic.version})"
                )
            if dp.accepts_jelly(request.headers.get("Accept")):
                body, content_type = entry.payload, dp.JELLY_PATCH
            else:
                body, content_type = (await in_reader(patch_text, entry.payload)).encode(), dp.PATCH_TEXT
            self.metrics.bytes.labels(name, "out").inc(len(body))
            return web.Response(
                body=body, headers={"Content-Type": content_type, "Patchsync-Version": str(entry.version)}
            )

    async def _changes(self, request: web.Request, name: str) -> web.StreamResponse:
        topic = self.ctx.topics.log(name, "the change feed")
        async with self.ctx.stream("http", "changes", name):
            query = dp.feed_query(request.query)
            if query.after > topic.version:
                raise dp.BadRequest(
                    f"GET {request.path}: after={query.after} is beyond the head (version {topic.version})"
                )
            await self._wait_for_news(topic, query)
            entries = await self._batch(topic, query)
            if feed.FEED_BINARY in (request.headers.get("Accept") or ""):
                last = entries[-1].version if entries else query.after
                records = [(feed.record_head(e.payload), e.payload) for e in entries]
                sent = sum(len(head) + len(payload) for head, payload in records)
                # Its length known, the answer goes out as it is, each payload unjoined.
                headers = feed.binary_headers(query.after, last, topic.version) | {"Content-Length": str(sent)}
                response = await self._stream(request, headers)
                for head, payload in records:
                    await self._send(request, response, head)
                    await self._send(request, response, payload)
            else:
                response = await self._stream(request, {"Content-Type": dp.JSON})
                sent = await self._json_feed(request, response, topic, entries, query.after)
            self.metrics.bytes.labels(name, "out").inc(sent)
            await response.write_eof()
            return response

    async def _json_feed(
        self, request: web.Request, response: web.StreamResponse, topic: LogTopic, entries: list[Entry], after: int
    ) -> int:
        """Write the JSON answer of ``entries``, each patch as text, as long as the answer
        stays within the feed's bytes; returns the bytes of changes written."""
        await self._send(request, response, feed.json_start())
        written, last = 0, after
        for entry in entries:
            change = feed.json_change(
                entry.version, entry.patch_id, await in_reader(patch_text, entry.payload), first=not written
            )
            if not feed.fits(written, len(change), first=not written):
                break
            await self._send(request, response, change)
            written += len(change)
            last = entry.version
        info = topic.describe()
        await self._send(request, response, feed.json_end(last, info.version, info.head))
        return written

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

    async def _batch(self, topic: LogTopic, query: dp.FeedQuery) -> list[Entry]:
        """The first batch after ``after``: at most ``limit`` entries and the feed's bytes."""
        batches = topic.read_batches(
            Start.after_version(query.after), follow=False, limit=query.limit, max_bytes=feed.FEED_BYTES
        )
        try:
            return await anext(batches, [])
        finally:
            await batches.aclose()

    async def _init(self, request: web.Request, name: str) -> web.StreamResponse:
        topic = self.ctx.topics.get(name)
        if isinstance(topic, LogTopic):
            return await self._log_init(request, topic)
        if not isinstance(topic, TargetTopic):
            raise NotFound(f"GET {request.path}: topic {name} has no bootstrap snapshot")
        async with self.ctx.stream("http", "init", name):
            snapshot = await topic.snapshot()  # type: ignore[attr-defined]
            response = await self._stream(request, {"Content-Type": dp.JELLY_RDF})
            sent = 0
            async with contextlib.aclosing(snapshot.frames) as frames:
                async for frame in frames:
                    chunk = encode_varint(len(frame)) + frame
                    sent += len(chunk)
                    await self._send(request, response, chunk)
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
        scheme = "https" if self.ctx.tls is not None else "http"
        try:
            return str(parse_http_url(f"{scheme}://{request.host}/{name}"))
        except (UsageError, ValueError):
            raise dp.BadRequest(f"GET {request.path}: Host {dp.shorten(request.host)!r} is not HOST[:PORT]") from None


__all__ = ["FEED_BINARY", "HttpDoor", "patch_text", "text_payload"]
