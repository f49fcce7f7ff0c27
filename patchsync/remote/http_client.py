"""A client of ``patchsync serve``'s HTTP door: ``http(s)://HOST:PORT/NAME`` as a patch source.

Reading uses the door's change feed in its binary form (each patch a one-patch Jelly-Patch
stream, versions in order), so a reader checkpoints the version exactly as a NATS reader
checkpoints a stream sequence; publishing posts one patch per request, continuing the
head, as :func:`patchsync.nats.publish.publish_logs` does for a stream: a patch the log
holds already is acknowledged, not appended again, so a rerun after ``kill -9`` publishes
nothing twice.

Credentials are the gRPC client's (:mod:`patchsync.remote.grpc_client`):
``PATCHSYNC_TOKEN`` or ``PATCHSYNC_TOKEN_FILE``, sent as ``Authorization: Bearer``, and
``PATCHSYNC_TLS_CA`` for an ``https://`` server whose certificate the system does not trust.
One keep-alive connection per client (``http.client``), so a long catch-up costs no
connection per request.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import quote, urlsplit

from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.logs.files import replaced_whole
from patchsync.logs.payloads import PatchMessage, StreamMessage
from patchsync.options import Limits, PatchOptions
from patchsync.remote import connect_errors as remote
from patchsync.remote.errors import StreamUnavailable
from patchsync.remote.grpc_client import client_ca, client_token
from patchsync.remote.interface import Appended, LogHead, RemoteLog
from patchsync.remote.publish import PublishReport, StreamSettings, publish_patches
from patchsync.remote.statuses import read_only, refusal
from patchsync.remote.writer import PatchWriter
from patchsync.terms import TermAdapter

#: The door's binary change feed and Jelly-Patch media types.
FEED_BINARY = "application/x-patchsync-changes"
JELLY_PATCH = "application/x-jelly-rdf-patch"
JELLY_RDF = "application/x-jelly-rdf"
#: Longest long poll of the change feed (the door's limit is higher).
MAX_WAIT = 30.0


@dataclass(frozen=True, slots=True)
class HttpURL:
    """``http://HOST:PORT/NAME`` or ``https://…``."""

    scheme: str
    host: str
    port: int
    name: str

    @property
    def stream(self) -> str:
        """The log's name at the server."""
        return self.name

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @property
    def address(self) -> str:
        """``HOST:PORT``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.address}/{self.name}"


def parse_http_url(text: str) -> HttpURL:
    """Parse ``http(s)://HOST[:PORT]/NAME``; a malformed address is one :class:`UsageError` line."""
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or parts.query or parts.fragment:
        raise UsageError(f"{text}: not a served log's address (expected http://HOST:PORT/NAME)")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"{text}: the port is not a number from 0 to 65535") from None
    name = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not parts.hostname or not name or "/" in name:
        raise UsageError(f"{text}: expected {scheme}://HOST:PORT/NAME")
    return HttpURL(scheme, parts.hostname, port, name)


@dataclass(frozen=True, slots=True)
class Feed:
    """One change feed answer: the patches' payloads from ``first`` on, and the head."""

    first: int
    payloads: list[bytes]
    head: int


class HttpLog(RemoteLog):
    """A connection to one log of a ``patchsync serve`` HTTP door (synchronous): a
    :class:`~patchsync.remote.interface.RemoteLog` whose positions are the log's versions."""

    url: HttpURL

    #: Patches asked for per change feed request.
    page_size = 1000

    def __init__(self, url: HttpURL | str, *, timeout: float = 10.0) -> None:
        self.url = url if isinstance(url, HttpURL) else parse_http_url(url)
        self.timeout = timeout
        token = client_token()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._path = "/" + quote(self.url.name, safe="")
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            if self.url.tls:
                ca = client_ca()
                context = ssl.create_default_context(cadata=ca.decode("ascii", "replace") if ca else None)
                self._conn = http.client.HTTPSConnection(self.url.host, self.url.port, timeout=timeout, context=context)
            else:
                self._conn = http.client.HTTPConnection(self.url.host, self.url.port, timeout=timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None, wait: float = 0
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on the kept connection (sent again once on a connection the server closed)."""
        all_headers = self.headers | (headers or {})
        for attempt in (1, 2):
            conn = self._connection(self.timeout + wait)
            try:
                conn.request(method, path, body=body, headers=all_headers)
                response = conn.getresponse()
                data = response.read()
                return response.status, {k.lower(): v for k, v in response.getheaders()}, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if attempt == 2 or method not in ("GET", "OPTIONS"):
                    raise self._failure(exc) from None
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._failure(exc) from None
        raise AssertionError("unreachable")

    def download(self, what: str, out: BinaryIO, accept: str) -> None:
        """``GET /NAME/{what}`` written to ``out`` as it arrives (a snapshot may be larger
        than memory); a refusal is one line."""
        conn = self._connection(self.timeout)
        try:
            conn.request("GET", f"{self._path}/{what}", headers=self.headers | {"Accept": accept})
            response = conn.getresponse()
            if response.status != 200:
                raise self._refusal(response.status, response.read())
            chunk = response.read(1 << 20)
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise self._failure(exc) from None
        while chunk:
            # Outside the try: a failed write of ``out`` is the file's error, not the server's.
            out.write(chunk)
            try:
                chunk = response.read(1 << 20)
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._failure(exc) from None

    def _failure(self, exc: BaseException) -> PatchsyncError:
        """What a request that got no answer means: a setting to change, or a server out of reach."""
        where, address = str(self.url), self.url.address
        if isinstance(exc, ssl.SSLCertVerificationError):
            return remote.untrusted(where, exc.verify_message or exc.reason or "verification failed")
        if isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER":
            plain = f"http://{address}/{self.url.name}"
            return remote.tls_mismatch(where, address, server_tls=False, fix=f"use {plain}")
        if isinstance(exc, http.client.BadStatusLine) and str(getattr(exc, "line", ""))[3:4] == "\x04":
            # An HTTP/2 server's first frame is its SETTINGS (RFC 9113, section 3.4).
            return remote.wrong_protocol(
                where,
                address,
                expected="HTTP/1.1",
                answered="in HTTP/2",
                fix=f"read a gRPC door as grpc://{address}/{self.url.name}, or name the HTTP port (serve --http)",
            )
        closed = isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError))
        if closed and not self.url.tls and remote.speaks_tls(self.url.host, self.url.port):
            secure = f"https://{address}/{self.url.name}"
            return remote.tls_mismatch(
                where,
                address,
                server_tls=True,
                fix=f"use {secure}, with {remote.CA_SETTING} if the system does not trust its CA",
            )
        return remote.unreachable(where, address, str(exc) or type(exc).__name__)

    def _refusal(self, status: int, data: bytes) -> PatchsyncError:
        text = f"{self.url}: HTTP {status}: {data.decode('utf-8', 'replace').strip()}"
        return refusal(text, status, token_sent="Authorization" in self.headers)

    def feed(self, after: int, limit: int, wait: float = 0.0) -> Feed:
        """The patches after version ``after`` (at most ``limit``; when none, wait up to ``wait`` s)."""
        path = f"{self._path}/changes?after={after}&limit={limit}&wait={wait:g}"
        status, headers, data = self.request("GET", path, headers={"Accept": FEED_BINARY}, wait=wait)
        if status != 200:
            raise self._refusal(status, data)
        return Feed(int(headers["patchsync-first-version"]), split_records(data), int(headers["patchsync-head"]))

    def writable(self) -> None:
        # The methods the server says the topic takes, by the rule its append meets: asked
        # first, since a writer reads the head next, and a target topic has no change feed.
        status, headers, data = self.request("OPTIONS", self._path)
        if status == 405:
            return  # a server from before OPTIONS /NAME: its append answers for itself
        if status not in (200, 204):
            raise self._refusal(status, data)
        allowed = {m.strip().upper() for m in headers.get("allow", "").split(",")}
        if "POST" not in allowed:
            raise read_only(str(self.url), headers.get("patchsync-kind") or "read-only")

    def head(self) -> LogHead:
        status, _, data = self.request("GET", f"{self._path}/changes?after=0&limit=1")
        if status != 200:
            raise self._refusal(status, data)
        body = json.loads(data)
        return LogHead(int(body["head"]), body.get("head_id") or None)

    def read(self, after: int, limit: int, wait: float) -> list[StreamMessage]:
        feed = self.feed(after, limit, min(max(wait, 0.0), MAX_WAIT))
        return [StreamMessage(feed.first + i, 0.0, {}, payload) for i, payload in enumerate(feed.payloads)]

    def patch_id_at(self, version: int) -> str | None:
        """The id of the patch at ``version`` (``None`` if there is none)."""
        status, _, data = self.request("GET", f"{self._path}/changes?after={version - 1}&limit=1")
        if status != 200:
            raise self._refusal(status, data)
        changes = json.loads(data)["changes"]
        return str(changes[0]["id"]) if changes else None

    def position_of(self, patch_id: str) -> int | None:
        """The version the log holds patch ``patch_id`` at (``None`` if it holds none)."""
        status, headers, data = self.request("GET", f"{self._path}?patch={quote(patch_id, safe='')}")
        if status == 404:
            return None
        if status != 200:
            raise self._refusal(status, data)
        return int(headers["patchsync-version"])

    def append(self, message: PatchMessage) -> Appended:
        """Post one patch (a one-patch Jelly-Patch stream): its version, and whether the log
        held it already. A patch not following the head is a :class:`ChainError`."""
        status, headers, data = self.request("POST", self._path, message.payload, {"Content-Type": JELLY_PATCH})
        if status == 200:
            return Appended(int(json.loads(data)["version"]), headers.get("patchsync-duplicate") == "true")
        if status == 400 and headers.get("content-type", "").startswith("application/json"):
            info = json.loads(data).get("log_info", {})
            raise ChainError(
                f"{self.url}: the patch does not follow the head (version {info.get('max_version')}, "
                f"patch {info.get('latest') or '(none)'}); nothing was appended"
            )
        raise self._refusal(status, data)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def connect(url: HttpURL | str, *, timeout: float | None = None, follow: bool = False) -> HttpLog:
    """A connection to a served log (the source kind's ``connect`` role; ``timeout``: 10 s by default)."""
    del follow
    return HttpLog(url, timeout=10.0 if timeout is None else timeout)


def split_records(data: bytes) -> list[bytes]:
    """The records of a binary change feed answer (each a varint length, then that many bytes)."""
    out: list[bytes] = []
    pos, end = 0, len(data)
    while pos < end:
        n = shift = 0
        while True:
            if pos >= end or shift > 63:
                raise StreamUnavailable("change feed: a record's length is cut short")
            byte = data[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + n > end:
            raise StreamUnavailable("change feed: a record is cut short")
        out.append(data[pos : pos + n])
        pos += n
    return out


def publish_logs(
    paths: Iterable[str | os.PathLike[str]],
    url: HttpURL | str,
    *,
    settings: StreamSettings | None = None,
    limits: Limits | None = None,
) -> PublishReport:
    """Publish every complete patch of the logs to the served log, continuing its head
    (:func:`patchsync.remote.publish.publish_patches`).

    ``settings`` (how a NATS stream is created) do not apply to a served log.
    """
    del settings
    with HttpLog(url) as log:
        return publish_patches(log, paths, limits=limits)


class HttpWriter(PatchWriter):
    """Where a recorder commits its patches when they go to a served log over HTTP.

    A :class:`~patchsync.remote.writer.PatchWriter` (``Recorder(graph,
    "http://HOST:PORT/NAME")``, ``patchsync ingest … -o http://HOST:PORT/NAME``), as
    :class:`~patchsync.nats.publish.StreamWriter` is for a NATS stream. Each patch is
    one ``POST``, appended only if it follows the log's head; a failed commit raises
    (:class:`ChainError`, :class:`StreamUnavailable`, a refusal as :class:`UsageError`)
    and the patch is not in the log.
    """

    destination = "a served log"

    def __init__(
        self, url: HttpURL | str, options: PatchOptions | None = None, adapter: TermAdapter[Any] | None = None
    ) -> None:
        super().__init__(HttpLog(url), options, adapter)


def fetch_snapshot(address: str, path: str | os.PathLike[str]) -> None:
    """Write a served log's bootstrap snapshot (``http(s)://HOST:PORT/NAME/init``, or the
    log's address ``…/NAME``) to ``path`` as Jelly-RDF; ``path`` appears only once the whole
    snapshot arrived. Its position checkpoints the log's address at the snapshot's version,
    so a reader of the log loading it continues after that version. A log without one is
    one line."""
    url = parse_http_url(address.removesuffix("/init"))
    with HttpLog(url, timeout=60.0) as log, replaced_whole(path) as out:
        log.download("init", out, JELLY_RDF)


__all__ = [
    "Feed",
    "HttpLog",
    "HttpURL",
    "HttpWriter",
    "fetch_snapshot",
    "connect",
    "parse_http_url",
    "publish_logs",
    "split_records",
]
