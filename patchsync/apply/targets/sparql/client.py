"""HTTP to a SPARQL store: the SPARQL 1.1 Protocol and Graph Store Protocol, over ``http.client``.

One persistent connection per endpoint host, made again after any failure. Every request has
the target's timeout; an answer body is read up to a bound. Failures are translated once, by
:data:`ERRORS`: a store that does not answer (refused, reset, timed out, 502-504) is
:class:`TargetUnavailable` (the tail daemon retries); a wrong endpoint (404, 405), refused
credentials (401, 403) and a refused request (other 4xx, 500) are :class:`ApplyError` with
the URL, the status and the first line of the store's own message. The ``Authorization``
header is sent and never shown.

- SPARQL 1.1 Protocol: https://www.w3.org/TR/sparql11-protocol/ (§2.1.3 query by POST, §2.2.2 update by POST)
- SPARQL 1.1 Graph Store HTTP Protocol: https://www.w3.org/TR/sparql11-http-rdf-update/ (§5.5 POST)
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse
from typing import Any

from patchsync.errors import ApplyError, ErrorRule, ErrorTable, TargetUnavailable

from .config import AUTH_SCHEMES, SparqlConfig

#: The most of an answer read: a query result (a dump reads every quad) or an error text.
MAX_ANSWER = 1 << 31
#: How many times a query that deadlocked with a writer is asked again.
DEADLOCK_RETRIES = 5
#: The most of an error answer kept for the message.
MAX_MESSAGE = 300


class HttpStatus(Exception):
    """A store answered with an error status (translated by :data:`ERRORS`)."""

    def __init__(self, method: str, url: str, status: int, body: bytes, challenge: str = "") -> None:
        self.method, self.url, self.status = method, url, status
        self.message = store_message(body)
        #: The authentication scheme a 401 asks for (``WWW-Authenticate``, RFC 9110 §11.6.1).
        self.scheme = challenge.split(None, 1)[0] if challenge.strip() else ""
        super().__init__(f"{method} {url} answered HTTP {status}: {self.message}")


def store_message(body: bytes) -> str:
    """The store's own words from an error body: its first non-empty lines, bounded, one line."""
    text = body[:4096].decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    joined = " ".join(lines)
    return (joined[:MAX_MESSAGE] + "…") if len(joined) > MAX_MESSAGE else (joined or "(no message)")


def _status_in(*codes: int) -> Any:
    return lambda exc: isinstance(exc, HttpStatus) and exc.status in codes


def _say_status(what: str) -> Any:
    return lambda exc: f"{exc.method} {exc.url} answered HTTP {exc.status} ({what}): {exc.message}"


def _say_credentials(exc: BaseException) -> str:
    assert isinstance(exc, HttpStatus)  # the rule matches HttpStatus only
    if exc.scheme and exc.scheme.lower() not in AUTH_SCHEMES:
        what = f"the store asks for HTTP {exc.scheme}, which is not supported: put a proxy that checks Basic or a token in front"
    else:
        what = "authentication failed: check user=/password-*/token-*"
    return f"{exc.method} {exc.url} answered HTTP {exc.status} ({what}): {exc.message}"


#: Foreign errors of a request, most specific first (see the module docstring).
ERRORS = ErrorTable(
    (
        ErrorRule(
            "credentials refused",
            (HttpStatus,),
            ApplyError,
            _status_in(401, 403),
            _say_credentials,
        ),
        ErrorRule(
            "wrong endpoint", (HttpStatus,), ApplyError, _status_in(404, 405, 406, 415), _say_status("wrong endpoint?")
        ),
        ErrorRule("store unavailable", (HttpStatus,), TargetUnavailable, _status_in(502, 503, 504), _say_status("")),
        ErrorRule("refused", (HttpStatus,), ApplyError, _status_in(*range(400, 600)), lambda exc: str(exc)),
        ErrorRule("certificate", (ssl.SSLError,), ApplyError, say=lambda exc: f"TLS failed: {exc}"),
        ErrorRule("timeout", (TimeoutError, socket.timeout), TargetUnavailable, say=lambda exc: "no answer in time"),
        ErrorRule(
            "no answer",
            (OSError, http.client.HTTPException),
            TargetUnavailable,
            say=lambda exc: f"the store does not answer ({type(exc).__name__}: {exc})",
        ),
    ),
    chain=False,
)


class Client:
    """Requests to the endpoints of one :class:`~.config.SparqlConfig`."""

    def __init__(self, config: SparqlConfig) -> None:
        self.config = config
        self._connections: dict[tuple[str, str, int | None], http.client.HTTPConnection] = {}
        self._context: ssl.SSLContext | None = None

    def _connection(self, parts: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        key = (parts.scheme, parts.hostname or "", parts.port)
        conn = self._connections.get(key)
        if conn is None:
            timeout = self.config.timeout
            if parts.scheme == "https":
                if self._context is None:
                    ca = self.config.ca
                    self._context = ssl.create_default_context(cafile=str(ca) if ca is not None else None)
                conn = http.client.HTTPSConnection(
                    parts.hostname or "", parts.port, timeout=timeout, context=self._context
                )
            else:
                conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
            self._connections[key] = conn
        return conn

    def request(
        self, method: str, url: str, body: bytes | None, headers: dict[str, str], *, retry_idle: bool = False
    ) -> bytes:
        """One request and its answer body; an error status raises :class:`HttpStatus`, the rest
        what the socket raised (callers translate with :data:`ERRORS`). With ``retry_idle`` a
        request that found its kept-alive connection closed is sent once more (reads only)."""
        parts = urllib.parse.urlsplit(url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        headers = dict(headers)
        if self.config.authorization is not None:
            headers["Authorization"] = self.config.authorization
        for attempt in (0, 1):
            conn = self._connection(parts)
            try:
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read(MAX_ANSWER)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._drop(parts)
                if retry_idle and attempt == 0:
                    continue
                raise
            except BaseException:
                self._drop(parts)
                raise
            if response.status >= 300:
                raise HttpStatus(method, url, response.status, data, response.getheader("WWW-Authenticate") or "")
            return data
        raise AssertionError("unreachable")

    def _drop(self, parts: urllib.parse.SplitResult) -> None:
        conn = self._connections.pop((parts.scheme, parts.hostname or "", parts.port), None)
        if conn is not None:
            conn.close()

    def update(self, text: str) -> None:
        """POST one SPARQL Update request (SPARQL 1.1 Protocol §2.2.2)."""
        self.request("POST", self.config.update, text.encode("utf-8"), {"Content-Type": "application/sparql-update"})

    def select(self, text: str) -> list[dict[str, Any]]:
        """The bindings of one SELECT query (SPARQL 1.1 Protocol §2.1.3, results as JSON)."""
        body = urllib.parse.urlencode({"query": text}).encode("utf-8")
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/sparql-results+json"}
        for attempt in range(DEADLOCK_RETRIES + 1):
            try:
                data = self.request("POST", self.config.query, body, headers, retry_idle=True)
                break
            except HttpStatus as exc:
                # A read that a writer deadlocked (Virtuoso 40001, SR172) changed nothing: again.
                if attempt == DEADLOCK_RETRIES or not (exc.status == 500 and "40001" in exc.message):
                    raise
        try:
            return list(json.loads(data)["results"]["bindings"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ApplyError(
                f"{self.config.query}: the answer is not SPARQL results in JSON ({exc}): wrong endpoint?"
            ) from None

    def post_graph(self, query: str, data: bytes, content_type: str) -> None:
        """POST RDF to the Graph Store (§5.5); ``query`` is the URL's query string (``graph=…``)."""
        store = self.config.store
        assert store is not None, "no Graph Store endpoint"
        url = store + ("?" + query if query else "")
        self.request("POST", url, data, {"Content-Type": content_type})

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
