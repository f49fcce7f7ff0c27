"""The rules written once over the remote-log interface, against a real in-memory remote log.

:class:`patchsync.remote.interface.MemoryLog` stores patches at positions from 1 and checks the
chain rule and duplicates as a server does (docs/design.md §9: one patch per message, the
position is the checkpoint). Each rule is asked here as the NATS, gRPC and HTTP logs ask it:
where a replica resumes, how far it is behind, how a publish run continues a log's head, how
pages are read (on a thread or on the caller's), how a recorder's writer commits, and the
whole daemon following a log of this kind (registered like any other source kind), which
must end with the same state as applying the log file itself.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.target import PAST, Checkpoint
from patchsync.errors import ChainError, UsageError
from patchsync.logs.payloads import MSG_ID, log_patches
from patchsync.remote.interface import LogHead, MemoryLog
from patchsync.remote.publish import publish_patches
from patchsync.remote.read_ahead import DirectPages, ReadAhead
from patchsync.remote.rules import lag, resume_position
from patchsync.remote.writer import PatchWriter
from patchsync.sources import FOLLOW, SourceKind, register_source
from patchsync.sources import registry as _registry
from patchsync.sources.roles import Roles
from patchsync.terms.ntriples import NTriplesTerms

from .nats_helpers import patch_id, write_chain

_LOGS: dict[str, MemoryLog] = {}


def connect(address: Any, *, timeout: float | None = None, follow: bool = False) -> MemoryLog:
    """The ``connect`` role of the ``memlog://NAME`` kind these tests register."""
    del timeout, follow
    return _LOGS[str(address)]


def _checkpoint(offset: int, last_id: str | None) -> Checkpoint:
    return Checkpoint(offset, PAST, PAST, offset, last_id, "memory:log", time.time())


def _published(tmp_path: Path, count: int, tag: str = "m") -> tuple[MemoryLog, list[str], Path]:
    path = tmp_path / f"{tag}.jellyp"
    ids = write_chain(path, tag, count)
    log = MemoryLog()
    publish_patches(log, [path])
    return log, ids, path


def test_the_memory_log_keeps_the_chain_rule(tmp_path: Path) -> None:
    log, ids, path = _published(tmp_path, 3)
    assert log.head() == LogHead(3, ids[-1], log.messages[-1].published)
    first = next(iter(log_patches(path)))
    assert log.append(first).duplicate and log.head().seq == 3  # held already: nothing stored
    other = tmp_path / "other.jellyp"
    write_chain(other, "x", 1)
    with pytest.raises(ChainError, match="does not follow the head"):
        log.append(next(iter(log_patches(other))))
    assert len(log.messages) == 3


@pytest.mark.parametrize(
    ("offset", "last_id", "drop_before", "expected", "why"),
    [
        (None, None, 1, 1, "no checkpoint: from the start"),
        (0, None, 1, 1, "a checkpoint before any message"),
        (2, patch_id("m", 2), 1, 3, "message 2 applied whole: go on after it"),
        (2, patch_id("m", 1), 1, 2, "inside message 2 (its first transaction only): read it again"),
        (2, None, 1, 2, "no patch passed whole yet: read it again"),
        (2, patch_id("m", 1), 3, 3, "message 2 removed by retention: counted as applied"),
        (9, patch_id("m", 9), 1, 10, "past the log's end: nothing there to read again"),
    ],
)
def test_where_a_replica_resumes(
    tmp_path: Path, offset: int | None, last_id: str | None, drop_before: int, expected: int, why: str
) -> None:
    # docs/design.md §9: a replica resumes after its checkpoint's message when that message
    # was applied whole, and inside it otherwise (the applier passes over applied units).
    log, _, _ = _published(tmp_path, 4)
    log.drop_before(drop_before)
    stored = None if offset is None else _checkpoint(offset, last_id)
    assert resume_position(log, stored) == expected, why


def test_a_message_without_an_id_is_read_again(tmp_path: Path) -> None:
    log, _, _ = _published(tmp_path, 2)
    log.messages[1] = log.messages[1]._replace(headers={})
    assert log.patch_id_at(2) == ""
    assert resume_position(log, _checkpoint(2, patch_id("m", 2))) == 2


def test_lag_counts_messages_and_the_age_of_the_first_not_applied(tmp_path: Path) -> None:
    log, _, _ = _published(tmp_path, 5)
    log.messages[2] = log.messages[2]._replace(published=time.time() - 60)
    behind = lag(log, 2)
    assert behind.messages == 3 and 59 <= behind.seconds < 120
    assert lag(log, 5) == lag(log, 7) == type(behind)(0, 0.0)
    untimed = MemoryLog(keep_times=False)
    untimed.messages = log.messages
    assert lag(untimed, 2) == type(behind)(3, 0.0)  # a server without times: messages only


def test_a_publish_run_continues_the_head_and_a_rerun_publishes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jellyp"
    ids = write_chain(path, "c", 6)
    first = tmp_path / "first.jellyp"
    write_chain(first, "c", 2)
    log = MemoryLog()
    assert publish_patches(log, [first]).published == 2
    seen: list[str] = []
    report = publish_patches(log, [path], on_published=lambda message, _: seen.append(message.patch_id))
    assert (report.published, report.skipped, report.last_seq, report.head) == (4, 2, 6, ids[-1])
    assert seen == ids[2:]  # encoded and sent only after the head
    again = publish_patches(log, [path])
    assert (again.published, again.skipped, again.last_seq) == (0, 6, 6)
    assert [m.headers[MSG_ID] for m in log.messages] == ids


def test_a_publish_run_that_does_not_follow_the_head_stores_nothing(tmp_path: Path) -> None:
    log, _, _ = _published(tmp_path, 2)
    other = tmp_path / "x.jellyp"
    write_chain(other, "x", 3)
    with pytest.raises(ChainError):
        publish_patches(log, [other])
    assert len(log.messages) == 2


def test_both_page_readers_hand_out_the_same_messages(tmp_path: Path) -> None:
    # Differential: the read-ahead thread and the caller's-thread reader agree, and both
    # end at the head as it was reached (--once).
    log, _, _ = _published(tmp_path, 600)
    log.page_size = 7  # type: ignore[misc]
    read: list[list[int]] = []
    for pages in (DirectPages(log, 10, 0.0), ReadAhead(lambda: log, 10, 0.0)):
        got: list[int] = []
        while not pages.ended:
            got += [m.seq for m in pages.take(50, 1.0)]
        pages.close()
        read.append(got)
    assert read[0] == read[1] == list(range(11, 601))


def test_the_default_position_of_finds_a_patch_by_reading_the_log(tmp_path: Path) -> None:
    log, ids, _ = _published(tmp_path, 700)
    assert [log.position_of(ids[n - 1]) for n in (1, 300, 700)] == [1, 300, 700]
    assert log.position_of("urn:nowhere") is None


def _fill(writer: PatchWriter, pid: str, prev: str | None) -> None:
    """One patch of one transaction in the writer's sink, as a recorder writes it."""
    sink = writer.sink
    sink.header("id", f"<{pid}>")
    if prev is not None:
        sink.header("prev", f"<{prev}>")
    sink.tx_start()
    sink.add("<http://example.org/s>", "<http://example.org/p>", f'"{pid}"')
    sink.tx_commit()
    sink.end_patch()


def test_a_writer_commits_after_the_head_and_refuses_a_duplicate_not_at_it(tmp_path: Path) -> None:
    log, ids, _ = _published(tmp_path, 2)
    writer = PatchWriter(log, None, NTriplesTerms(), own=False)
    assert writer.head == ids[-1]
    _fill(writer, "urn:w:3", ids[-1])
    writer.commit("urn:w:3")
    assert (writer.head, writer.last_seq, log.head().patch_id) == ("urn:w:3", 3, "urn:w:3")
    # The log holds patch 1 already, but not at its head: the next patches would not follow.
    writer.head = None
    _fill(writer, ids[0], None)
    with pytest.raises(ChainError, match="not at its head"):
        writer.commit(ids[0])
    writer.close()
    assert not log.closed  # not the writer's to close


def test_a_writer_refuses_a_log_that_is_not_writable(tmp_path: Path) -> None:
    class ReadOnly(MemoryLog):
        def writable(self) -> None:
            raise UsageError(f"{self.url}: read-only")

    with pytest.raises(UsageError, match="read-only"):
        PatchWriter(ReadOnly(), None, None)


@pytest.fixture
def memlog_kind() -> Any:
    kind = SourceKind(
        "memlog",
        frozenset({FOLLOW}),
        scheme="memlog",
        roles=Roles(connect=f"{__name__}:connect"),
    )
    register_source(kind)
    yield kind
    _registry._SCHEMES.pop("memlog")
    _LOGS.clear()


def test_the_daemon_follows_any_kind_of_remote_log(tmp_path: Path, memlog_kind: Any) -> None:
    # Differential: tailing the log through the remote-log interface ends where applying the
    # log file does, and a second run resumes after the checkpoint with nothing to do.
    from patchsync.tail import Tailer, TailOptions

    log, ids, path = _published(tmp_path, 40)
    name = "memlog://here/m"
    _LOGS[name] = log
    target = MemoryTarget()
    with Tailer([name], target, TailOptions()) as tailer:
        (report,) = tailer.run_once()
    assert report.result.patches == 40 and report.applied_seq == 40 and report.lag_messages == 0
    expected = MemoryTarget()
    apply_file(path, expected)
    assert sorted(target.quads()) == sorted(expected.quads())
    checkpoint = target.checkpoint(name)
    assert checkpoint is not None and (checkpoint.offset, checkpoint.last_id) == (40, ids[-1])
    with Tailer([name], target, TailOptions()) as tailer:
        (again,) = tailer.run_once()
    assert again.result.patches == 0 and again.resumed_from == 41


def test_short_pages_of_a_backlog_commit_in_groups(tmp_path: Path, memlog_kind: Any, monkeypatch: Any) -> None:
    # A server's pages may be short (the change feed bounds a page in bytes): a page that ends
    # before the head is still a backlog, whose units join the next ones' commit groups
    # instead of a pause (a commit of the applier's group) per page (docs/design.md §9). The
    # pause interval is made long so that the count depends on pages, not on machine speed.
    from patchsync.apply.applier import Applier
    from patchsync.tail import Tailer, TailOptions, network_follower

    monkeypatch.setattr(network_follower, "PAUSE_SECONDS", 3600.0)
    pauses: list[int] = []
    pause = Applier.pause

    def counted(self: Applier) -> bool:
        pauses.append(1)
        return pause(self)

    monkeypatch.setattr(Applier, "pause", counted)

    class ShortPages(MemoryLog):
        page_size = 5

    log, ids, path = _published(tmp_path, 120)
    short = ShortPages()
    short.messages = log.messages
    name = "memlog://here/short"
    _LOGS[name] = short
    target = MemoryTarget()
    with Tailer([name], target, TailOptions()) as tailer:
        (report,) = tailer.run_once()
    assert report.result.patches == 120 and report.applied_seq == 120
    assert len(pauses) <= 3, len(pauses)  # 24 pages, not a pause per page or per few
    expected = MemoryTarget()
    apply_file(path, expected)
    assert sorted(target.quads()) == sorted(expected.quads())
    checkpoint = target.checkpoint(name)
    assert checkpoint is not None and checkpoint.last_id == ids[-1]
