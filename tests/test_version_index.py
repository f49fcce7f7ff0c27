"""The version index of a served log (docs/decisions/0020-version-index.md, docs/serving.md):
a fetch anywhere in a log equals a sequential read of it, and an index that is missing,
cut, corrupted or left by another log is built again, never trusted.

Versions count a log's patches from 1 in log order, as RDF Delta numbers them
(https://afs.github.io/rdf-delta/delta-protocol.html, "Patch Log": "the version number of
a patch is its position in the log").
"""

from __future__ import annotations

import os
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from patchsync.events import Event
from patchsync.logs.indexed_log import IndexedLog
from patchsync.logs.payloads import NT_TERMS, read_patches, read_payload
from patchsync.logs.version_index import INDEX_FORMAT, IndexCorrupt, index_path
from patchsync.serve.file_topic import FileLogTopic
from patchsync.serve.topics import Start

from .helpers import content, encode, spoil_index, write_log
from .process_helpers import killed_index_rows
from .serve_helpers import patch_events, patch_id, payload, run


def segment(path: Path, first: int, count: int) -> Path:
    """Patches ``first`` .. ``first + count - 1`` chained, in one stream (shared lookups)."""
    events: list[Event] = []
    for n in range(first, first + count):
        events += patch_events(n, n - 1 if n > 1 else None, rows=3)
    return write_log(path, events, adapter=NT_TERMS)


def reference(paths: list[Path]) -> list[tuple[str, list[Event]]]:
    """Every patch of the log read sequentially by the log reader (not through the index)."""
    return [(p.patch_id or "", content(p.events)) for path in paths for p in read_patches(path)]


def fetched(log: IndexedLog, version: int) -> tuple[str, list[Event]]:
    [stored] = list(log.read(version, version))
    assert stored.version == version
    events = stored.events if stored.raw is None else read_payload(stored.raw)
    assert events is not None
    return stored.patch_id, content(events)


def indexed(paths: list[Path], index: Path | None, every: int = 5) -> IndexedLog:
    log = IndexedLog(paths, index, every=every)
    log.open(cut_tail=lambda size: os.truncate(paths[-1], size))
    return log


def check_every_version(log: IndexedLog, expected: list[tuple[str, list[Event]]], seed: int = 1) -> None:
    head = log.head()
    assert head is not None and head.version == len(expected)
    versions = list(range(1, len(expected) + 1))
    random.Random(seed).shuffle(versions)
    for version in versions:  # random places: each from a checkpoint
        assert fetched(log, version) == (expected[version - 1][0], expected[version - 1][1])
    # One by one in order (a Delta client's sync), and all at once (the change feed).
    assert [fetched(log, v)[1] for v in range(1, len(expected) + 1)] == [e for _, e in expected]
    whole = [content(s.events if s.raw is None else read_payload(s.raw)) for s in log.read(1, len(expected))]  # type: ignore[arg-type]
    assert whole == [e for _, e in expected]
    for number, (patch, _) in enumerate(expected, 1):
        assert log.version_of(patch) == number


@pytest.mark.parametrize("every", [1, 5, 64])
def test_fetch_anywhere_equals_a_sequential_read(tmp_path: Path, every: int) -> None:
    # A directory of three segments, each one stream of many patches, as a recorder writes.
    paths = [segment(tmp_path / f"{n:03d}.jellyp", 1 + 40 * n, 40) for n in range(3)]
    log = indexed(paths, tmp_path / ".idx", every)
    try:
        check_every_version(log, reference(paths), seed=every)
    finally:
        log.close()


@pytest.mark.parametrize("kept", ["default", "two", "over-bytes"])
def test_fetches_in_any_order_equal_a_sequential_read_and_one_by_one_restores_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: str
) -> None:
    from patchsync.logs import indexed_log

    if kept == "two":
        monkeypatch.setattr(indexed_log, "CURSORS", 2)
    elif kept == "over-bytes":  # every decoder is over the bytes bound: only the last one stays
        monkeypatch.setattr(indexed_log, "CURSOR_BYTES", 1)
    restores: list[int] = []
    restored = indexed_log._restored

    def counted(cp: Any, path: Path, limits: Any) -> Any:
        restores.append(cp.version)
        return restored(cp, path, limits)

    monkeypatch.setattr(indexed_log, "_restored", counted)
    paths = [segment(tmp_path / f"{n:03d}.jellyp", 1 + 60 * n, 60) for n in range(2)]
    expected = reference(paths)
    log = indexed(paths, tmp_path / ".idx", every=16)
    try:
        restores.clear()
        # Two clients syncing one by one, interleaved: each continues where it stopped.
        for v in range(1, 61):
            assert fetched(log, v) == expected[v - 1]
            assert fetched(log, 60 + v) == expected[59 + v]
        assert len(restores) == (2 if kept != "over-bytes" else 120)
        for order in (list(range(len(expected), 0, -1)), random.Random(3).sample(range(1, 121), 120)):
            assert [fetched(log, v) for v in order] == [expected[v - 1] for v in order]
        assert indexed_log.KEPT.count(log._kept_id) <= {"default": indexed_log.CURSORS, "two": 2, "over-bytes": 1}[kept]
        log.close_cursors()
        assert indexed_log.KEPT.count(log._kept_id) == 0
    finally:
        log.close()


def test_served_log_appends_and_reopens_without_a_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 30)
    indexed([path], index_path(path)).close()  # decoder states every 5 patches

    async def go() -> None:
        topic = FileLogTopic("t", str(path), path)
        await topic.open()
        for n in range(31, 41):
            await topic.append(payload(n, n - 1))
        entries = [e async for e in topic.read(Start.after_version(25), follow=False)]
        assert [e.version for e in entries] == list(range(26, 41))
        assert topic.version_of(patch_id(35)) == 35
        await topic.close()

    run(go())
    expected = reference([path])
    assert len(expected) == 40
    # Opening again, by another path to the same log (the directory moved): the index
    # matches the log, so nothing is decoded to open it.
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in (path.name, index_path(path).name):
        os.rename(tmp_path / name, moved / name)
    path = moved / path.name
    monkeypatch.setattr(IndexedLog, "_scan", lambda *a, **k: pytest.fail("the log was scanned"))
    log = indexed([path], index_path(path))
    try:
        check_every_version(log, expected)
    finally:
        log.close()


def test_a_log_grown_while_the_server_was_down_is_indexed_from_its_tail(tmp_path: Path) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 30)
    indexed([path], index_path(path)).close()
    # Another writer (a recorder) appends a stream of its own while nobody serves the log.
    more: list[Event] = []
    for n in range(31, 61):
        more += patch_events(n, n - 1, rows=3)
    options = next(iter(read_patches(path))).options
    assert options is not None
    with open(path, "ab") as f:  # a stream of its own, as `patchsync append` writes it
        f.write(encode(more, options, NT_TERMS, append=True))
    log = indexed([path], index_path(path))
    try:
        check_every_version(log, reference([path]))
    finally:
        log.close()


def _break_index(index: Path, how: str) -> None:
    if spoil_index(index, how):
        return
    if how == "row":  # a value changed behind the checksum's back
        with sqlite3.connect(index) as db:
            db.execute("UPDATE patches SET offset = offset + 7 WHERE version = 33")
    elif how == "checkpoints":
        with sqlite3.connect(index) as db:
            db.execute("UPDATE checkpoints SET offset = offset + 3 WHERE version > 20")


@pytest.mark.parametrize("how", ["deleted", "truncated", "garbage", "row", "checkpoints", "format"])
def test_a_broken_index_is_built_again(tmp_path: Path, how: str) -> None:
    paths = [segment(tmp_path / f"{n:03d}.jellyp", 1 + 30 * n, 30) for n in range(2)]
    index = tmp_path / ".idx"
    indexed(paths, index).close()
    for name in (index.with_name(".idx-wal"), index.with_name(".idx-shm")):
        assert not name.exists() or name.stat().st_size >= 0  # SQLite checkpoints the WAL on close
    _break_index(index, how)
    log = indexed(paths, index)
    try:
        if how == "row":  # found only when read: refused, never answered from
            with pytest.raises(IndexCorrupt, match="version 33 fails its checksum"):
                fetched(log, 33)
            log.rebuild("test")
        check_every_version(log, reference(paths))
    finally:
        log.close()


def test_an_index_of_the_previous_format_is_built_again_never_misread(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Format 1 held its checkpoints' states as JSON: such an index is refused as a whole
    # (rebuilt with one warning), not read with its states failing one by one.
    paths = [segment(tmp_path / f"{n:03d}.jellyp", 1 + 30 * n, 30) for n in range(2)]
    index = tmp_path / ".idx"
    indexed(paths, index).close()
    with sqlite3.connect(index) as db:
        db.execute("UPDATE meta SET value = 'patchsync-version-index 1' WHERE key = 'format'")
        states = db.execute("SELECT count(*) FROM checkpoints WHERE state IS NOT NULL").fetchone()[0]
    assert states > 0
    caplog.set_level("WARNING", logger="patchsync.index")
    log = indexed(paths, index)
    try:
        assert "index format 'patchsync-version-index 1'" in caplog.text
        check_every_version(log, reference(paths))
    finally:
        log.close()
    with sqlite3.connect(index) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0] == INDEX_FORMAT


def test_a_topic_rebuilds_an_index_found_broken_while_serving(tmp_path: Path) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 40)
    expected = reference([path])

    async def go() -> None:
        topic = FileLogTopic("t", str(path), path)
        await topic.open()
        try:
            _break_index(index_path(path), "row")
            entries = [e async for e in topic.read(Start.after_version(30), follow=False)]
            assert [(e.patch_id, content(read_payload(e.payload))) for e in entries] == expected[30:]
        finally:
            await topic.close()

    run(go())


@pytest.mark.parametrize("change", ["replaced", "cut", "same-start"])
def test_an_index_left_by_another_log_is_not_trusted(tmp_path: Path, change: str) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 50)
    indexed([path], index_path(path)).close()
    if change == "replaced":  # another log under the same name
        segment(path, 100, 20)
    elif change == "cut":  # cut below the indexed end, at a patch boundary
        patches = list(read_patches(path))
        events = [e for p in patches[:20] for e in p.events]
        write_log(path, events, adapter=NT_TERMS)
    else:  # the same first patch, different after it, and longer
        events = patch_events(1, None, rows=3)
        for n in range(2, 80):
            events += patch_events(n, n - 1, rows=4)
        write_log(path, events, adapter=NT_TERMS)
    log = indexed([path], index_path(path))
    try:
        check_every_version(log, reference([path]))
    finally:
        log.close()


# After its third commit the build stops where it stands (and says so): the kill lands
# between two commits of a build under way, whatever the machine's speed or load.
_BUILD = """
import sys, time
from pathlib import Path
from patchsync.logs import indexed_log
indexed_log.FLUSH_EVERY = 200
flush = indexed_log.IndexedLog._flush
flushes = 0
def paused(self, *args):
    global flushes
    flush(self, *args)
    flushes += 1
    if flushes == 3:
        Path(sys.argv[2] + ".paused").touch()
        time.sleep(3600)
indexed_log.IndexedLog._flush = paused
log = indexed_log.IndexedLog([Path(sys.argv[1])], Path(sys.argv[2]), every=1)
log.open()
"""


def test_killed_while_writing_the_index(tmp_path: Path) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 6000)
    index = tmp_path / ".idx"
    # Killed once some rows were committed, with more still to write: a part of the log.
    committed = killed_index_rows(_BUILD, [str(path), str(index)], index.with_name(".idx.paused"), index)
    assert 0 < committed < 6000
    log = indexed([path], index)
    try:
        expected = reference([path])
        head = log.head()
        assert head is not None and head.version == len(expected)
        for version in random.Random(3).sample(range(1, len(expected) + 1), 200):
            assert fetched(log, version) == (expected[version - 1][0], expected[version - 1][1])
    finally:
        log.close()


def test_an_unwritable_index_place_falls_back_to_memory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = segment(tmp_path / "log.jellyp", 1, 20)
    # A place the index cannot be written (as a read-only directory is for other users).
    log = indexed([path], tmp_path / "no such directory" / ".idx")
    try:
        assert log.index.path is None
        check_every_version(log, reference([path]))
    finally:
        log.close()
    assert "keeping it in memory" in caplog.text


def test_a_nats_topic_serves_what_another_writer_publishes(nats_stream: str) -> None:
    """A stream appended to by another writer while served: its new patches become
    fetchable, one by sequence (a direct get) as in a range."""
    from patchsync.nats.nats_log import NatsLog
    from patchsync.nats.url import parse_stream_url
    from patchsync.serve.nats_topic import NatsTopic

    url = parse_stream_url(nats_stream)

    async def go() -> None:
        topic = NatsTopic("n", nats_stream, url)
        await topic.open()
        try:
            await topic.append(payload(1, None))
            with NatsLog(url) as other:  # another writer, not through the server
                for n in range(2, 6):
                    other.publish_patch(payload(n, n - 1), patch_id(n), patch_id(n - 1))
            reader = topic.read(Start.after_version(0))
            seen = [await anext(reader) for _ in range(5)]
            await reader.aclose()
            assert [(e.version, e.patch_id) for e in seen] == [(n, patch_id(n)) for n in range(1, 6)]
            for entry in seen:  # one at a time (GET /NAME/VERSION) equals the range read
                [single] = [e async for batch in topic._stored(entry.version, entry.version) for e in batch]
                assert single == entry
            assert topic.version_of(patch_id(4)) == 4
        finally:
            await topic.close()

    run(go())


def test_a_read_across_a_window_of_the_index_keeps_each_stream_of_one_patch_apart(tmp_path: Path) -> None:
    # A served log's appends are each a stream of one patch; the index is read 1,024 rows at
    # a time, and the last patch of each window must still end where the next stream starts
    # (it once ran to the end of the segment, handing a client hundreds of patches as one).
    count = 1100
    path = segment(tmp_path / "log.jellyp", 1, 2)

    async def go() -> None:
        topic = FileLogTopic("t", str(path), path)
        await topic.open()
        for n in range(3, count + 1):
            await topic.append(payload(n, n - 1, rows=1))
        await topic.close()

    run(go())
    expected = reference([path])
    log = indexed([path], index_path(path), every=64)
    try:
        stored = list(log.read(1, count))
    finally:
        log.close()
    assert [s.version for s in stored] == list(range(1, count + 1))
    got = [(s.patch_id, content(s.events if s.raw is None else read_payload(s.raw))) for s in stored]  # type: ignore[arg-type]
    assert got == expected


def test_a_fetch_as_text_is_the_text_of_the_message_readers_get(tmp_path: Path) -> None:
    # Another writer's stream of many patches (shared lookups, repeated terms): the text is
    # made from the decoded events, and must be the text of the one-patch message a reader
    # of the log gets (encoded, then decoded again), byte for byte.
    from patchsync.events import Add, Delete, Header, PatchEnd, PrefixAdd, PrefixDelete, TxAbort, TxCommit, TxStart
    from patchsync.logs.patch_logs import LogAppender
    from patchsync.options import PatchOptions, StatementType, StreamType
    from patchsync.serve.feed import patch_text

    ex = "http://example.org/"
    options = PatchOptions(
        stream_type=StreamType.PUNCTUATED,
        statement_type=StatementType.QUADS,
        rdf_star=True,
        generalized_statements=True,
    )
    path = tmp_path / "log.jellyp"
    with LogAppender(path, options, NT_TERMS, chain="ignore") as out:
        for n in range(40):
            g = f"<{ex}g{n % 3}>" if n % 2 else None
            out.write(
                [
                    Header("id", f"<uuid:{n:08d}-0000-4000-8000-000000000000>"),
                    *([Header("prev", f"<uuid:{n - 1:08d}-0000-4000-8000-000000000000>")] if n else []),
                    Header("note", f'"patch {n}"'),
                    TxStart(),
                    PrefixAdd(f"p{n % 4}", f"<{ex}ns{n % 4}/>", g),
                    Add(f"<{ex}s{n}>", f"<{ex}p>", f'"v{n}"@en', g),
                    Add(f"<{ex}s{n}>", f"<{ex}q>", f"<< <{ex}s{n}> <{ex}p> <{ex}o> >>", g),
                    Add("_:b1", f"<{ex}p>", f'"{n}"^^<http://www.w3.org/2001/XMLSchema#integer>', g),
                    Add(f"<{ex}s{n}>", f"<{ex}r>", f'"plain {n}"^^<http://www.w3.org/2001/XMLSchema#string>', g),
                    Add(f'"{n}"', f"<{ex}p>", f'"tab\\t{n}"', g),  # a generalized statement
                    Delete(f"<{ex}s{n - 1}>", f"<{ex}p>", f'"v{n - 1}"@en', g),
                    PrefixDelete(f"p{(n + 1) % 4}", None, g),
                    TxAbort() if n % 5 == 4 else TxCommit(),
                    PatchEnd(),
                ]
            )

    async def go() -> None:
        topic = FileLogTopic("t", str(path), path)
        await topic.open()
        try:
            for version in [*range(1, 41), 17, 3, 40]:
                entry = await topic.fetch(version)
                assert entry is not None
                assert await topic.fetch_text(version) == patch_text(entry.payload)
            assert await topic.fetch_text(41) is None and await topic.fetch_text(0) is None
        finally:
            await topic.close()

    run(go())
