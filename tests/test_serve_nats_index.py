"""The patch id index of a NATS stream topic (docs/decisions/0029-nats-topic-index.md):
a restart reads only what the stream gained, ids are found through the index, and an
index that is missing, broken or left by another stream (or the same stream recreated,
purged or cut) is built again, never trusted: the topic answers as one that read the
stream whole.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from patchsync.logs.payloads import MSG_ID, StreamMessage
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.stream_index import StreamIndex, index_file
from patchsync.nats.url import StreamURL, parse_stream_url
from patchsync.remote.errors import StreamUnavailable
from patchsync.serve.nats_topic import NatsTopic
from patchsync.serve.topics import Start

from .helpers import spoil_index
from .process_helpers import killed_index_rows
from .serve_helpers import patch_id, payload, run


def publish(url: StreamURL, first: int, count: int) -> None:
    """Patches ``first`` .. ``first + count - 1`` published as another writer would (many
    in flight at once: the order is the stream's, each a message with its id)."""

    with NatsLog(url) as log:
        log.ensure_stream()

        async def go() -> None:
            for start in range(first, first + count, 500):
                # One at a time within a chunk would be slow; awaited in order, so the
                # stream's order is the patches' order.
                acks = [
                    await log.js.publish(
                        log.subject,
                        payload(n, n - 1 if n > 1 else None),
                        stream=log.name,
                        headers={MSG_ID: patch_id(n)},
                    )
                    for n in range(start, min(first + count, start + 500))
                ]
                assert all(not ack.duplicate for ack in acks)

        log.run(go)


def answers(topic: NatsTopic, ids: list[str]) -> list[Any]:
    """What the topic says of each id, and its head."""
    return [topic.version_of(i) for i in ids] + [topic.version, topic.head]


async def opened(url: StreamURL, index_dir: Path | None) -> NatsTopic:
    topic = NatsTopic("n", str(url), url, index_dir=index_dir)
    await topic.open()
    return topic


def with_topic(url: StreamURL, index_dir: Path | None, fn: Callable[[NatsTopic], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        topic = await opened(url, index_dir)
        try:
            return await fn(topic)
        finally:
            await topic.close()

    return run(go())


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every message :meth:`NatsLog.fetch` returns, counted (a list of their sequences)."""
    seen: list[int] = []
    real = NatsLog.fetch

    def fetch(self: NatsLog, *args: Any, **kwargs: Any) -> list[StreamMessage]:
        messages = real(self, *args, **kwargs)
        seen.extend(m.seq for m in messages)
        return messages

    monkeypatch.setattr(NatsLog, "fetch", fetch)
    return seen


def fresh_answers(url: StreamURL, ids: list[str]) -> list[Any]:
    """The answers of a topic that read the stream whole (its index in memory, new)."""

    async def ask(topic: NatsTopic) -> list[Any]:
        return answers(topic, ids)

    result: list[Any] = with_topic(url, None, ask)
    return result


def test_a_restart_reads_only_what_the_stream_gained(
    nats_stream: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = parse_stream_url(nats_stream)
    publish(url, 1, 300)
    reads = counting_reads(monkeypatch)

    async def first(topic: NatsTopic) -> None:
        assert topic.read_on_open == 300  # no index yet: the whole stream
        assert (topic.version, topic.head) == (300, patch_id(300))

    with_topic(url, tmp_path, first)
    assert sorted(set(reads)) == list(range(1, 301))
    publish(url, 301, 7)  # another writer, while no server runs
    reads.clear()
    ids = [patch_id(n) for n in range(1, 308)] + ["urn:patch:none"]

    async def second(topic: NatsTopic) -> list[Any]:
        opening = list(reads)
        assert topic.read_on_open == 7
        # Fetch by id after the restart, of patches read before it and after it.
        got = answers(topic, ids)
        reader = topic.read(Start.after_patch(patch_id(150)), follow=False)
        entries = [e async for e in reader]
        assert [e.version for e in entries] == list(range(151, 308))
        return [opening, got]

    opening, got = with_topic(url, tmp_path, second)
    assert opening == list(range(301, 308)), "a restart read more than the stream's tail"
    assert got == [*range(1, 308), None, 307, patch_id(307)]
    assert got == fresh_answers(url, ids)


def test_the_topic_holds_no_entry_per_patch_and_asks_the_index(nats_stream: str, tmp_path: Path) -> None:
    url = parse_stream_url(nats_stream)
    count = 400
    publish(url, 1, count)

    async def check(topic: NatsTopic) -> None:
        assert topic._index is not None and topic._index.path == index_file(tmp_path, url)
        asked: list[str] = []
        real = topic._index.sequence_of

        def sequence_of(patch: str) -> int | None:
            asked.append(patch)
            return real(patch)

        topic._index.sequence_of = sequence_of  # type: ignore[method-assign]
        assert topic.version_of(patch_id(123)) == 123
        assert asked == [patch_id(123)]
        for name, value in vars(topic).items():
            if isinstance(value, (dict, list, set, tuple)):
                assert len(value) < count, f"NatsTopic.{name} holds an entry per patch"
        # An append of a patch the stream holds is answered from the index, not published.
        assert topic._log is not None
        topic._log.publish_patch = None  # type: ignore[assignment]
        appended = await topic.append(payload(5, 4))
        assert (appended.version, appended.duplicate) == (5, True)

    with_topic(url, tmp_path, check)
    with sqlite3.connect(index_file(tmp_path, url)) as db:
        assert db.execute("SELECT count(*), min(version), max(version) FROM patches").fetchone() == (count, 1, count)


def test_a_stream_appended_to_by_another_writer_while_served(nats_stream: str, tmp_path: Path) -> None:
    url = parse_stream_url(nats_stream)
    publish(url, 1, 10)

    async def serve_in_loop(topic: NatsTopic) -> None:
        await topic.append(payload(11, 10))
        await asyncio.to_thread(publish, url, 12, 20)
        while topic.version < 31:
            await asyncio.sleep(0.05)
        assert [topic.version_of(patch_id(n)) for n in range(1, 32)] == list(range(1, 32))

    with_topic(url, tmp_path, serve_in_loop)

    async def reopened(topic: NatsTopic) -> list[Any]:
        assert topic.read_on_open == 0  # every message was indexed as it was seen
        return answers(topic, [patch_id(n) for n in range(1, 32)])

    ids = [patch_id(n) for n in range(1, 32)]
    assert with_topic(url, tmp_path, reopened) == fresh_answers(url, ids) == [*range(1, 32), 31, patch_id(31)]


def _break(how: str, index: Path, url: StreamURL) -> None:
    if spoil_index(index, how):
        return
    if how == "record":  # the record no longer matches the last row
        with sqlite3.connect(index) as db:
            db.execute("DELETE FROM patches WHERE version = (SELECT max(version) FROM patches)")
    elif how == "recreated":  # the same name, another stream: other patches at the same sequences
        with NatsLog(url) as log:
            log.delete_stream()
        publish(url, 1, 5)
        publish_shifted(url, 6, 40)
    elif how == "cut":  # its last message removed
        with NatsLog(url) as log:
            assert log.run(lambda: log.js.delete_msg(log.name, 30))


def publish_shifted(url: StreamURL, first: int, count: int) -> None:
    """Patches whose ids differ from :func:`publish`'s at the same sequences."""
    with NatsLog(url) as log:

        async def go() -> None:
            for n in range(first, first + count):
                await log.js.publish(log.subject, payload(n, None), stream=log.name, headers={MSG_ID: f"other:{n}"})

        log.run(go)


@pytest.mark.parametrize("how", ["deleted", "truncated", "garbage", "format", "record", "recreated", "cut"])
def test_a_broken_or_stale_index_is_built_again(nats_stream: str, tmp_path: Path, how: str) -> None:
    url = parse_stream_url(nats_stream)
    publish(url, 1, 30)

    async def build(topic: NatsTopic) -> None:
        assert topic.read_on_open == 30

    with_topic(url, tmp_path, build)
    _break(how, index_file(tmp_path, url), url)
    ids = [patch_id(n) for n in range(1, 31)] + [f"other:{n}" for n in range(6, 46)]

    async def ask(topic: NatsTopic) -> list[Any]:
        return [topic.read_on_open, answers(topic, ids)]

    read, got = with_topic(url, tmp_path, ask)
    assert got == fresh_answers(url, ids)
    assert read == got[-2], "the index was trusted, not built again from the stream"


@pytest.mark.parametrize("keep", [10, 0])
def test_an_index_of_a_stream_purged_below_it_is_not_trusted(nats_stream: str, tmp_path: Path, keep: int) -> None:
    """Messages removed from the start of a stream (a purge keeping the last ``keep``, as
    retention does) are not answered from the index; a stream purged whole is read again."""
    url = parse_stream_url(nats_stream)
    publish(url, 1, 30)
    with_topic(url, tmp_path, lambda topic: asyncio.sleep(0))
    with NatsLog(url) as log:
        log.run(lambda: log.js.purge_stream(log.name, keep=keep) if keep else log.js.purge_stream(log.name))
    ids = [patch_id(n) for n in range(1, 31)]

    async def ask(topic: NatsTopic) -> list[Any]:
        return [topic.read_on_open, answers(topic, ids)]

    read, got = with_topic(url, tmp_path, ask)
    assert (
        got
        == fresh_answers(url, ids)
        == [None] * (30 - keep)
        + list(range(31 - keep, 31))
        + [
            30,
            patch_id(30) if keep else None,
        ]
    )
    assert read == 0  # what the index holds of the messages kept is kept

    async def follow(topic: NatsTopic) -> list[Any]:  # the stream goes on after the purge
        await asyncio.to_thread(publish_after, url, 31)
        while topic.version < 31:
            await asyncio.sleep(0.05)
        return answers(topic, [patch_id(31)])

    assert with_topic(url, tmp_path, follow) == [31, 31, patch_id(31)]


def publish_after(url: StreamURL, n: int) -> None:
    with NatsLog(url) as log:
        log.run(lambda: log.js.publish(log.subject, payload(n, None), stream=log.name, headers={MSG_ID: patch_id(n)}))


def test_a_row_found_broken_while_serving_is_never_answered_from(nats_stream: str, tmp_path: Path) -> None:
    url = parse_stream_url(nats_stream)
    publish(url, 1, 30)
    with_topic(url, tmp_path, lambda topic: asyncio.sleep(0))

    async def serve(topic: NatsTopic) -> None:
        with sqlite3.connect(index_file(tmp_path, url)) as db:  # a value changed behind the checksum's back
            db.execute("UPDATE patches SET seq = 3 WHERE version = 7")
        with pytest.raises(StreamUnavailable, match="being built again"):
            topic.version_of(patch_id(7))
        while topic._broken is not None:  # the follower builds it again
            await asyncio.sleep(0.05)
        assert answers(topic, [patch_id(n) for n in range(1, 31)]) == [*range(1, 31), 30, patch_id(30)]

    with_topic(url, tmp_path, serve)


_BUILD = """
import sys
from pathlib import Path
from patchsync.nats import stream_index
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.url import parse_stream_url
stream_index.FLUSH_EVERY = stream_index.READ_BATCH = 50
# After its third commit the build stops where it stands (and says so): the kill lands
# between two commits of a build under way, whatever the machine's speed or load.
commit = stream_index.StreamIndex._commit
commits = 0
def paused(self, rows):
    global commits
    commit(self, rows)
    commits += 1
    if commits == 3:
        Path(sys.argv[2], "paused").touch()
        import time
        time.sleep(3600)
stream_index.StreamIndex._commit = paused
url = parse_stream_url(sys.argv[1])
index = stream_index.StreamIndex(stream_index.index_file(Path(sys.argv[2]), url), url)
with NatsLog(url) as log:
    index.sync(log)
"""


def test_killed_while_writing_the_index(nats_stream: str, tmp_path: Path) -> None:
    url = parse_stream_url(nats_stream)
    count = 4000
    publish(url, 1, count)
    # Killed once some rows were committed, with more still to write: a part of the stream.
    committed = killed_index_rows(_BUILD, [nats_stream, str(tmp_path)], tmp_path / "paused", index_file(tmp_path, url))
    assert 0 < committed < count
    ids = [patch_id(n) for n in range(1, count + 1)]

    async def ask(topic: NatsTopic) -> list[Any]:
        assert topic.read_on_open == count - committed  # what it committed is kept, the rest read
        return answers(topic, ids)

    assert with_topic(url, tmp_path, ask) == fresh_answers(url, ids)


def test_a_second_process_on_one_index_keeps_its_own_in_memory(
    nats_stream: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = parse_stream_url(nats_stream)
    publish(url, 1, 5)
    first = StreamIndex(index_file(tmp_path, url), url)
    try:
        second = StreamIndex(index_file(tmp_path, url), url)
        assert second.path is None
        second.close()
    finally:
        first.close()
    assert "another process uses this index" in caplog.text


def test_serve_keeps_the_indexes_in_the_users_cache_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchsync.cli.main import build_parser
    from patchsync.cli.serve import settings_from
    from patchsync.serve.settings import ServeSettings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = ["serve", "--listen", "127.0.0.1:0", "--topic", "n=nats://127.0.0.1:4222/S"]
    settings = settings_from(build_parser().parse_args(base))
    assert isinstance(settings, ServeSettings)
    assert settings.topic_options.index_dir == tmp_path / "cache" / "patchsync" / "nats-index"
    settings = settings_from(build_parser().parse_args([*base, "--index-dir", str(tmp_path / "idx")]))
    assert isinstance(settings, ServeSettings)
    assert settings.topic_options.index_dir == tmp_path / "idx"
