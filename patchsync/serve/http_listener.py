"""The HTTP door's listening socket: aiohttp's connection handler behind the server's bounds.

aiohttp parses requests and runs the door's handlers; this module decides which connections
reach it and for how long (the rules are :mod:`patchsync.serve.connections`'):

- a connection over the per-client or the total bound is answered one ``503`` line and
  closed before aiohttp sees it;
- a request's line and headers must arrive within the header timeout of their first byte,
  and a connection with no request in progress is closed after the idle timeout (aiohttp's
  keep-alive timeout, which also runs from the moment a connection opens);
- running out of file descriptors while accepting is one line in the log, not a traceback,
  and accepting resumes by itself (asyncio retries a second later);
- what aiohttp logs of a connection that is not HTTP (a gRPC client on the HTTP port, a TLS
  client on a plain one) is one line, not a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from patchsync.serve.connections import ConnectionTable

log = logging.getLogger("patchsync.serve")
#: The logger aiohttp's connection handlers are given (its lines made one line each).
http_log = logging.getLogger("patchsync.serve.http")

#: Seconds an unread request body is read and dropped after the answer (aiohttp's
#: "lingering"), so a refused client still reads its answer; kept short against floods.
LINGER = 2.0


class OneLine(logging.Filter):
    """Rewrites a record of a request aiohttp could not parse into one line without its
    traceback: such a request is the client's fault, the server has no bug to show."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            text = " ".join(str(exc.message).split())[:200]
            record.msg = "%s: not an HTTP/1.1 request (%s); the connection is closed"
            record.args = (_peer_of(record), text)
            record.exc_info = None
            record.exc_text = None
        return True


def _peer_of(record: logging.LogRecord) -> str:
    args = record.args if isinstance(record.args, tuple) else ()
    return str(args[0]) if args else "a client"


http_log.addFilter(OneLine())


class OneLineHandler(RequestHandler):
    """aiohttp's connection handler, answering a request it cannot parse in one line (its
    own answer is several lines quoting the bytes)."""

    __slots__ = ()

    def handle_error(
        self, request: Any, status: int = 500, exc: BaseException | None = None, message: str | None = None
    ) -> web.StreamResponse:
        if message is not None:
            message = "bad request: " + " ".join(message.split())[:200] + "\n"
        return super().handle_error(request, status, exc, message)


def refusal(line: str) -> bytes:
    """A whole ``503`` answer of one line, closing the connection."""
    body = (line + "\n").encode("utf-8")
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class Guard(asyncio.Protocol):
    """One accepted connection: counted, timed while it sends headers, then aiohttp's."""

    def __init__(self, listener: Listener, inner: asyncio.Protocol) -> None:
        self.listener = listener
        self.inner = inner
        self.client = ""
        self.admitted = False
        self.busy = False
        self.transport: asyncio.Transport | None = None
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.client = str(peer[0]) if peer else "?"
        why = self.listener.table.admit(self.client)
        if why is not None:
            transport.write(refusal(why))
            transport.close()
            self.listener.on_refused(why)
            return
        self.admitted = True
        self.listener.guards[self.inner] = self
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self._stop_timer()
        self.listener.table.release(self.client)
        self.listener.guards.pop(self.inner, None)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        if not self.busy and self._header_timer is None:
            self._header_timer = asyncio.get_running_loop().call_later(self.listener.header_timeout, self._headers_late)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.admitted else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def request_started(self) -> None:
        """The headers of a request arrived whole (its handler runs)."""
        self.busy = True
        self._stop_timer()

    def request_ended(self) -> None:
        self.busy = False

    def _stop_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.busy and self.transport is not None:
            self.transport.abort()


class Listener:
    """The listening socket of the HTTP door and the bounds of its connections."""

    def __init__(
        self,
        runner: web.AppRunner,
        table: ConnectionTable,
        *,
        header_timeout: float,
        on_refused: Callable[[str], None],
        handler_args: dict[str, Any] | None = None,
    ) -> None:
        self.runner = runner
        #: What aiohttp's connection handlers are made with (what the runner was given).
        self.handler_args = handler_args or {}
        self.table = table
        self.header_timeout = header_timeout
        self.on_refused = on_refused
        self.guards: dict[Any, Guard] = {}
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous_handler: Any = None

    def _protocol(self) -> Guard:
        server = self.runner.server
        assert server is not None
        # What web.Server() makes, with the handler class above and the runner's settings.
        handler = OneLineHandler(server, loop=asyncio.get_running_loop(), **self.handler_args)
        return Guard(self, handler)

    async def start(self, host: str, port: int, context: ssl.SSLContext | None) -> int:
        """Listen at ``host:port``; returns the port bound. ``OSError`` when it cannot."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol,
            host,
            port,
            ssl=context,
            ssl_handshake_timeout=self.header_timeout if context is not None else None,
            backlog=128,
        )
        self._loop = loop
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_error)
        return int(self._server.sockets[0].getsockname()[1])

    def guard_of(self, protocol: Any) -> Guard | None:
        """The guard of the connection aiohttp's handler ``protocol`` serves."""
        return self.guards.get(protocol)

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            log.error(
                "serve: out of file descriptors (%s) while accepting a connection; accepting again in a second "
                "(raise the open-file limit, or lower --max-client-connections)",
                errno.errorcode.get(exc.errno or 0, "EMFILE"),
            )
            return
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def stop(self) -> None:
        """Take no new connection (those open are the runner's to close)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._loop is not None:
            self._loop.set_exception_handler(self._previous_handler)
            self._loop = None


__all__ = ["LINGER", "Guard", "Listener", "OneLine", "OneLineHandler", "http_log", "refusal"]
