"""Helpers for the stream tests: chained patch logs, and private nats-server processes.

The shared server at 127.0.0.1:4222 serves most tests (each on a stream of its own). Tests
that restart or kill servers start their own ``nats-server`` processes on free loopback
ports, with their own store directories, and stop them when done.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from patchsync.errors import PatchsyncError
from patchsync.events import Add, Delete, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.nats.errors import StreamRefused, StreamUnavailable
from patchsync.options import PatchOptions

from .helpers import worker_tag, write_log
from .process_helpers import wait_for

T = TypeVar("T")

NATS_SERVER = os.environ.get("PATCHSYNC_NATS_SERVER", "/usr/sbin/nats-server")
EX = "http://example.org/"


def unique_stream(prefix: str = "t") -> str:
    """A stream name no other test, xdist worker or concurrent run uses: ``t_gw0_4711_<random>``."""
    return f"{prefix}_{worker_tag()}_{uuid.uuid4().hex[:10]}"


def patch_id(tag: str, n: int) -> str:
    return f"urn:patch:{tag}:{n}"


def patch_events(tag: str, n: int, prev: str | None, *, size: int = 1, blob: str = "") -> list[Event]:
    """One patch (terms as N-Triples strings): ``size`` adds and, after the first, one delete."""
    events: list[Event] = [Header("id", f"<{patch_id(tag, n)}>")]
    if prev is not None:
        events.append(Header("prev", f"<{prev}>"))
    events.append(TxStart())
    for i in range(size):
        value = f'"{blob}{n}.{i}"' if blob else f'"v{n}.{i}"'
        events.append(Add(f"<{EX}s{n}>", f"<{EX}p{i}>", value, f"<{EX}g>"))
    if n > 1:
        events.append(Delete(f"<{EX}s{n - 1}>", f"<{EX}p0>", f'"v{n - 1}.0"', f"<{EX}g>"))
    events += [TxCommit(), PatchEnd()]
    return events


def write_chain(
    path: Path,
    tag: str,
    count: int,
    *,
    start: int = 1,
    prev: str | None = None,
    size: int = 1,
    big: Sequence[int] = (),
) -> list[str]:
    """Write patches ``start .. start+count-1`` of chain ``tag``; returns their ids.

    Patch ``n`` has ``prev`` = patch ``n-1`` (the given ``prev`` for the first). Patches
    listed in ``big`` carry a literal of 1.5 MiB (more than a default server message).
    """
    from patchsync.terms.ntriples import NTriplesTerms

    events: list[Event] = []
    ids = []
    for n in range(start, start + count):
        blob = "x" * (3 << 19) if n in big else ""
        events += patch_events(tag, n, prev, size=size, blob=blob)
        prev = patch_id(tag, n)
        ids.append(prev)
    write_log(path, events, options=PatchOptions(), adapter=NTriplesTerms())
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def reachable(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class NatsServer:
    """One nats-server process with JetStream, on loopback ports of its own."""

    def __init__(
        self,
        store: Path,
        *,
        name: str = "n1",
        port: int | None = None,
        cluster_port: int | None = None,
        routes: Sequence[int] = (),
        cluster_name: str = "patchsync",
    ) -> None:
        self.store = store
        self.name = name
        self.port = port or free_port()
        self.cluster_port = cluster_port
        self.routes = list(routes)
        self.cluster_name = cluster_name
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        argv = [NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store)]
        argv += ["--server_name", self.name]
        if self.cluster_port is not None:
            argv += ["--cluster", f"nats://127.0.0.1:{self.cluster_port}", "--cluster_name", self.cluster_name]
            if self.routes:
                argv += ["--routes", ",".join(f"nats://127.0.0.1:{p}" for p in self.routes)]
        return argv

    def start(self, timeout: float = 120.0) -> NatsServer:
        """Start the process and wait until it accepts connections (as long as it runs, up to
        ``timeout`` seconds: a loaded machine starts it slowly, a failed start ends it)."""
        self.store.mkdir(parents=True, exist_ok=True)
        log = open(self.store.parent / f"{self.name}.log", "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while not reachable(self.port, timeout=0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server {self.name} did not start: {self.argv()}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL: the server gets no chance to flush or hand over leadership."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None


class NatsCluster:
    """Three JetStream nodes on loopback ports, routed to each other."""

    def __init__(self, root: Path, size: int = 3) -> None:
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            NatsServer(
                root / f"n{i + 1}",
                name=f"n{i + 1}",
                cluster_port=cluster_ports[i],
                routes=[p for j, p in enumerate(cluster_ports) if j != i],
            )
            for i in range(size)
        ]

    def start(self) -> NatsCluster:
        for node in self.nodes:
            node.start()
        return self

    def node(self, name: str) -> NatsServer:
        return next(n for n in self.nodes if n.name == name)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


#: Seconds a step may go on failing without progress: a leader election, or a node catching
#: up, takes seconds, much longer on a loaded machine; only a cluster that never recovers
#: gets here.
STALL = 300.0


def alive(cluster: NatsCluster) -> list[NatsServer]:
    return [n for n in cluster.nodes if n.proc is not None]


def retrying(
    cluster: NatsCluster, stream: str, action: Callable[[str], T], progress: Callable[[], object] | None = None
) -> T:
    """Run ``action(url)`` against a live node until it succeeds; transient errors retry, for
    as long as ``progress()`` (if given) still moves, or ``STALL`` seconds without it."""
    done: list[T] = []
    last: list[PatchsyncError] = []

    def attempt() -> bool:
        for node in alive(cluster):
            try:
                done.append(action(f"{node.url}/{stream}"))
                return True
            except (StreamUnavailable, StreamRefused) as exc:
                # No leader yet ("JetStream system temporarily unavailable", insufficient
                # resources while a node is away): the cluster is electing.
                last[:] = [exc]
        return False

    try:
        wait_for(attempt, STALL, "the cluster to recover", progress=progress, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0] if last else 'no node alive'}") from None
    return done[0]
