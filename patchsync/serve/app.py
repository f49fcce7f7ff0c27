"""One ``patchsync serve`` process: its topics, its front doors, and a clean stop.

Front doors plug in through :mod:`patchsync.serve.doors`; every door shares the
process's :class:`ServeContext`: topics, tokens, limits, metrics.

Stopping (SIGTERM or SIGINT): no new request is taken; a publish stream gets no further
patch appended (each patch is appended whole or refused whole), subscriptions end with a
clean end of stream, the doors wait up to the grace period for requests in flight, the
logs are released, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from patchsync.errors import UsageError
from patchsync.serve.auth import Access
from patchsync.serve.catalog import Topics, build_topic, log_root_spec, log_root_specs, retire
from patchsync.serve.context import DoorFactory
from patchsync.serve.doors import DOORS, FrontDoor
from patchsync.serve.errors import ServeError, ShuttingDown, TooBusy, reason_of
from patchsync.serve.metrics import ServeMetrics
from patchsync.serve.settings import Address, ServeSettings
from patchsync.serve.tls import ServerTls, load_tls
from patchsync.serve.topics import Entry, LogTopic, Topic


class ServeContext:
    """What every front door of one process shares: settings, topics, metrics and the stop flag."""

    def __init__(
        self, settings: ServeSettings, topics: Topics, metrics: ServeMetrics | None = None, tls: ServerTls | None = None
    ) -> None:
        self.settings = settings
        self.topics = topics
        #: The certificate every door serves (``None``: no TLS), checked once.
        self.tls = tls
        self.metrics = metrics or ServeMetrics()
        self.stopping = False
        self._streams = 0
        self._catalog_lock = asyncio.Lock()
        for topic in topics:
            self._watch(topic)

    def _watch(self, topic: Topic) -> None:
        if isinstance(topic, LogTopic):
            topic.on_append = self._counter(topic)
            self.metrics.head_version.labels(topic.name).set(topic.version)

    async def create_topic(self, name: str) -> LogTopic:
        """A new log topic ``name``: a segment directory under ``--log-root`` (RDF Delta's
        ``create_datasource``); a name in use is refused with one line."""
        root = self.settings.log_root
        if root is None:
            raise UsageError(f"data source {name!r}: this server creates none (it was started without --log-root)")
        spec = log_root_spec(root, name)
        async with self._catalog_lock:
            if name in {t.name for t in self.topics}:
                raise UsageError(f"DataSource with name '{name}' already exists")
            topic = build_topic(spec, self.settings.topic_options)
            assert isinstance(topic, LogTopic)
            try:
                await topic.open()
            except OSError as exc:
                # The server's own disk, not the client's request: one line, a 500.
                raise ServeError(f"data source {name}: cannot create it ({exc.strerror or exc})") from None
            self.topics.add(topic)
            self._watch(topic)
            return topic

    async def remove_topic(self, name: str) -> None:
        """Stop serving topic ``name``; a topic under ``--log-root`` has its directory moved
        aside (``.removed/``), so it is not served again after a restart."""
        async with self._catalog_lock:
            topic = self.topics.remove(name)
            await topic.close()
            root = self.settings.log_root
            if root is not None and topic.spec == log_root_spec(root, name).partition("=")[2]:
                await asyncio.to_thread(retire, root, name)

    def _counter(self, topic: LogTopic) -> Callable[[Entry], None]:
        appends = self.metrics.appends.labels(topic.name)
        head = self.metrics.head_version.labels(topic.name)

        def count(entry: Entry) -> None:
            appends.inc()
            head.set(entry.version)

        return count

    def authorize(self, token: str | None, needed: Access, what: str) -> None:
        """The one token check of every door (raises ``Unauthenticated`` or ``Forbidden``)."""
        self.settings.tokens.check(token, needed, what)

    def refuse_if_stopping(self, what: str) -> None:
        """Refuse a request (or a patch of a publish stream) once the server is stopping."""
        if self.stopping:
            raise ShuttingDown(f"{what}: the server is stopping; nothing of this was done, send it again")

    @contextlib.asynccontextmanager
    async def stream(self, door: str, method: str, topic: str) -> AsyncIterator[None]:
        """Count one stream against the limit and time it."""
        if self._streams >= self.settings.max_streams:
            raise TooBusy(f"{method} {topic}: the server serves {self.settings.max_streams} streams already")
        self._streams += 1
        try:
            with self.metrics.timed(door, method, topic):
                yield
        finally:
            self._streams -= 1

    def refused(self, topic: str, exc: BaseException) -> None:
        """Count one refused request by the reason of ``exc`` (every door's error boundary
        calls this once per refusal). A name that is not a served topic is counted under
        ``""``: a client cannot grow the metrics by asking for names."""
        self.metrics.refused(topic if topic in self.topics else "", reason_of(exc))

    @property
    def open_streams(self) -> int:
        """Streams being served now."""
        return self._streams


class Server:
    """The topics and doors of one process; :meth:`run` serves until told to stop."""

    def __init__(self, settings: ServeSettings, *, announce: Callable[[str], None] | None = None) -> None:
        self.settings = settings.check()
        self.announce = announce or (lambda line: print(line, flush=True))
        for name in settings.listeners:
            if name in DOORS:
                DOORS[name].load()  # before a topic's directory is made: a missing extra is refused first
        tls = None
        if settings.tls_cert is not None and settings.tls_key is not None:
            tls = load_tls(settings.tls_cert, settings.tls_key)
        specs = list(settings.topics)
        if settings.log_root is not None:
            given = {t.partition("=")[0] for t in specs}
            specs += log_root_specs(settings.log_root, given)
        self.topics = Topics([build_topic(t, settings.topic_options) for t in specs])
        self.context = ServeContext(settings, self.topics, tls=tls)
        self.doors: list[FrontDoor] = []
        self.addresses: dict[str, str] = {}
        self._stop = asyncio.Event()
        self._metrics_server: Any = None

    async def start(self) -> None:
        """Open the topics and start every door."""
        await self.topics.open()
        for topic in self.topics:
            if isinstance(topic, LogTopic):
                self.context.metrics.head_version.labels(topic.name).set(topic.version)
        try:
            for name, address in sorted(self.settings.listeners.items()):
                kind = DOORS.get(name)
                if kind is None:
                    raise UsageError(f"no front door named {name} (known: {', '.join(sorted(DOORS))})")
                factory: DoorFactory = kind.load()
                door = factory(self.context, address)
                bound = await door.start()
                self.doors.append(door)
                self.addresses[name] = bound
                self.announce(f"serving {name} on {bound}")
            if self.settings.metrics is not None:
                self._start_metrics(self.settings.metrics)
        except BaseException:
            await self.stop()
            raise

    def _start_metrics(self, address: Address) -> None:
        from prometheus_client import start_http_server

        self._metrics_server = start_http_server(address.port, address.host, registry=self.context.metrics.registry)
        server = self._metrics_server[0] if isinstance(self._metrics_server, tuple) else None
        port = server.server_port if server is not None else address.port
        self.addresses["metrics"] = f"{address.host}:{port}"
        self.announce(f"serving metrics on {address.host}:{port}")

    def request_stop(self) -> None:
        """Begin stopping (signal handlers call this)."""
        self.context.stopping = True
        self._stop.set()

    async def stop(self) -> None:
        """Refuse new work, end subscriptions, let requests in flight finish, release the topics."""
        self.context.stopping = True
        for topic in self.topics:
            if isinstance(topic, LogTopic):
                topic.hub.close()
        await asyncio.gather(*(door.stop(self.settings.grace) for door in self.doors))
        self.doors.clear()
        if self._metrics_server is not None and isinstance(self._metrics_server, tuple):
            self._metrics_server[0].shutdown()
        await self.topics.close()

    async def run(self) -> None:
        """Start, serve until SIGTERM or SIGINT, stop."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self.start()
        try:
            await self._stop.wait()
        finally:
            await self.stop()
            self.announce("stopped")


def serve(settings: ServeSettings) -> int:
    """Run a serve process until it is told to stop; returns the exit code (0)."""
    asyncio.run(Server(settings).run())
    sys.stdout.flush()
    return 0


__all__ = ["ServeContext", "Server", "serve"]
