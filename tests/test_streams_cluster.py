"""A replicated stream (R3) on a three-node JetStream cluster started by the test.

One node is killed (SIGKILL) while patches are being published: the publisher reconnects
and resumes, and the stream ends up holding every patch exactly once, in order; the
killed node rejoins and catches up, so the stream survives losing another node.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from patchsync.errors import PatchsyncError
from patchsync.streams import NatsLog, PublishReport, StreamRefused, StreamSettings, StreamUnavailable, publish_logs

from .nats_helpers import NatsCluster, NatsServer, write_chain

DEADLINE = 90.0  # seconds for the whole scenario on a loaded machine


def alive(cluster: NatsCluster) -> list[NatsServer]:
    return [n for n in cluster.nodes if n.proc is not None]


def retrying(cluster: NatsCluster, stream: str, action, deadline: float):  # type: ignore[no-untyped-def]
    """Run ``action(url)`` against a live node until it succeeds; transient errors retry."""
    while True:
        for node in alive(cluster):
            try:
                return action(f"{node.url}/{stream}")
            except (StreamUnavailable, StreamRefused) as exc:
                # No leader yet ("JetStream system temporarily unavailable", insufficient
                # resources while a node is away): the cluster is electing.
                last: PatchsyncError = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"the cluster did not recover in time: {last}")
        time.sleep(0.5)


def all_ids(url: str) -> list[str]:
    with NatsLog(url) as log:
        last, seq, out = log.last_seq(), 1, []
        while seq <= last:
            msgs = log.fetch(seq, 200, timeout=5)
            assert msgs and msgs[0].seq == seq
            out += [m.headers["Nats-Msg-Id"] for m in msgs]
            seq = msgs[-1].seq + 1
        return out


@pytest.mark.slow
def test_a_replicated_stream_loses_and_doubles_nothing_when_a_node_dies(
    tmp_path: Path, nats_server_binary: str
) -> None:
    deadline = time.monotonic() + DEADLINE
    cluster = NatsCluster(tmp_path).start()
    try:
        stream = "r3"
        settings = StreamSettings(replicas=3)

        def create(url: str) -> int:
            with NatsLog(url) as log:
                return log.ensure_stream(replicas=3).replicas

        assert retrying(cluster, stream, create, deadline) == 3
        log_path = tmp_path / "a.jellyp"
        ids = write_chain(log_path, "r3", 200, size=5)

        with NatsLog(f"{cluster.nodes[0].url}/{stream}") as log:
            leader = log.leader()
        assert leader in {"n1", "n2", "n3"}
        killed: list[str] = []

        def kill_leader_midway(message, result) -> None:  # type: ignore[no-untyped-def]
            if result.seq == 60 and not killed:
                cluster.node(leader).kill()
                killed.append(leader)

        def publish(url: str) -> PublishReport:
            return publish_logs([log_path], url, settings=settings, on_published=kill_leader_midway)

        # A run cut off by the election fails with StreamUnavailable; the next resumes.
        report = retrying(cluster, stream, publish, deadline)
        assert killed == [leader]
        assert report.head == ids[-1]
        # Nothing lost, nothing twice (reads too may meet an election: retried).
        assert retrying(cluster, stream, all_ids, deadline) == ids

        # The killed node rejoins and catches up: the stream then survives losing another.
        cluster.node(leader).start()

        def caught_up(url: str) -> bool:
            with NatsLog(url) as log:

                async def replicas() -> bool:
                    info = await log.js.stream_info(log.name)
                    peers = info.cluster.replicas if info.cluster and info.cluster.replicas else []
                    return len(peers) == 2 and all(p.current and not p.lag for p in peers)

                return log.run(replicas)

        while not retrying(cluster, stream, caught_up, deadline):
            assert time.monotonic() < deadline, "the restarted node did not catch up"
            time.sleep(0.5)
        other = next(n for n in cluster.nodes if n.name != leader)
        other.kill()
        assert retrying(cluster, stream, all_ids, deadline) == ids
    finally:
        cluster.stop()
