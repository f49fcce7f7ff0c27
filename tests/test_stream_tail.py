"""``patchsync publish`` and ``patchsync tail nats://...`` as processes, against real servers.

Issue #15: the shared server (127.0.0.1:4222, one stream per test) for most tests; a
private ``nats-server`` for the restart under the daemon and a three-node cluster for the
replicated stream (tests/nats_helpers.py). Every replica's target is compared with a plain
``apply`` of the same log (a differential test): while running, after ``kill -9`` at
random moments, and at the end.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.targets.sql import SqlTarget
from patchsync.nats import NatsLog, StreamUnavailable, log_patches, publish_logs

from .apply_helpers import state
from .nats_helpers import NatsCluster, NatsServer, patch_id, retrying, write_chain
from .process_helpers import read_until, stop, wait_for, wait_for_value

# -- helpers -----------------------------------------------------------------------------


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def start_tail(url: str, target: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", "tail", url, "--target", target, "--poll-interval", "0.3", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def reference(log: Path) -> Any:
    """What a plain ``apply`` of the log leaves."""
    target = MemoryTarget()
    apply_file(log, target)
    return state(target)


_PREFIXES: dict[Path, list[Any]] = {}


def prefix_states(log: Path) -> list[Any]:
    """The reference state after each number of patches of ``log`` (index 0: empty)."""
    if log not in _PREFIXES:
        from patchsync.apply import apply_events
        from patchsync.logs.patch_logs import read_events

        target = MemoryTarget()
        out = [state(target)]
        events = list(read_events(log, adapter=target.adapter))
        patch: list[Any] = []
        for event in events:
            patch.append(event)
            if type(event).__name__ == "PatchEnd":
                apply_events(patch, target, source="ref")
                out.append(state(target))
                patch = []
        _PREFIXES[log] = out
    return _PREFIXES[log]


def sql_state(url: str) -> Any:
    with SqlTarget(url) as t:
        return state(t)


def stream_name(url: str) -> str:
    from patchsync.nats import parse_stream_url

    return str(parse_stream_url(url))


def applied(target: str, stream: str) -> int:
    """Patches of ``stream`` the target holds (-1 while the database is not there yet)."""
    try:
        with SqlTarget(target) as t:
            # An observer's read: checkpoint() would take the source's turn from the daemon.
            cps = {s.source: s.checkpoint for s in t.sources()}
    except Exception:
        return -1
    cp = cps.get(stream_name(stream))
    return cp.patches if cp is not None else 0


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("patchsync:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


# -- publish -----------------------------------------------------------------------------


def test_publish_is_resumable_deduplicated_and_refuses_a_fork(tmp_path: Path, nats_stream: str) -> None:
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "p", 12, size=2)
    first = cli("publish", str(log), nats_stream, "--max-msgs", "1000")
    assert first.returncode == 0, first.stderr
    assert "12 patches published, 0 already in the stream" in first.stdout
    again = cli("publish", str(log), nats_stream)
    assert again.returncode == 0, again.stderr
    assert "0 patches published, 12 already in the stream" in again.stdout
    with NatsLog(nats_stream) as s:
        assert s.last_seq() == 12 and s.head().patch_id == ids[-1]
    # A log with another chain does not follow the stream's head: one line naming both ids.
    fork = tmp_path / "fork.rdfp"
    fork_ids = write_chain(fork, "f", 2)
    refused = cli("publish", str(fork), nats_stream)
    assert refused.returncode == 1
    line = one_line(refused.stderr)
    assert fork_ids[0] in line and ids[-1] in line and stream_name(nats_stream) in line
    with NatsLog(nats_stream) as s:
        assert s.last_seq() == 12


def test_concurrent_duplicate_publishers_store_each_patch_once(tmp_path: Path, nats_stream: str) -> None:
    # Issue #15 "duplicate publishing": two publishers of the same log at once.
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "d", 60)
    procs = [
        subprocess.Popen([sys.executable, "-m", "patchsync", "publish", str(log), nats_stream], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for p in procs:
        p.communicate(timeout=60)
    # A publisher that lost a race sees a fork (exit 1) or only duplicates (exit 0); the
    # stream holds the chain once either way, and a rerun completes it if both lost.
    assert cli("publish", str(log), nats_stream).returncode == 0
    with NatsLog(nats_stream) as s:
        msgs = s.fetch(1, 200, timeout=2)
    assert [m.headers["Nats-Msg-Id"] for m in msgs] == ids


def test_a_patch_over_the_message_limit_is_refused_and_the_ones_before_stay(tmp_path: Path, nats_stream: str) -> None:
    # docs/design.md §9: a patch is never split; a larger one is refused with one line.
    log = tmp_path / "big.jellyp"
    ids = write_chain(log, "b", 4, big=(3,))
    result = cli("publish", str(log), nats_stream)
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert ids[2] in line and "at most" in line and "never split" in line
    with NatsLog(nats_stream) as s:
        assert s.last_seq() == 2 and s.head().patch_id == ids[1]


def test_publish_usage_errors_are_one_line() -> None:
    assert "nats://HOST:PORT/STREAM" in one_line(cli("publish", "a.jellyp").stderr)
    bad = cli("publish", "nope.jellyp", "nats://127.0.0.1:4222/x")
    assert bad.returncode == 2 and "nope.jellyp: no such file" in one_line(bad.stderr)


# -- tail --------------------------------------------------------------------------------


def test_two_replicas_follow_one_stream_independently(tmp_path: Path, nats_stream: str, daemons: list[Any]) -> None:
    log = tmp_path / "a.rdfp"
    write_chain(log, "r", 40, size=3)
    publish_logs([log], nats_stream)
    live = f"sqlite:///{tmp_path / 'live.db'}"
    daemon = start_tail(nats_stream, live)
    daemons.append(daemon)
    wait_for_value(lambda: applied(live, nats_stream), 40, "the live replica")
    # The second replica starts later, catches up with --once and exits 0.
    late = f"sqlite:///{tmp_path / 'late.db'}"
    once = cli("tail", nats_stream, "--target", late, "--once")
    assert once.returncode == 0, once.stderr
    assert sql_state(late) == sql_state(live) == reference(log)
    # More patches: the daemon applies them as they come, the other replica on its next run.
    more = tmp_path / "b.rdfp"
    write_chain(more, "r", 80, size=3)
    publish_logs([more], nats_stream)
    wait_for_value(lambda: applied(live, nats_stream), 80, "new patches")
    code, err = stop(daemon)
    assert code == 0, err
    assert "lag_messages=" in err and "applied_seq=80" in err
    # Waiting on an idle stream is not losing the server.
    assert "_unavailable" not in err
    assert sql_state(live) == reference(more) != sql_state(late)
    assert cli("tail", nats_stream, "--target", late, "--once").returncode == 0
    assert sql_state(late) == reference(more)
    # status reads the checkpoint from the target and asks the server for the lag.
    status = cli("status", "--target", late, "--json")
    row = json.loads(status.stdout)["sources"][0]
    assert (row["source"], row["position"]["seq"], row["lag_messages"]) == (stream_name(nats_stream), 80, 0)
    extra = tmp_path / "c.rdfp"
    write_chain(extra, "r", 85, size=3)
    publish_logs([extra], nats_stream)
    status = cli("status", "--target", late)
    assert "sequence 80" in status.stdout and "5 messages" in status.stdout


def test_a_malformed_message_stops_the_replica_before_it_with_one_line(
    tmp_path: Path, nats_stream: str, daemons: list[Any]
) -> None:
    # Issue #15: one line naming the stream and sequence; nothing of that message applied.
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "m", 5, size=4)
    publish_logs([log], nats_stream)
    after = tmp_path / "b.jellyp"
    write_chain(after, "m", 6, size=4)
    sixth = list(log_patches(after))[5]
    with NatsLog(nats_stream) as s:
        cut = sixth.payload[: len(sixth.payload) - 5]  # its rows up to the last few survive

        async def send() -> None:
            await s.js.publish(s.subject, cut, stream=s.name, headers={"Nats-Msg-Id": sixth.patch_id})

        s.run(send)
    target = f"sqlite:///{tmp_path / 'r.db'}"
    daemon = start_tail(nats_stream, target)
    daemons.append(daemon)
    # The daemon (not --once) stops by itself, exit 1, with one line.
    _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 1
    assert f"{stream_name(nats_stream)} sequence 6" in one_line(err)
    assert sql_state(target) == reference(log)
    with SqlTarget(target) as t:
        cp = t.checkpoint(stream_name(nats_stream))
    assert cp is not None and (cp.offset, cp.last_id) == (5, ids[-1])
    once = cli("tail", nats_stream, "--target", target, "--once")
    assert once.returncode == 1
    line = one_line(once.stderr)
    assert f"{stream_name(nats_stream)} sequence 6" in line
    assert sql_state(target) == reference(log)


@pytest.mark.slow
def test_kill_9_loop_of_the_daemon_applies_every_patch_exactly_once(
    tmp_path: Path, nats_stream: str, daemons: list[Any]
) -> None:
    rng = random.Random(15)
    target = f"sqlite:///{tmp_path / 'r.db'}"
    total = 400
    full = tmp_path / "full.jellyp"
    write_chain(full, "k", total, size=3)
    states = prefix_states(full)
    # A publisher keeps the stream growing while the daemon is killed again and again.
    publisher = threading.Thread(
        target=publish_logs, args=([full], nats_stream), kwargs={"on_published": lambda m, r: time.sleep(0.03)}
    )
    publisher.start()
    seen: set[int] = set()
    try:
        kills = 0
        while kills < 10 and applied(target, nats_stream) < total:
            before = applied(target, nats_stream)
            d = start_tail(nats_stream, target)
            daemons.append(d)
            wait_for(lambda b=before: applied(target, nats_stream) > b, what="progress")
            time.sleep(rng.uniform(0.0, 0.3))
            d.kill()
            d.communicate()
            kills += 1
            n = applied(target, nats_stream)
            seen.add(n)
            # After kill -9 the target holds exactly the patches up to its checkpoint.
            assert sql_state(target) == states[max(n, 0)], n
    finally:
        publisher.join()
    assert len(seen) >= 3  # killed at many points of the stream
    final = cli("tail", nats_stream, "--target", target, "--once")
    assert final.returncode == 0, final.stderr
    assert applied(target, nats_stream) == total
    assert sql_state(target) == states[total] == reference(full)


@pytest.mark.slow
def test_the_daemon_rides_out_a_server_restart(tmp_path: Path, nats_server_binary: str, daemons: list[Any]) -> None:
    server = NatsServer(tmp_path / "store").start()
    try:
        url = f"{server.url}/restart"
        log = tmp_path / "a.jellyp"
        write_chain(log, "s", 30, size=2)
        publish_logs([log], url)
        target = f"sqlite:///{tmp_path / 'r.db'}"
        daemon = start_tail(url, target, "--retry-max-delay", "1")
        daemons.append(daemon)
        wait_for_value(lambda: applied(target, url), 30, "the first patches")
        server.stop()
        # status still answers, and says it could not ask the server.
        status = cli("status", "--target", target)
        assert "lag unknown" in status.stdout and "sequence 30" in status.stdout
        # The daemon noticed, however long a loaded machine took.
        noticed = read_until(daemon, "event=source_unavailable")
        server.start()
        more = tmp_path / "b.jellyp"
        write_chain(more, "s", 60, size=2)

        def published() -> bool:
            try:
                publish_logs([more], url)
            except StreamUnavailable:
                return False  # JetStream still recovering its streams
            return True

        wait_for(published, 120, "the restarted server to take patches", interval=0.3)
        wait_for_value(lambda: applied(target, url), 60, "patches after the restart")
        code, err = stop(daemon)
        err = noticed + err
        assert code == 0, err
        assert "event=reconnected" in err
        assert sql_state(target) == reference(more)
    finally:
        server.stop()


@pytest.mark.slow
def test_a_replica_follows_a_replicated_stream_while_a_node_dies(
    tmp_path: Path, nats_server_binary: str, daemons: list[Any]
) -> None:
    cluster = NatsCluster(tmp_path).start()
    try:
        stream = "r3tail"

        def create(url: str) -> int:
            with NatsLog(url) as log:
                return log.ensure_stream(replicas=3).replicas

        assert retrying(cluster, stream, create) == 3
        log = tmp_path / "a.jellyp"
        write_chain(log, "c", 150, size=3)
        # The replica reads through n1; the node killed is another one (the leader when
        # it is not n1), while patches are being published and replicated.
        with NatsLog(f"{cluster.nodes[0].url}/{stream}") as s:
            leader = s.leader()
        victim = leader if leader != "n1" else "n2"
        url = f"{cluster.nodes[0].url}/{stream}"
        target = f"sqlite:///{tmp_path / 'r.db'}"
        daemon = start_tail(url, target, "--retry-max-delay", "1")
        daemons.append(daemon)
        killed: list[str] = []
        published: list[int] = []

        def kill_midway(message: Any, result: Any) -> None:
            published.append(result.seq)
            if result.seq == 50 and not killed:
                cluster.node(victim).kill()
                killed.append(victim)

        def publish(u: str) -> Any:
            return publish_logs([log], u, on_published=kill_midway)

        retrying(cluster, stream, publish, progress=lambda: len(published))
        assert killed == [victim]
        wait_for_value(lambda: applied(target, url), 150, "the replica to catch up", timeout=90)
        code, err = stop(daemon)
        assert code == 0, err
        assert sql_state(target) == reference(log)
    finally:
        cluster.stop()


def test_a_recreated_stream_is_not_taken_for_the_old_one(tmp_path: Path, nats_stream: str) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "x", 3)
    publish_logs([log], nats_stream)
    target = f"sqlite:///{tmp_path / 'r.db'}"
    assert cli("tail", nats_stream, "--target", target, "--once").returncode == 0
    with NatsLog(nats_stream) as s:
        s.delete_stream()
    publish_logs([log], nats_stream)
    again = cli("tail", nats_stream, "--target", target, "--once")
    assert again.returncode != 0
    assert "--reset" in one_line(again.stderr)
    assert sql_state(target) == reference(log)
    # --reset starts it over: every patch is already there (skipped by id), nothing changes.
    reset = cli("tail", nats_stream, "--target", target, "--once", "--reset")
    assert reset.returncode == 0, reset.stderr
    assert sql_state(target) == reference(log)
    with SqlTarget(target) as t:
        cp = t.checkpoint(stream_name(nats_stream))
    assert cp is not None and (cp.offset, cp.last_id) == (3, patch_id("x", 3))


@pytest.mark.parametrize("once", [["--once"], []], ids=["once", "daemon"])
def test_tailing_a_missing_stream_is_one_line(tmp_path: Path, nats_stream: str, once: list[str]) -> None:
    missing = cli("tail", nats_stream, "--target", f"sqlite:///{tmp_path / 'r.db'}", *once)
    assert missing.returncode == 2
    assert f"{stream_name(nats_stream)}: no such stream on the server" in one_line(missing.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no replica made for a stream that is not there
    bad = cli("tail", "nats://127.0.0.1:4222/no.dots", "--target", f"sqlite:///{tmp_path / 'r.db'}", "--once")
    assert bad.returncode == 2 and "is not allowed" in one_line(bad.stderr)


def test_a_patch_interrupted_between_its_transactions_resumes_inside_its_message(
    tmp_path: Path, nats_stream: str
) -> None:
    # docs/design.md §9: the checkpoint's message is re-read when it was not applied whole;
    # the applier passes over its units already applied (docs/design.md §3).
    from patchsync.apply.applier import Applier
    from patchsync.events import Add, Header, PatchEnd, TxCommit, TxStart
    from patchsync.logs.patch_logs import write_events
    from patchsync.nats import decode_message
    from patchsync.options import PatchOptions
    from patchsync.remote.rules import resume_position
    from patchsync.tail import Tailer, TailOptions
    from patchsync.terms.ntriples import NTriplesTerms

    ex = "http://example.org/"
    events: list[Any] = []
    for n in (1, 2):
        events += [Header("id", f"<urn:two:{n}>")] + ([Header("prev", "<urn:two:1>")] if n == 2 else [])
        for t in (1, 2):
            events += [TxStart(), Add(f"<{ex}s{n}>", f"<{ex}t{t}>", f'"{n}.{t}"', f"<{ex}g>"), TxCommit()]
        events.append(PatchEnd())
    log = tmp_path / "two.jellyp"
    with open(log, "wb") as f:
        write_events(events, f, "jellyp", options=PatchOptions(), adapter=NTriplesTerms())
    publish_logs([log], nats_stream)
    target = MemoryTarget()
    source = stream_name(nats_stream)
    with NatsLog(nats_stream) as s:
        fingerprint = s.fingerprint()
        first, second = s.fetch(1, 2, timeout=2)
        applier = Applier(target, source=source, fingerprint=fingerprint)
        applier.feed(decode_message(first, source, adapter=target.adapter))
        # Message 2 up to its second TX: the first transaction commits, then the "crash".
        rows = decode_message(second, source, adapter=target.adapter)
        cut = [i for i, e in enumerate(rows) if type(e) is TxStart][1]
        applier.feed(rows[: cut + 1])
        target.rollback()
        cp = target.checkpoint(source)
        assert cp is not None and (cp.offset, cp.last_id) == (2, "urn:two:1")
        assert resume_position(s, cp) == 2  # message 2 was not applied whole: read again
    with Tailer([nats_stream], target, TailOptions()) as tailer:
        (report,) = tailer.run_once()
    assert report.result.replayed > 0 and report.result.patches == 1
    assert state(target) == reference(log)
    cp = target.checkpoint(source)
    assert cp is not None and (cp.offset, cp.last_id) == (2, "urn:two:2")


def test_an_unreachable_server_is_not_reported_as_reconnected(tmp_path: Path) -> None:
    # Reopening the target works (a local SQLite file) while the stream's server stays out
    # of reach: that is no reconnect, and the daemon must not say it is one.
    from .nats_helpers import free_port

    url = f"nats://127.0.0.1:{free_port()}/gone"
    run = cli("tail", url, "--target", f"sqlite:///{tmp_path / 'r.db'}", "--retry-timeout", "2")
    assert run.returncode != 0
    assert "the source stayed unavailable" in one_line(run.stderr)
    assert run.stderr.count("event=source_unavailable") >= 2, run.stderr
    assert "event=reconnected" not in run.stderr, run.stderr
