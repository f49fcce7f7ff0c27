"""The process's one Prometheus registry and the metric families every door records into.

Per topic: head version, appends, refusals by reason, bytes in and out, live subscribers;
per door, method and topic: request latency. A door serving ``/metrics`` renders
:meth:`ServeMetrics.render` (the Prometheus text format).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: Latency buckets (seconds): a commit takes about a millisecond, a catch-up may take minutes.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)


class ServeMetrics:
    """The metric families of one serve process, in their own registry."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.head_version = Gauge(
            "patchsync_topic_head_version", "Version of the topic's last patch", ["topic"], registry=r
        )
        self.appends = Counter("patchsync_topic_appends", "Patches appended to the topic", ["topic"], registry=r)
        self.duplicates = Counter(
            "patchsync_topic_duplicates", "Patches acknowledged as already in the topic", ["topic"], registry=r
        )
        self.refusals = Counter(
            "patchsync_topic_refusals", "Requests refused, by reason", ["topic", "reason"], registry=r
        )
        self.bytes = Counter(
            "patchsync_topic_bytes", "Patch bytes received (in) and sent (out)", ["topic", "direction"], registry=r
        )
        self.subscribers = Gauge(
            "patchsync_topic_subscribers", "Subscriptions open on the topic", ["topic"], registry=r
        )
        self.latency = Histogram(
            "patchsync_request_seconds",
            "Time to answer a request (a subscription: until it ends)",
            ["door", "method", "topic"],
            buckets=BUCKETS,
            registry=r,
        )

    @contextmanager
    def timed(self, door: str, method: str, topic: str) -> Iterator[None]:
        """Record the time the ``with`` block takes as one request of ``door``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.latency.labels(door, method, topic).observe(time.perf_counter() - start)

    def refused(self, topic: str, reason: str) -> None:
        """Count one refused request."""
        self.refusals.labels(topic, reason).inc()

    def render(self) -> bytes:
        """Every family in the Prometheus text format."""
        return generate_latest(self.registry)


__all__ = ["BUCKETS", "ServeMetrics"]
