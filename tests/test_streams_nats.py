"""Patch streams against a real NATS JetStream server (127.0.0.1:4222, one stream per test).

Skipped when the server is unreachable, unless PATCHSYNC_REQUIRE_NATS=1 (tests/conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchsync.errors import ChainError, UsageError
from patchsync.logs.patch_logs import read_events
from patchsync.nats import (
    MessageTooLarge,
    NatsLog,
    StreamGap,
    StreamNotFound,
    StreamSettings,
    StreamUnavailable,
    StreamWriter,
    decode_message,
    log_patches,
    publish_logs,
)
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import patches
from .nats_helpers import NatsServer, patch_events, patch_id, write_chain
from .process_helpers import wait_for


def stream_ids(url: str) -> list[str]:
    """The Nats-Msg-Id of every message in the stream, in order (checked contiguous)."""
    out: list[str] = []
    with NatsLog(url) as log:
        last = log.last_seq()
        seq = 1
        while seq <= last:
            msgs = log.fetch(seq, 100, timeout=2)
            assert msgs and msgs[0].seq == seq
            out += [m.headers["Nats-Msg-Id"] for m in msgs]
            seq = msgs[-1].seq + 1
    return out


def test_publish_sends_every_patch_in_order_one_per_message(tmp_path: Path, nats_stream: str) -> None:
    a, b = tmp_path / "a.jellyp", tmp_path / "b.rdfp"
    ids = write_chain(a, "c", 4) + write_chain(b, "c", 3, start=5, prev=patch_id("c", 4))
    report = publish_logs([a, b], nats_stream)
    assert (report.published, report.skipped, report.last_seq, report.head) == (7, 0, 7, ids[-1])
    assert stream_ids(nats_stream) == ids
    with NatsLog(nats_stream) as log:
        assert log.head().patch_id == ids[-1]


def test_each_message_decodes_alone_to_the_logs_patch(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 5, size=4)
    publish_logs([log_path], nats_stream)
    expected = patches(read_events(log_path, adapter=NTriplesTerms()))
    with NatsLog(nats_stream) as log:
        # From the middle: a replica can start at any message.
        msgs = log.fetch(3, 10, timeout=2)
        assert [m.seq for m in msgs] == [3, 4, 5]
        for m in msgs:
            assert patches(decode_message(m, str(log.url), adapter=NTriplesTerms())) == [expected[m.seq - 1]]
            assert m.published <= time.time() + 1


def test_a_rerun_publishes_nothing_twice_even_after_the_duplicate_window(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    ids = write_chain(log_path, "c", 5)
    settings = StreamSettings(duplicate_window=0.5)
    assert publish_logs([log_path], nats_stream, settings=settings).published == 5
    again = publish_logs([log_path], nats_stream, settings=settings)
    assert (again.published, again.skipped) == (0, 5)
    time.sleep(1.0)  # the server no longer recognises the ids by itself
    write_chain(log_path, "c", 7)  # the log grew meanwhile
    grown = publish_logs([log_path], nats_stream, settings=settings)
    assert (grown.published, grown.skipped) == (2, 5)
    assert stream_ids(nats_stream) == [*ids, patch_id("c", 6), patch_id("c", 7)]


def test_resending_a_stored_patch_is_a_duplicate_not_a_new_message(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 3)
    publish_logs([log_path], nats_stream)
    first, _, last = log_patches(log_path)
    with NatsLog(nats_stream) as log:
        assert log.publish_patch(first.payload, first.patch_id, first.prev).duplicate  # within the window
        result = log.publish_patch(last.payload, last.patch_id, last.prev)
        assert (result.seq, result.duplicate) == (3, True)
        assert log.last_seq() == 3


def test_a_fork_is_refused_naming_both_ids_and_nothing_is_published(tmp_path: Path, nats_stream: str) -> None:
    main, other = tmp_path / "main.jellyp", tmp_path / "other.jellyp"
    write_chain(main, "c", 3)
    # Another branch from patch 2: its first patch's prev is not the stream's head.
    write_chain(other, "fork", 2, prev=patch_id("c", 2))
    publish_logs([main], nats_stream)
    with pytest.raises(ChainError) as info:
        publish_logs([other], nats_stream)
    line = str(info.value)
    assert "\n" not in line
    assert patch_id("fork", 1) in line and patch_id("c", 2) in line and patch_id("c", 3) in line
    assert stream_ids(nats_stream) == [patch_id("c", n) for n in (1, 2, 3)]


def test_a_new_chain_cannot_start_on_a_stream_that_has_one(tmp_path: Path, nats_stream: str) -> None:
    main, other = tmp_path / "main.jellyp", tmp_path / "other.jellyp"
    write_chain(main, "c", 2)
    write_chain(other, "new", 1)
    publish_logs([main], nats_stream)
    with pytest.raises(ChainError, match=rf"patch {patch_id('new', 1)} .* its prev is \(none\), the stream's head is"):
        publish_logs([other], nats_stream)


def test_two_writers_cannot_both_append_after_the_same_head(nats_stream: str) -> None:
    one, two = StreamWriter(nats_stream, adapter=NTriplesTerms()), StreamWriter(nats_stream, adapter=NTriplesTerms())
    try:
        for writer, tag in ((one, "w1"), (two, "w2")):
            for event in patch_events(tag, 1, None):
                writer.sink.send(event)
        one.commit(patch_id("w1", 1))
        with pytest.raises(ChainError, match=rf"{patch_id('w2', 1)} .* the stream's head is {patch_id('w1', 1)}"):
            two.commit(patch_id("w2", 1))
        # The first writer goes on; its next patch continues its own head.
        for event in patch_events("w1", 2, patch_id("w1", 1)):
            one.sink.send(event)
        one.commit(patch_id("w1", 2))
        assert (one.head, one.last_seq, one.patches) == (patch_id("w1", 2), 2, 2)
    finally:
        one.close()
        two.close()
    assert stream_ids(nats_stream) == [patch_id("w1", 1), patch_id("w1", 2)]


def test_a_patch_over_the_servers_message_limit_is_refused_clearly(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 4, big=[3])
    with pytest.raises(MessageTooLarge) as info:
        publish_logs([log_path], nats_stream)
    line = str(info.value)
    assert f"a.jellyp: patch 3 ({patch_id('c', 3)}) needs a" in line and "at most 1048576 bytes" in line
    # The patches before it are published (a prefix of the chain); none after it.
    assert stream_ids(nats_stream) == [patch_id("c", 1), patch_id("c", 2)]


def test_reading_and_lag(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 6)
    publish_logs([log_path], nats_stream)
    with NatsLog(nats_stream) as log:
        assert [m.seq for m in log.fetch(1, 4, timeout=2)] == [1, 2, 3, 4]
        assert [m.seq for m in log.fetch(5, 4, timeout=2)] == [5, 6]  # continues the same reader
        assert log.fetch(7, 4, timeout=0.2) == []  # caught up
        assert [m.seq for m in log.fetch(2, 1, timeout=2)] == [2]  # back again: a new reader
        assert log.lag(6).messages == 0 and log.lag(6).seconds == 0
        lag = log.lag(2)
        assert lag.messages == 4 and 0 <= lag.seconds < 60


def test_reading_ahead_hands_out_every_message_once_in_order(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 9)
    publish_logs([log_path], nats_stream)
    with NatsLog(nats_stream, read_ahead=True) as log:
        assert [m.seq for m in log.fetch(1, 3, timeout=2)] == [1, 2, 3]
        assert [m.seq for m in log.fetch(4, 3, timeout=2)] == [4, 5, 6]  # the batch read ahead
        # Elsewhere than where the last batch ended: the batch read ahead (7-9) is dropped
        # with the consumer it came from, and nothing is skipped or repeated.
        assert [m.seq for m in log.fetch(5, 3, timeout=2)] == [5, 6, 7]
        assert [m.seq for m in log.fetch(8, 3, timeout=2)] == [8, 9]
        assert log.fetch(10, 3, timeout=0.2) == []  # caught up
        assert [m.seq for m in log.fetch(9, 3, timeout=2)] == [9]
        assert log.fetch(10, 3, timeout=0.2) == []


def test_reading_ahead_across_many_requests_hands_out_every_message_once(nats_stream: str) -> None:
    # More messages than one request of the reader asks for (patchsync.nats.pull.WINDOW),
    # so the requests it sends ahead from its callback are exercised, then a jump back.
    from patchsync.nats.pull import WINDOW

    total = WINDOW * 2 + 37
    with NatsLog(nats_stream) as log:
        log.ensure_stream()

        async def publish() -> None:
            acks = [log.js.publish(log.subject, b"m%d" % n, stream=log.name) for n in range(1, total + 1)]
            for ack in acks:
                await ack

        log.run(publish)
    with NatsLog(nats_stream, read_ahead=True) as log:
        seen: list[int] = []
        while len(seen) < total:
            msgs = log.fetch(len(seen) + 1, 100, timeout=2)
            assert msgs, f"nothing after {len(seen)}"
            assert all(m.payload == b"m%d" % m.seq for m in msgs)
            seen += [m.seq for m in msgs]
        assert seen == list(range(1, total + 1))
        assert log.fetch(total + 1, 100, timeout=0.2) == []
        again = log.fetch(WINDOW - 1, 3, timeout=2)  # elsewhere: a new consumer from there
        assert [m.seq for m in again] == [WINDOW - 1, WINDOW, WINDOW + 1]
        assert all(abs(m.published - time.time()) < 60 for m in again)


def test_messages_read_ahead_are_handed_out_without_a_round_trip_through_the_loop(nats_stream: str) -> None:
    # What the reader holds already is taken on the caller's thread (PullReader.take): no
    # call waits for the client's loop until the queue is empty or the caller reads elsewhere.
    with NatsLog(nats_stream) as log:
        log.ensure_stream()

        async def publish() -> None:
            acks = [log.js.publish(log.subject, b"m%d" % n, stream=log.name) for n in range(1, 301)]
            for ack in acks:
                await ack

        log.run(publish)
    with NatsLog(nats_stream, read_ahead=True) as log:
        first = log.fetch(1, 100, timeout=2)
        seen = [m.seq for m in first]
        reader = log._reader
        assert reader is not None
        wait_for(
            lambda: len(seen) + len(reader._queue) >= 300,
            what="the reader to read the rest ahead",
            progress=lambda: len(reader._queue),
            interval=0.01,
        )
        calls = []
        run = log._loop.run
        log._loop.run = lambda coro, timeout: calls.append(coro) or run(coro, timeout)  # type: ignore[method-assign]
        while len(seen) < 300:
            msgs = log.fetch(len(seen) + 1, 100, timeout=2)
            assert msgs and all(m.payload == b"m%d" % m.seq for m in msgs)
            seen += [m.seq for m in msgs]
        assert seen == list(range(1, 301)) and calls == []
        assert log.fetch(301, 100, timeout=0.2) == [] and len(calls) == 1
        assert [m.seq for m in log.fetch(50, 3, timeout=2)] == [50, 51, 52] and len(calls) == 2


def test_a_replica_behind_the_streams_retention_gets_a_gap_error(tmp_path: Path, nats_stream: str) -> None:
    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 5)
    publish_logs([log_path], nats_stream, settings=StreamSettings(max_msgs=2))
    with NatsLog(nats_stream) as log:
        assert log.first_seq() == 4
        with pytest.raises(StreamGap, match=r"message 1 is gone \(the stream now starts at 4"):
            log.fetch(1, 10, timeout=2)
        assert [m.seq for m in log.fetch(4, 10, timeout=2)] == [4, 5]


def test_a_missing_stream_is_not_created_when_told_not_to(nats_stream: str) -> None:
    with NatsLog(nats_stream) as log, pytest.raises(StreamNotFound, match="no such stream"):
        log.ensure_stream(create=False)


def test_an_existing_stream_must_carry_the_patch_subject(nats_stream: str) -> None:
    from nats.js.api import StreamConfig

    with NatsLog(nats_stream) as log:

        async def add() -> None:
            await log.js.add_stream(StreamConfig(name=log.name, subjects=["other.subject"]))

        log.run(add)
        with pytest.raises(UsageError, match=r"does not take subject 'patchsync\."):
            log.ensure_stream()


PUBLISHER = """
import sys
from patchsync.nats import publish_logs
publish_logs(sys.argv[2:], sys.argv[1], on_published=lambda m, r: print(r.seq, flush=True))
"""


def test_publishing_resumes_after_kill_9(tmp_path: Path, nats_stream: str) -> None:
    logs = [tmp_path / f"{n}.jellyp" for n in range(3)]
    ids: list[str] = []
    for n, path in enumerate(logs):
        ids += write_chain(path, "k", 150, start=1 + 150 * n, prev=ids[-1] if ids else None, size=20)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    argv = [sys.executable, "-c", PUBLISHER, nats_stream, *map(str, logs)]
    for kill_after in (40, 170, 320):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if int(line) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
        proc.wait(120)
        assert proc.returncode == -signal.SIGKILL
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stream_ids(nats_stream) == ids  # nothing lost, nothing twice, in order


def test_a_lost_server_reads_as_unavailable(tmp_path: Path, nats_server_binary: str) -> None:
    server = NatsServer(tmp_path / "store").start()
    url = f"{server.url}/gone"
    log = NatsLog(url, request_timeout=1.0, reconnect_attempts=1)
    try:
        log.ensure_stream()
        server.kill()
        with pytest.raises(StreamUnavailable, match=r"nats://127\.0\.0\.1:\d+/gone: "):
            log.last_seq()
    finally:
        log.close()
        server.stop()


def test_a_server_restart_under_the_publisher_loses_and_doubles_nothing(
    tmp_path: Path, nats_server_binary: str
) -> None:
    # After a restart the server no longer knows its last message id when that message
    # is older than the duplicate window: the append falls back to the last sequence.
    server = NatsServer(tmp_path / "store").start()
    try:
        url = f"{server.url}/restart"
        log_path = tmp_path / "a.jellyp"
        write_chain(log_path, "r", 3)
        settings = StreamSettings(duplicate_window=0.5)
        assert publish_logs([log_path], url, settings=settings).published == 3
        time.sleep(1.0)
        server.stop()
        server.start()
        ids = write_chain(log_path, "r", 6)
        with NatsLog(url) as log:
            log.ensure_stream(create=False)
            for m in list(log_patches(log_path))[3:]:
                assert not log.publish_patch(m.payload, m.patch_id, m.prev).duplicate
        assert publish_logs([log_path], url, settings=settings).published == 0
        assert stream_ids(url) == ids
    finally:
        server.stop()


def test_messages_apply_with_the_stream_sequence_as_checkpoint_and_resume_exactly_once(
    tmp_path: Path, nats_stream: str
) -> None:
    # What the tail daemon's stream source will do: one applier over the messages, the
    # target's checkpoint (offset = stream sequence) deciding where a restart resumes.
    from patchsync.apply.api import apply_file
    from patchsync.apply.applier import Applier
    from patchsync.apply.targets.memory import MemoryTarget

    log_path = tmp_path / "a.jellyp"
    write_chain(log_path, "c", 8, size=3)
    publish_logs([log_path], nats_stream)
    target = MemoryTarget()
    with NatsLog(nats_stream) as log:
        source, fingerprint = str(log.url), log.fingerprint()
        assert fingerprint == log.fingerprint() and fingerprint.startswith(f"jetstream:{log.name}:")

        def events(from_seq: int, upto: int):  # type: ignore[no-untyped-def]
            for m in log.fetch(from_seq, upto - from_seq + 1, timeout=2):
                yield from decode_message(m, source, adapter=target.adapter)

        Applier(target, source=source, fingerprint=fingerprint).apply(events(1, 3))
        cp = target.checkpoint(source)
        assert cp is not None and (cp.offset, cp.patches, cp.last_id) == (3, 3, patch_id("c", 3))
        # A restart re-reads from the checkpoint's message: nothing is applied twice.
        result = Applier(target, source=source, fingerprint=fingerprint).apply(events(cp.offset, 8))
        cp = target.checkpoint(source)
        assert cp is not None and (cp.offset, cp.patches, cp.last_id) == (8, 8, patch_id("c", 8))
        assert result.replayed > 0
    expected = MemoryTarget()
    apply_file(log_path, expected)
    assert set(target.quads()) == set(expected.quads())
