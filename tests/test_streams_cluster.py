"""A replicated stream (R3) on a three-node JetStream cluster started by the test.

One node is killed (SIGKILL) while patches are being published: the publisher reconnects
and resumes, and the stream ends up holding every patch exactly once, in order; the
killed node rejoins and catches up, so the stream survives losing another node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchsync.nats import NatsLog, PublishReport, StreamSettings, StreamUnavailable, publish_logs

from .nats_helpers import STALL, NatsCluster, retrying, write_chain
from .process_helpers import wait_for


def all_ids(url: str) -> list[str]:
    with NatsLog(url) as log:
        last, seq, out = log.last_seq(), 1, []
        while seq <= last:
            msgs = log.fetch(seq, 200, timeout=5)
            if not msgs:
                raise StreamUnavailable(f"{url}: no message at {seq} yet (a node still catching up)")
            assert msgs[0].seq == seq
            out += [m.headers["Nats-Msg-Id"] for m in msgs]
            seq = msgs[-1].seq + 1
        return out


@pytest.mark.slow
def test_a_replicated_stream_loses_and_doubles_nothing_when_a_node_dies(
    tmp_path: Path, nats_server_binary: str
) -> None:
    cluster = NatsCluster(tmp_path).start()
    try:
        stream = "r3"
        settings = StreamSettings(replicas=3)

        def create(url: str) -> int:
            with NatsLog(url) as log:
                return log.ensure_stream(replicas=3).replicas

        assert retrying(cluster, stream, create) == 3
        log_path = tmp_path / "a.jellyp"
        ids = write_chain(log_path, "r3", 200, size=5)

        with NatsLog(f"{cluster.nodes[0].url}/{stream}") as log:
            leader = log.leader()
        assert leader in {"n1", "n2", "n3"}
        killed: list[str] = []
        published: list[int] = []

        def kill_leader_midway(message, result) -> None:  # type: ignore[no-untyped-def]
            published.append(result.seq)
            if result.seq == 60 and not killed:
                cluster.node(leader).kill()
                killed.append(leader)

        def publish(url: str) -> PublishReport:
            return publish_logs([log_path], url, settings=settings, on_published=kill_leader_midway)

        # A run cut off by the election fails with StreamUnavailable; the next resumes. The
        # patches published so far are the progress: each run that gets some in goes on.
        report = retrying(cluster, stream, publish, progress=lambda: len(published))
        assert killed == [leader]
        assert report.head == ids[-1]
        # Nothing lost, nothing twice (reads too may meet an election: retried).
        assert retrying(cluster, stream, all_ids) == ids

        # The killed node rejoins and catches up: the stream then survives losing another.
        cluster.node(leader).start()

        def peers(url: str) -> list[tuple[bool, int]]:
            """Each follower's (current, lag) as the stream's leader sees it."""
            with NatsLog(url) as log:

                async def replicas() -> list[tuple[bool, int]]:
                    info = await log.js.stream_info(log.name)
                    found = info.cluster.replicas if info.cluster and info.cluster.replicas else []
                    return [(bool(p.current), int(p.lag or 0)) for p in found]

                return log.run(replicas)

        def caught_up() -> bool:
            state = retrying(cluster, stream, peers)
            return len(state) == 2 and all(current and not lag for current, lag in state)

        # As long as the followers' state still changes (the lag shrinking), it is catching up.
        wait_for(
            caught_up,
            STALL,
            "the restarted node to catch up",
            progress=lambda: retrying(cluster, stream, peers),
            interval=0.5,
        )
        other = next(n for n in cluster.nodes if n.name != leader)
        other.kill()
        assert retrying(cluster, stream, all_ids) == ids
    finally:
        cluster.stop()
