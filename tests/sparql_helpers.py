"""Helpers for the SPARQL store tests: private Oxigraph and Virtuoso servers, and plain HTTP to them.

Each server runs as a child process on free loopback ports, with its database in a directory of
its own, and is stopped by its PID: the Oxigraph server from PyPI (``oxigraph serve``, the
``oxigraph`` package in the ``dev`` extra) and Virtuoso Open Source from Debian (``virtuoso-t -f``,
package ``virtuoso-opensource``, installed by ``.ci/run``). Starting waits for the server to
answer for as long as its log keeps growing (``process_helpers.wait_for`` with ``progress``),
never for a fixed time.

The HTTP side is the SPARQL 1.1 Protocol and the Graph Store HTTP Protocol spoken with
``urllib``, nothing of patchsync's: these helpers are the independent view of a store that a
target's tests compare against.

- SPARQL 1.1 Protocol: https://www.w3.org/TR/sparql11-protocol/ (§2.1 query, §2.2 update)
- SPARQL 1.1 Graph Store HTTP Protocol: https://www.w3.org/TR/sparql11-http-rdf-update/ (§5)
- SPARQL 1.1 Query Results JSON Format: https://www.w3.org/TR/sparql11-results-json/ (§3.2)
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from .nats_helpers import free_port, reachable
from .process_helpers import wait_for


def _venv_or_path(name: str) -> str:
    """``name`` beside this interpreter (the project's .venv, not always on PATH), else on PATH."""
    beside = Path(sys.executable).parent / name
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name) or str(beside)


OXIGRAPH = os.environ.get("PATCHSYNC_OXIGRAPH") or _venv_or_path("oxigraph")
VIRTUOSO = os.environ.get("PATCHSYNC_VIRTUOSO", "/usr/bin/virtuoso-t")
ISQL = os.environ.get("PATCHSYNC_ISQL", "/usr/bin/isql-vt")

#: The graphs a fresh Virtuoso database holds for its own use (its RDF views, its service
#: description, LDP); they are never the data a test wrote.
VIRTUOSO_SYSTEM_GRAPHS = (
    "http://www.openlinksw.com/schemas/virtrdf#",
    "http://www.w3.org/ns/ldp#",
    "http://localuriqaserver/sparql",
)


def missing_binaries(*paths: str) -> str | None:
    """Why a server cannot be started here (the first executable not found), or None."""
    for path in paths:
        if not os.access(path, os.X_OK):
            return f"{path} is not installed"
    return None


# -- plain HTTP ---------------------------------------------------------------------------------


class SparqlHttpError(AssertionError):
    """A store answered a request with an error status: the status and the store's own text."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


def http(
    method: str,
    url: str,
    body: bytes | None = None,
    *,
    content_type: str | None = None,
    accept: str | None = None,
    timeout: float = 600.0,
) -> tuple[int, bytes]:
    """One request; its status and body. An error status raises :class:`SparqlHttpError`."""
    headers = {}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if accept is not None:
        headers["Accept"] = accept
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")
        raise SparqlHttpError(method, url, exc.code, text) from None


@dataclass(frozen=True)
class Endpoints:
    """Where one store answers: the SPARQL query and update endpoints, and the Graph Store.

    ``graph_param`` is the Graph Store's query parameter naming a graph (SPARQL 1.1 Graph
    Store HTTP Protocol §4.2 calls it ``graph``); ``default_graph`` is the graph a triple
    written without ``GRAPH`` lands in, where the store has no default graph of its own
    (Virtuoso), else None.
    """

    query: str
    update: str
    store: str
    default_graph: str | None = None

    def graph_url(self, graph: str | None) -> str:
        """The Graph Store URL of ``graph`` (None: the default graph)."""
        if graph is None and self.default_graph is None:
            return f"{self.store}?default"
        return f"{self.store}?{urllib.parse.urlencode({'graph': graph or self.default_graph})}"


def update(ep: Endpoints, text: str, *, timeout: float = 600.0) -> None:
    """POST one SPARQL Update request (SPARQL 1.1 Protocol §2.2.2, ``application/sparql-update``)."""
    http("POST", ep.update, text.encode(), content_type="application/sparql-update", timeout=timeout)


def select(ep: Endpoints, text: str, *, timeout: float = 600.0) -> list[dict[str, dict[str, Any]]]:
    """The bindings of one SELECT query (SPARQL 1.1 Protocol §2.1.2, results as JSON)."""
    _, body = http(
        "POST",
        ep.query,
        urllib.parse.urlencode({"query": text}).encode(),
        content_type="application/x-www-form-urlencoded",
        accept="application/sparql-results+json",
        timeout=timeout,
    )
    return list(json.loads(body)["results"]["bindings"])


def gsp(ep: Endpoints, method: str, graph: str | None, data: bytes, content_type: str) -> int:
    """PUT or POST RDF to one graph through the Graph Store HTTP Protocol (§5.3, §5.5); the status."""
    status, _ = http(method, ep.graph_url(graph), data, content_type=content_type)
    return status


def term(binding: dict[str, Any]) -> str:
    """One JSON result term (SPARQL 1.1 Query Results JSON Format §3.2.2) as N-Triples text.

    Blank node labels are the store's own (Virtuoso writes ``nodeID://b10000``), kept as they are
    after ``_:``: tests compare their structure, not their labels. A triple term (RDF 1.2, which
    Oxigraph 0.5 answers as ``{"type": "triple", "value": {"subject": …}}``) is ``<<( s p o )>>``.
    """
    kind, value = binding["type"], binding["value"]
    if kind == "triple":
        return f"<<( {term(value['subject'])} {term(value['predicate'])} {term(value['object'])} )>>"
    if kind == "uri":
        return f"<{value}>"
    if kind == "bnode":
        return "_:" + value.replace("nodeID://", "")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    if "xml:lang" in binding:
        return f'"{escaped}"@{binding["xml:lang"]}'
    datatype = binding.get("datatype")
    if kind == "typed-literal" or (datatype and datatype != "http://www.w3.org/2001/XMLSchema#string"):
        return f'"{escaped}"^^<{datatype}>'
    return f'"{escaped}"'


def quads(ep: Endpoints, graphs: list[str] | None = None) -> set[tuple[str, str, str, str]]:
    """Every quad in the named graphs (``graphs``, or all but a store's own), as N-Triples text."""
    where = "GRAPH ?g { ?s ?p ?o }"
    if graphs is not None:
        where += " VALUES ?g { " + " ".join(f"<{g}>" for g in graphs) + " }"
    elif ep.default_graph is not None:
        where += " FILTER (?g NOT IN (" + ", ".join(f"<{g}>" for g in VIRTUOSO_SYSTEM_GRAPHS) + "))"
    rows = select(ep, f"SELECT ?s ?p ?o ?g WHERE {{ {where} }}")
    return {(term(r["s"]), term(r["p"]), term(r["o"]), term(r["g"])) for r in rows}


def count(ep: Endpoints, graph: str) -> int:
    """How many triples ``graph`` holds."""
    rows = select(ep, f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph}> {{ ?s ?p ?o }} }}")
    return int(rows[0]["n"]["value"])


# -- servers ------------------------------------------------------------------------------------


class SparqlServer:
    """One store server process on loopback ports of its own, its database under ``root``."""

    name = "sparql"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.http_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = root / f"{self.name}.out"

    @property
    def endpoints(self) -> Endpoints:
        raise NotImplementedError

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        """Whether the server answers HTTP (raises if its process has exited)."""
        if self.proc is None or self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{self.name} exited while starting: {self.argv()}\n{tail}")
        return reachable(self.http_port, timeout=0.2)

    def progress(self) -> int:
        """What grows while the server starts: the size of its logs."""
        return sum(p.stat().st_size for p in self.root.glob("*.log*") if p.is_file()) + (
            self.log.stat().st_size if self.log.exists() else 0
        )

    def start(self) -> SparqlServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.prepare()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        wait_for(self.ready, 60.0, f"{self.name} to answer on {self.http_port}", progress=self.progress)
        self.started()
        return self

    def prepare(self) -> None:
        """Write what the server reads at start (its configuration)."""

    def started(self) -> None:
        """Set up what a fresh server needs once it answers (permissions)."""

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to flush or finish a request."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(60)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM, and SIGKILL if the server is still running a minute later."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(60)
        self.proc = None

    def __enter__(self) -> SparqlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OxigraphServer(SparqlServer):
    """``oxigraph serve``: a RocksDB store in ``root/db``; ``/query``, ``/update``, ``/store``."""

    name = "oxigraph"

    @property
    def endpoints(self) -> Endpoints:
        base = f"http://127.0.0.1:{self.http_port}"
        return Endpoints(f"{base}/query", f"{base}/update", f"{base}/store")

    def argv(self) -> list[str]:
        return [OXIGRAPH, "serve", "--location", str(self.root / "db"), "--bind", f"127.0.0.1:{self.http_port}"]


class VirtuosoServer(SparqlServer):
    """``virtuoso-t -f``: a database in ``root``, its SQL port for ``isql-vt``, its HTTP port.

    Virtuoso has no default graph of its own (a query's default graph is the union of all
    graphs; an update without ``GRAPH`` is refused), so ``default_graph`` names the graph
    the Graph Store helpers use for it. The anonymous ``SPARQL`` user gets the
    ``SPARQL_UPDATE`` role, which opens ``/sparql`` and ``/sparql-graph-crud`` to updates.
    """

    name = "virtuoso"

    def __init__(self, root: Path, *, buffers: int = 20000, default_graph: str = "urn:x-patchsync:default") -> None:
        super().__init__(root)
        self.sql_port = free_port()
        self.buffers = buffers
        self.default_graph = default_graph

    @property
    def ini(self) -> Path:
        return self.root / "virtuoso.ini"

    @property
    def endpoints(self) -> Endpoints:
        base = f"http://127.0.0.1:{self.http_port}"
        return Endpoints(f"{base}/sparql", f"{base}/sparql", f"{base}/sparql-graph-crud", self.default_graph)

    def argv(self) -> list[str]:
        return [VIRTUOSO, "-f", "-c", str(self.ini)]

    def prepare(self) -> None:
        r = self.root
        # Buffers of 8 KiB pages; dirty ones at most three quarters (Virtuoso's own guidance).
        self.ini.write_text(
            f"""[Database]
DatabaseFile = {r}/virtuoso.db
ErrorLogFile = {r}/virtuoso.log
LockFile = {r}/virtuoso.lck
TransactionFile = {r}/virtuoso.trx
xa_persistent_file = {r}/virtuoso.pxa
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {r}/virtuoso-temp.db
TransactionFile = {r}/virtuoso-temp.trx

[Parameters]
ServerPort = 127.0.0.1:{self.sql_port}
DisableUnixSocket = 1
DirsAllowed = ., {r}
NumberOfBuffers = {self.buffers}
MaxDirtyBuffers = {self.buffers * 3 // 4}
CheckpointInterval = 60

[HTTPServer]
ServerPort = 127.0.0.1:{self.http_port}
ServerRoot = {r}
ServerThreads = 8
MaxClientConnections = 8

[SPARQL]
ResultSetMaxRows = 10000000
MaxQueryExecutionTime = 0
"""
        )

    def ready(self) -> bool:
        return super().ready() and reachable(self.sql_port, timeout=0.2)

    def started(self) -> None:
        try:
            self.isql('GRANT SPARQL_UPDATE TO "SPARQL";')
        except RuntimeError as exc:
            if "already have role" not in str(exc):  # a restart of the same database
                raise

    def wipe(self) -> None:
        """Remove every quad and every created graph but Virtuoso's own."""
        own = ", ".join(f"iri_to_id ('{g}')" for g in VIRTUOSO_SYSTEM_GRAPHS)
        self.isql(f"DELETE FROM DB.DBA.RDF_QUAD WHERE G NOT IN ({own})")
        self.isql(f"DELETE FROM DB.DBA.RDF_EXPLICITLY_CREATED_GRAPH WHERE REC_GRAPH_IID NOT IN ({own})")

    def isql(self, sql: str) -> str:
        """Run SQL as ``dba`` through ``isql-vt``; its output. A failed statement raises."""
        done = subprocess.run(
            [ISQL, f"127.0.0.1:{self.sql_port}", "dba", "dba", "VERBOSE=OFF", "BANNER=OFF", f"EXEC={sql}"],
            capture_output=True,
            text=True,
            timeout=3600,
            check=False,
        )
        if done.returncode != 0 or "*** Error" in done.stdout + done.stderr:
            raise RuntimeError(f"isql-vt {sql!r}: exit {done.returncode}: {done.stdout}{done.stderr}")
        return done.stdout


# -- a reverse proxy that checks credentials ----------------------------------------------------


class AuthProxy:
    """An HTTP(S) reverse proxy in front of a store, on a free loopback port, that forwards a
    request only when its ``Authorization`` header is one of ``accepted`` and otherwise answers
    401 with ``challenge`` as ``WWW-Authenticate`` (RFC 9110 §11.6.1): what a store behind an
    authenticating front end looks like to a client. With ``cert`` and ``key`` it speaks TLS.

    aiohttp on an event loop of its own, in a thread of the test; :attr:`refused` counts 401s.
    """

    def __init__(
        self,
        upstream: str,
        accepted: set[str],
        *,
        cert: Path | None = None,
        key: Path | None = None,
        challenge: str = 'Basic realm="store"',
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.accepted = accepted
        self.challenge = challenge
        self.refused = 0
        self.port = 0
        self._tls = (cert, key) if cert is not None and key is not None else None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        """The proxy's base URL (``https://127.0.0.1:PORT`` with TLS)."""
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    async def _handle(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") not in self.accepted:
            self.refused += 1
            return web.Response(status=401, headers={"WWW-Authenticate": self.challenge}, text="Unauthorized")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "accept")}
        assert self._session is not None
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as answer:
            data = await answer.read()
            kind = answer.headers.get("Content-Type", "application/octet-stream")
            return web.Response(status=answer.status, body=data, headers={"Content-Type": kind})

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        context = None
        if self._tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(self._tls[0]), str(self._tls[1]))
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        assert self._runner is not None and self._session is not None
        await self._runner.cleanup()
        await self._session.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._stop())
        self._loop.close()

    def __enter__(self) -> AuthProxy:
        self._thread.start()
        assert self._ready.wait(120), "the proxy did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(60)
