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
  at most ``N``; when there is none yet, waits up to ``S`` seconds for one (a long poll).
  JSON ``{"changes": [{"version", "id", "patch"}], "last_version", "head"}`` by default;
  with ``Accept: application/x-patchsync-changes`` the body is each patch's one-patch
  Jelly-Patch stream, length-prefixed (a varint), versions counting up from
  ``Patchsync-First-Version`` (headers ``Patchsync-Last-Version``, ``Patchsync-Head``);
- ``GET /$/metrics`` (the process's one registry), ``/$/healthz``, ``/$/ready``.

Every topic request passes the process's token check (``Authorization: Bearer``), its
stream limit and latency histogram (:meth:`ServeContext.stream`), and every refusal is
answered with the status of the one error mapping (:func:`status_of`) and one line of
``text/plain``. Bodies over the message limit are refused with 413 before being read.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web

from patchsync.codec.rdfp import read_rdfp, write_rdfp
from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.events import Options
from patchsync.serve import datasource_files as df
from patchsync.serve import delta_protocol as dp
from patchsync.serve.auth import Access, bearer
from patchsync.serve.delta_locks import LockTable
from patchsync.serve.errors import OverLimit, UnknownTopic, status_of
from patchsync.serve.settings import Address
from patchsync.serve.target_topic import read_frames
from patchsync.serve.topics import Entry, LogTopic, Start, TargetTopic, flatten, thread_batches
from patchsync.streams.http_client import parse_http_url
from patchsync.streams.payloads import NT_TERMS, encode_patch, read_payload, text_options

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = "application/x-patchsync-changes"

#: Text bodies up to this size are parsed on the event loop: for a small patch that costs
#: less than handing it to a worker thread and waiting for the interpreter lock back.
INLINE_BYTES = 16 << 10

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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

    # -- listening ---------------------------------------------------------------------

    async def start(self) -> str:
        for topic in self._logs():
            uri = await asyncio.to_thread(df.read_uri, topic)
            if uri:
                self.uris[topic.name] = uri
        app = web.Application(client_max_size=self.settings.max_message_bytes, middlewares=[self._errors])
        app.router.add_route("*", "/{path:.*}", self.dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=self.settings.grace)
        await self._runner.setup()
        context = None
        if self.settings.tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(self.settings.tls_cert), str(self.settings.tls_key))
        site = web.TCPSite(
            self._runner,
            self.address.host,
            self.address.port,
            ssl_context=context,
        )
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise UsageError(f"--http {self.address}: {exc.strerror or exc}") from None
        port = self._runner.addresses[-1][1]
        return str(Address(self.address.host, port))

    async def stop(self, grace: float) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except PatchsyncError as exc:
            return one_line(status_of(exc).http, str(exc))
        except web.HTTPRequestEntityTooLarge:
            return one_line(
                413, f"{request.method} {request.path}: over the {self.settings.max_message_bytes} byte limit"
            )

    # -- routing -----------------------------------------------------------------------

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith("/$/"):
            return await self._service(request, path[3:])
        parts = path[1:].split("/")
        if parts and parts[-1] == "" and len(parts) > 1:
            parts.pop()  # "/name/" is "/name"
        if len(parts) > 2:
            raise dp.BadRequest(f"{path}: URI path has too many components")
        if not parts[0]:
            return one_line(404, f"{path}: not found (POST /$/rpc, /NAME, GET /NAME/VERSION)")
        names = [t.name for t in self.ctx.topics]
        if parts == ["init-data"] and "datasource" in request.query and request.method in ("GET", "HEAD"):
            # RDF Delta's form of the bootstrap: /init-data?datasource=REF.
            wanted = request.query["datasource"]
            found = dp.resolve_ref(wanted, names)
            if found is None:
                raise UnknownTopic(f"{request.method} {path}: No such datasource: '{wanted}'")
            return await self._init(request, found)
        name = dp.resolve_ref(parts[0], names)
        if name is None:
            raise UnknownTopic(f"{request.method} {path}: No such datasource: '{parts[0]}'")
        method = request.method
        if method in ("POST", "PATCH") and len(parts) == 1 and not request.query:
            return await self._append(request, name)
        if method not in ("GET", "HEAD"):
            return one_line(405, f"HTTP {method} not supported on {path}")
        if len(parts) == 2:
            ref = dp.parse_patch_ref(parts[1])
        elif "version" in request.query:
            ref = dp.parse_patch_ref(request.query["version"])
        elif "patch" in request.query:
            ref = dp.PatchRef("id", patch_id=dp.bare_id(request.query["patch"]))
        else:
            raise dp.BadRequest(f"Not a log fetch or append operation: {method} {path}")
        if ref.kind == "changes":
            return await self._changes(request, name)
        if ref.kind == "init":
            return await self._init(request, name)
        return await self._fetch(request, name, ref)

    def _authorize(self, request: web.Request, needed: Access) -> None:
        what = f"{request.method} {request.path}"
        self.ctx.authorize(bearer(request.headers.get("Authorization")), needed, what)

    async def _service(self, request: web.Request, name: str) -> web.StreamResponse:
        if name == "healthz":
            return web.Response(text="ok\n")
        if name == "ready":
            why = self._not_ready()
            return one_line(503, why) if why else web.Response(text="ready\n")
        if name == "ping":
            return json_response(dp.ping_body())
        if name == "metrics":
            self._authorize(request, Access.READ)
            body = await asyncio.to_thread(self.metrics.render)
            return web.Response(body=body, headers={"Content-Type": self.metrics.content_type})
        if name == "rpc":
            if request.method != "POST":
                return one_line(405, f"HTTP {request.method} not supported on /$/rpc (POST a JSON operation)")
            return await self._rpc(request)
        return one_line(404, f"{request.path}: not found (/$/rpc, /$/ping, /$/metrics, /$/healthz, /$/ready)")

    def _not_ready(self) -> str | None:
        if self.ctx.stopping:
            return "the server is stopping"
        for topic in self.ctx.topics:
            error = getattr(topic, "error", None)
            if error:
                return f"topic {topic.name}: {error}"
        return None

    async def _body(self, request: web.Request) -> bytes:
        """The request body, refused (413) before it is read when it declares itself too large."""
        limit = self.settings.max_message_bytes
        if request.content_length is not None and request.content_length > limit:
            raise OverLimit(
                f"{request.method} {request.path}: a body of {request.content_length} bytes, over the {limit} byte limit"
            )
        return await request.read()

    # -- RPC ---------------------------------------------------------------------------

    def _logs(self) -> list[LogTopic]:
        return [t for t in self.ctx.topics if isinstance(t, LogTopic)]

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        call = dp.parse_rpc(await self._body(request))
        self._authorize(request, Access.WRITE if call.op in dp.WRITE_OPERATIONS else Access.READ)
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
                self.ctx.refuse_if_stopping(f"create_datasource {name}")
                uri = call.string("uri")
                topic = await self.ctx.create_topic(name)
                if uri:
                    await asyncio.to_thread(df.write_uri, topic, uri)
                    self.uris[name] = uri
                return json_response({"id": dp.datasource_id(name)})
            assert call.op == "remove_datasource"
            found = dp.datasource_arg(call, logs)
            if found is None:
                raise UnknownTopic(f"remove_datasource: No such datasource: '{call.string('datasource')}'")
            await self.ctx.remove_topic(found)
            self.uris.pop(found, None)
            self.locks.forget(found)
            return json_response({})

    # -- appending ---------------------------------------------------------------------

    async def _append(self, request: web.Request, name: str) -> web.StreamResponse:
        where = f"POST {request.path}"
        topic = self.ctx.topics.log(name, "append")
        async with self.ctx.stream("http", "append", name):
            self._authorize(request, Access.WRITE)
            self.ctx.refuse_if_stopping(where)
            kind = dp.body_format(request.headers.get("Content-Type"))
            body = await self._body(request)
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
            except ChainError:
                self.metrics.refused(name, "chain")
                return json_response(dp.conflict_body(topic.describe(), self.uris.get(name, "")), status=400)
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
            self._authorize(request, Access.READ)
            if ref.kind == "version":
                version: int | None = ref.version
                missing = f"version={ref.version}"
            else:
                candidates = (topic.version_of(c) for c in dp.patch_id_candidates(ref.patch_id))
                version = next((v for v in candidates if v is not None), None)
                missing = f"id={ref.patch_id}"
            entry = await self._entry(topic, version) if version is not None else None
            if entry is None:
                raise UnknownTopic(
                    f"GET {request.path}: Patch not found: {missing} (the head is version {topic.version})"
                )
            if dp.accepts_jelly(request.headers.get("Accept")):
                body, content_type = entry.payload, dp.JELLY_PATCH
            else:
                body, content_type = (await asyncio.to_thread(patch_text, entry.payload)).encode(), dp.PATCH_TEXT
            self.metrics.bytes.labels(name, "out").inc(len(body))
            return web.Response(
                body=body, headers={"Content-Type": content_type, "Patchsync-Version": str(entry.version)}
            )

    async def _changes(self, request: web.Request, name: str) -> web.StreamResponse:
        topic = self.ctx.topics.log(name, "the change feed")
        async with self.ctx.stream("http", "changes", name):
            self._authorize(request, Access.READ)
            query = dp.feed_query(request.query)
            if query.after > topic.version:
                raise dp.BadRequest(
                    f"GET {request.path}: after={query.after} is beyond the head (version {topic.version})"
                )
            entries = await self._collect(topic, query)
            binary = FEED_BINARY in (request.headers.get("Accept") or "")
            if binary:
                body = b"".join(dp.varint(len(e.payload)) + e.payload for e in entries)
                last = entries[-1].version if entries else query.after
                headers = {
                    "Content-Type": FEED_BINARY,
                    "Patchsync-First-Version": str(query.after + 1),
                    "Patchsync-Last-Version": str(last),
                    "Patchsync-Head": str(topic.version),
                }
                self.metrics.bytes.labels(name, "out").inc(len(body))
                return web.Response(body=body, headers=headers)
            changes = await asyncio.to_thread(
                lambda: [{"version": e.version, "id": e.patch_id, "patch": patch_text(e.payload)} for e in entries]
            )
            info = topic.describe()
            return json_response(dp.feed_body(changes, query.after, info.version, info.head))

    async def _collect(self, topic: LogTopic, query: dp.FeedQuery) -> list[Entry]:
        """Up to ``limit`` entries after ``after`` in order; when there are none, wait up to
        ``wait`` seconds for the next append (then take what is there, without waiting more)."""
        if topic.version <= query.after and query.wait > 0 and not self.ctx.stopping:
            follower = topic.read(Start.after_version(query.after), follow=True)
            try:
                await asyncio.wait_for(anext(follower, None), query.wait)
            except TimeoutError:
                return []
            finally:
                await follower.aclose()
        out: list[Entry] = []
        reader = topic.read(Start.after_version(query.after), follow=False)
        try:
            async for entry in reader:
                out.append(entry)
                if len(out) >= query.limit:
                    break
        finally:
            await reader.aclose()
        return out

    async def _init(self, request: web.Request, name: str) -> web.StreamResponse:
        topic = self.ctx.topics.get(name)
        if isinstance(topic, LogTopic):
            return await self._log_init(request, topic)
        if not isinstance(topic, TargetTopic):
            raise UnknownTopic(f"GET {request.path}: topic {name} has no bootstrap snapshot")
        async with self.ctx.stream("http", "init", name):
            self._authorize(request, Access.READ)
            snapshot = await topic.snapshot()  # type: ignore[attr-defined]
            response = web.StreamResponse(headers={"Content-Type": dp.JELLY_RDF})
            await response.prepare(request)
            sent = 0
            async for frame in snapshot.frames:
                chunk = dp.varint(len(frame)) + frame
                sent += len(chunk)
                await response.write(chunk)
            self.metrics.bytes.labels(name, "out").inc(sent)
            await response.write_eof()
            return response

    async def _log_init(self, request: web.Request, topic: LogTopic) -> web.StreamResponse:
        """A log topic's bootstrap snapshot (:mod:`patchsync.serve.datasource_files`): Jelly-RDF
        with the position rewritten for this log, or N-Quads; the version it stands at in
        ``Patchsync-Version`` (the change feed continues after it)."""
        name = topic.name
        async with self.ctx.stream("http", "init", name):
            self._authorize(request, Access.READ)
            path = df.init_path(topic)
            if path is None or not path.is_file():
                raise UnknownTopic(
                    f"GET {request.path}: data source {name} has no bootstrap snapshot "
                    f"(patchsync snapshot -o {path or 'FILE'} from a replica of it makes one)"
                )
            position, version = await asyncio.to_thread(df.snapshot_version, topic, path)
            scheme = "https" if self.settings.tls else "http"
            address = str(parse_http_url(f"{scheme}://{request.host}/{name}"))
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
            response = web.StreamResponse(headers=headers)
            await response.prepare(request)
            sent = 0
            async for chunk in flatten(thread_batches(chunks, batch=8)):
                sent += len(chunk)
                await response.write(chunk)
            self.metrics.bytes.labels(name, "out").inc(sent)
            await response.write_eof()
            return response


__all__ = ["FEED_BINARY", "HttpDoor", "patch_text", "text_payload"]
