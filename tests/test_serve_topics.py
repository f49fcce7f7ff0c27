"""The topic model of ``patchsync serve`` (docs/decisions/0001-serve-and-topics.md): a log
topic's chain rules, version index and reads, on real files.

Chain rules: RDF Patch logs, "Identifying Patches" (https://afs.github.io/rdf-delta/rdf-patch-logs.html):
each patch names the one before it as ``prev``; a log has one head.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from patchsync.errors import ChainError, DecodeError, UsageError
from patchsync.logs.payloads import encode_patch, read_patches, read_payload
from patchsync.options import PatchOptions
from patchsync.serve.catalog import Topics, build_topic, parse_topic
from patchsync.serve.file_topic import FileLogTopic
from patchsync.serve.topics import Appended, Entry, Start

from .helpers import content
from .serve_helpers import chain_log, patch_events, patch_id, payload, run


def topic(path: Path, **kwargs: object) -> FileLogTopic:
    return FileLogTopic("t", str(path), path, **kwargs)  # type: ignore[arg-type]


async def collect(t: FileLogTopic, start: Start, count: int) -> list[Entry]:
    out: list[Entry] = []
    async for entry in t.read(start):
        out.append(entry)
        if len(out) == count:
            break
    return out


def test_append_keeps_the_chain(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"

    async def go() -> None:
        t = topic(log)
        await t.open()
        assert t.describe().version == 0 and t.describe().head is None
        assert await t.append(payload(1, None)) == Appended(1, patch_id(1))
        assert await t.append(payload(2, 1)) == Appended(2, patch_id(2))
        size = log.stat().st_size
        # A fork: prev is not the head. Both ids are named, nothing is written.
        with pytest.raises(ChainError, match=f"{patch_id(1)}.*{patch_id(2)}"):
            await t.append(payload(3, 1))
        # No prev on a log that has a head is a fork too.
        with pytest.raises(ChainError):
            await t.append(payload(4, None))
        assert log.stat().st_size == size
        # A patch already in the log: acknowledged with its version, not appended again.
        assert await t.append(payload(1, None)) == Appended(1, patch_id(1), duplicate=True)
        assert log.stat().st_size == size
        assert t.describe().version == 2 and t.describe().head == patch_id(2)
        await t.close()

    run(go())
    # What was appended is a log every reader decodes: two patches, chained.
    patches = list(read_patches(log))
    assert [(p.patch_id, p.prev) for p in patches] == [(patch_id(1), None), (patch_id(2), patch_id(1))]


def test_malformed_or_anonymous_patches_are_refused_whole(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"

    async def go() -> None:
        t = topic(log)
        await t.open()
        await t.append(payload(1, None))
        size = log.stat().st_size
        with pytest.raises(DecodeError, match="request 7"):
            await t.append(payload(2, 1)[:-3], where="request 7")
        with pytest.raises(DecodeError, match="one patch, this holds 2"):
            await t.append(encode_patch(patch_events(2, 1) + patch_events(3, 2), PatchOptions()))
        with pytest.raises(DecodeError, match="needs an 'id'"):
            await t.append(encode_patch(patch_events(2, 1)[1:], PatchOptions()))
        assert log.stat().st_size == size
        await t.close()

    run(go())


def test_version_index_survives_a_restart_and_cuts_a_crashed_tail(tmp_path: Path) -> None:
    log = chain_log(tmp_path / "log.jellyp", 5)
    whole = log.stat().st_size
    with open(log, "ab") as f:
        f.write(payload(6, 5)[:-4])  # a writer killed in the middle of its write

    async def go() -> None:
        t = topic(log)
        await t.open()
        assert log.stat().st_size == whole
        info = t.describe()
        assert (info.version, info.head) == (5, patch_id(5))
        assert t.version_of(patch_id(3)) == 3
        assert await t.append(payload(6, 5)) == Appended(6, patch_id(6))
        await t.close()
        again = topic(log)
        await again.open()
        assert (again.describe().version, again.version_of(patch_id(6))) == (6, 6)
        entries = await collect(again, Start.beginning(), 6)
        await again.close()
        assert [e.version for e in entries] == [1, 2, 3, 4, 5, 6]
        assert [e.patch_id for e in entries] == [patch_id(n) for n in range(1, 7)]

    run(go())


def test_read_equals_the_log_from_any_start(tmp_path: Path) -> None:
    """Differential: what a reader gets is, patch for patch, what the log file holds."""
    log = chain_log(tmp_path / "log.jellyp", 30, rows=3)
    expected = [content(p.events) for p in read_patches(log)]

    async def go() -> None:
        t = topic(log)
        await t.open()
        for n in (31, 32, 33):
            await t.append(payload(n, n - 1))
        expected.extend(content(read_payload(payload(n, n - 1))) for n in (31, 32, 33))
        for start, first in (
            (Start.beginning(), 1),
            (Start.after_version(10), 11),
            (Start.after_patch(patch_id(31)), 32),
            (Start.after_version(29), 30),
        ):
            got = [e async for e in t.read(start, follow=False)]
            assert [e.version for e in got] == list(range(first, 34))
            assert [content(read_payload(e.payload)) for e in got] == expected[first - 1 :]
        with pytest.raises(UsageError, match="no patch urn:nope"):
            [e async for e in t.read(Start.after_patch("urn:nope"))]
        await t.close()

    run(go())


def test_readers_catch_up_then_follow_live_even_when_they_fall_behind(tmp_path: Path) -> None:
    log = chain_log(tmp_path / "log.jellyp", 3)

    async def go() -> None:
        t = topic(log, subscriber_buffer=2)
        await t.open()
        fast = asyncio.create_task(collect(t, Start.beginning(), 20))
        slow_entries: list[Entry] = []
        now_entries: list[Entry] = []

        async def slow() -> None:
            async for entry in t.read(Start.after_version(1)):
                slow_entries.append(entry)
                await asyncio.sleep(0.01)  # falls behind: its queue of 2 overflows
                if len(slow_entries) == 19:
                    return

        async def from_now() -> None:
            async for entry in t.read(Start.now()):
                now_entries.append(entry)
                if len(now_entries) == 17:
                    return

        tasks = [asyncio.create_task(slow()), asyncio.create_task(from_now())]
        await asyncio.sleep(0.05)
        for n in range(4, 21):
            await t.append(payload(n, n - 1))
        got = await asyncio.wait_for(fast, 10)
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert [e.version for e in got] == list(range(1, 21))
        assert [e.version for e in slow_entries] == list(range(2, 21))
        assert [e.version for e in now_entries] == list(range(4, 21))
        assert len(t.hub) == 0
        await t.close()

    run(go())


def test_closing_ends_live_readers(tmp_path: Path) -> None:
    log = chain_log(tmp_path / "log.jellyp", 2)

    async def go() -> list[int]:
        t = topic(log)
        await t.open()

        async def reader() -> list[int]:
            return [e.version async for e in t.read(Start.beginning())]

        task = asyncio.create_task(reader())
        await asyncio.sleep(0.05)
        await t.close()
        return await asyncio.wait_for(task, 5)

    assert run(go()) == [1, 2]


def test_a_served_log_has_one_writer(tmp_path: Path) -> None:
    log = chain_log(tmp_path / "log.jellyp", 1)

    async def go() -> None:
        first = topic(log)
        await first.open()
        with pytest.raises(UsageError, match="another writer"):
            await topic(log).open()
        await first.close()

    run(go())


def test_a_directory_topic_is_created_and_appended_to(tmp_path: Path) -> None:
    folder = tmp_path / "segments"

    async def go() -> None:
        t = build_topic(f"d={folder}")
        assert isinstance(t, FileLogTopic)
        await t.open()
        await t.append(payload(1, None))
        await t.append(payload(2, 1))
        await t.close()

    run(go())
    segments = sorted(p.name for p in folder.iterdir() if p.suffix == ".jellyp")
    assert segments == ["patch-0000000001.jellyp"]
    assert [p.patch_id for p in read_patches(folder / segments[0])] == [patch_id(1), patch_id(2)]


def test_statements_become_one_chained_patch(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"

    async def go() -> None:
        t = topic(log)
        await t.open()
        await t.append(payload(1, None))
        first = await t.append_statements([("<http://ex.org/a>", "<http://ex.org/b>", '"c"', "")])
        second = await t.append_statements([("<http://ex.org/a>", "<http://ex.org/b>", '"d"', "<http://ex.org/g>")])
        assert (first.version, second.version) == (2, 3)
        await t.close()

    run(go())
    patches = list(read_patches(log))
    assert [p.prev for p in patches[1:]] == [patches[0].patch_id, patches[1].patch_id]
    assert all(p.patch_id.startswith("urn:uuid:") for p in patches[1:])


def test_topic_specs(tmp_path: Path) -> None:
    assert parse_topic("ds.1=x.jellyp") == ("ds.1", "x.jellyp")
    for bad in ("-x=a.jellyp", "a/b=a.jellyp", ".x=a.jellyp", "x", "x="):
        with pytest.raises(UsageError):
            parse_topic(bad)
    assert build_topic(f"s=sqlite:///{tmp_path}/db.sqlite").kind == "target"
    assert build_topic(f"l={tmp_path}/l.jellyp").kind == "log"
    with pytest.raises(UsageError, match="given twice"):
        Topics([build_topic(f"a={tmp_path}/1.jellyp"), build_topic(f"a={tmp_path}/2.jellyp")])
    with pytest.raises(UsageError):
        build_topic("x=elsewhere://h/p")
    assert not os.path.exists(tmp_path / "l.jellyp")  # building opens nothing


def test_appended_patches_are_read_back_as_written_and_groups_stop_at_a_refusal(tmp_path: Path) -> None:
    """A patch the topic appended is its own stream in the log: live readers, and readers
    catching up after a restart, get exactly those bytes, and they decode to the patch
    sent. A group of appends keeps the patches before a refused one, and none after."""
    log = chain_log(tmp_path / "log.jellyp", 4)  # another writer's stream of four patches

    async def go() -> None:
        t = topic(log)
        await t.open()
        live = asyncio.create_task(collect(t, Start.after_version(4), 5))
        await asyncio.sleep(0.05)
        group = [(payload(n, n - 1), f"message {n}") for n in (5, 6, 7)]
        assert [a.version for a in await t.append_many(group)] == [5, 6, 7]
        refused = [(payload(8, 7), "m8"), (payload(9, 4), "m9"), (payload(10, 9), "m10")]
        with pytest.raises(ChainError, match=f"{patch_id(9)} has prev {patch_id(4)}"):
            await t.append_many(refused)
        assert t.describe().version == 8
        assert [a.duplicate for a in await t.append_many([(payload(8, 7), "again"), (payload(9, 8), "m9")])] == [
            True,
            False,
        ]
        got = await asyncio.wait_for(live, 10)
        await t.close()
        again = topic(log)
        await again.open()
        stored = [e async for e in again.read(Start.beginning(), follow=False)]
        await again.close()
        assert [e.version for e in stored] == list(range(1, 10))
        assert [e.payload for e in stored[4:]] == [e.payload for e in got]
        expected = [content(read_payload(payload(n, n - 1 if n > 1 else None))) for n in range(1, 10)]
        assert [content(read_payload(e.payload)) for e in stored] == expected

    run(go())
