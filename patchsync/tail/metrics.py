"""The tail daemon's metrics and health over HTTP: ``patchsync tail --metrics-listen HOST:PORT``.

Three paths, the same as on ``patchsync serve``:

- ``/$/metrics``: the Prometheus text format (``prometheus-client``), read from the
  daemon's source reports at scrape time, so scraping adds no work to the apply loop;
- ``/$/healthz``: 200 while the process answers;
- ``/$/ready``: 200 when the target is open and every source is live or finished, 503
  (one line saying why) while the target is being reopened or a source has failed.

The server runs on its own thread (:class:`http.server.ThreadingHTTPServer`): the daemon's
loop is synchronous and a scrape must not wait for a pass to end. It reads the reports
without a lock: each figure is one attribute read, and a scrape that sees one source a pass
ahead of another is still a true picture of a moment of each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

# Imported with the module, which `tail` imports before it opens anything: without the serve
# extra, --metrics-listen is refused before a target is created.
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

from patchsync.errors import UsageError
from patchsync.tail.follower import SourceReport

#: The text format's media type, as Prometheus scrapers expect it.
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
#: Shortest interval over which the per-second rates are computed again.
RATE_SECONDS = 1.0


class Observed(Protocol):
    """What the metrics read from the daemon (a :class:`~patchsync.tail.tailer.Tailer`)."""

    @property
    def retries(self) -> int:
        """Attempts to reconnect after losing the target or a source, so far."""

    @property
    def reconnecting(self) -> str | None:
        """What is being reconnected now: ``"target"``, ``"source"``, or ``None``."""

    def reports(self) -> list[SourceReport]:
        """The state of every source."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a pair; anything else is one line."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--metrics-listen {text}: expected HOST:PORT (for example 127.0.0.1:9464)")
    return host, int(port)


class _Rates:
    """Units and rows per second between two scrapes at least :data:`RATE_SECONDS` apart."""

    def __init__(self) -> None:
        self._at: dict[str, tuple[float, int, int]] = {}
        self._rate: dict[str, tuple[float, float]] = {}

    def of(self, report: SourceReport, now: float) -> tuple[float, float]:
        units, rows = report.result.units, report.result.rows
        before = self._at.get(report.source)
        if before is None:
            self._at[report.source] = (now, units, rows)
            return self._rate.get(report.source, (0.0, 0.0))
        at, units0, rows0 = before
        if now - at >= RATE_SECONDS:
            self._rate[report.source] = ((units - units0) / (now - at), (rows - rows0) / (now - at))
            self._at[report.source] = (now, units, rows)
        return self._rate.get(report.source, (0.0, 0.0))


class TailCollector:
    """A ``prometheus_client`` collector of one daemon's figures, per source."""

    def __init__(self, daemon: Observed) -> None:
        self.daemon = daemon
        self._rates = _Rates()
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Any]:
        def gauge(name: str, doc: str, unit: str = "") -> GaugeMetricFamily:
            return GaugeMetricFamily(f"patchsync_tail_{name}", doc, labels=["source"], unit=unit)

        def counter(name: str, doc: str) -> CounterMetricFamily:
            return CounterMetricFamily(f"patchsync_tail_{name}", doc, labels=["source"])

        position = gauge("applied_position", "Bytes of a log, or messages of a stream, applied whole")
        lag_patches = gauge("lag_patches", "Patches (stream messages) published after the applied position")
        lag_bytes = gauge("lag_bytes", "Bytes of the log after the applied position")
        lag_seconds = gauge("lag_seconds", "Age of the oldest patch not yet applied")
        units_rate = gauge("units_per_second", "Units committed per second since the previous scrape")
        rows_rate = gauge("rows_per_second", "Rows applied per second since the previous scrape")
        units = counter("units", "Units committed to the target")
        rows = counter("rows", "Rows applied to the target (added, deleted or already so)")
        patches = counter("patches", "Patches applied")
        live = gauge("up", "1 while the source is live or finished, 0 when starting or failed")
        error = InfoMetricFamily("patchsync_tail_last_error", "The error that stopped a source", labels=["source"])
        now = time.monotonic()
        with self._lock:
            for report in self.daemon.reports():
                src = [report.source]
                stream = report.applied_seq is not None
                position.add_metric(src, (report.applied_seq or 0) if stream else report.applied_end)
                if stream:
                    lag_patches.add_metric(src, report.lag_messages or 0)
                else:
                    lag_bytes.add_metric(src, report.lag_bytes)
                lag_seconds.add_metric(src, report.lag_seconds)
                u_rate, r_rate = self._rates.of(report, now)
                units_rate.add_metric(src, u_rate)
                rows_rate.add_metric(src, r_rate)
                units.add_metric(src, report.result.units)
                rows.add_metric(src, report.result.rows)
                patches.add_metric(src, report.result.patches)
                live.add_metric(src, 1 if report.state in ("live", "finished") else 0)
                if report.error:
                    error.add_metric(src, {"error": report.error})
        retries = CounterMetricFamily(
            "patchsync_tail_retries", "Attempts to reconnect after losing the target or a source"
        )
        retries.add_metric([], self.daemon.retries)
        yield from (position, lag_patches, lag_bytes, lag_seconds, units_rate, rows_rate)
        yield from (units, rows, patches, live, error, retries)


def readiness(daemon: Observed) -> str | None:
    """Why the daemon is not ready (one line), or ``None`` when it is."""
    if daemon.reconnecting is not None:
        return f"the {daemon.reconnecting} is out of reach; reconnecting"
    for report in daemon.reports():
        if report.state == "failed":
            return f"{report.source}: failed: {report.error}"
        if report.state == "starting":
            return f"{report.source}: not connected yet"
    return None


class MetricsServer:
    """``/$/metrics``, ``/$/healthz`` and ``/$/ready`` of one daemon on ``host:port``."""

    def __init__(self, daemon: Observed, host: str, port: int) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(TailCollector(daemon))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.partition("?")[0]
                if path == "/$/metrics":
                    self._send(200, generate_latest(registry), PROMETHEUS_TEXT)
                elif path == "/$/healthz":
                    self._send(200, b"ok\n")
                elif path == "/$/ready":
                    why = readiness(daemon)
                    self._send(503 if why else 200, f"{why or 'ready'}\n".encode())
                else:
                    self._send(404, f"{path}: not found (/$/metrics, /$/healthz, /$/ready)\n".encode())

            def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Scrapes are not logged: the daemon's log is for what it applies."""

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise UsageError(f"--metrics-listen {host}:{port}: {exc.strerror or exc}") from exc
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="tail-metrics", daemon=True)

    @property
    def port(self) -> int:
        """The port listened on (the one picked when 0 was asked)."""
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MetricsServer", "Observed", "TailCollector", "parse_listen", "readiness"]
