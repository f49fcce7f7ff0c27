"""Joining and appending patch logs by re-encoding (patchsync.logs.append, ``patchsync append``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from patchsync import (
    Add,
    ChainError,
    DecodeError,
    Header,
    PatchEnd,
    PatchOptions,
    StatementType,
    TxCommit,
    TxStart,
    UsageError,
)
from patchsync.logs.append import append_logs, log_head
from patchsync.logs.patch_logs import LogAppender, read_events

from .helpers import patches, write_log

OPTS = PatchOptions(statement_type=StatementType.TRIPLES, max_name_table_size=8)


def patch(n: int, prev: int | None = None, base: str = "http://x/") -> list[object]:
    rows: list[object] = [Header("id", URIRef(f"uuid:{n}"))]
    if prev is not None:
        rows.append(Header("prev", URIRef(f"uuid:{prev}")))
    # Each log its own IRIs, so stale lookups would show (cat gives wrong IRIs here).
    rows += [
        TxStart(),
        *(Add(URIRef(f"{base}s{n}-{i}"), URIRef(f"{base}p"), Literal(i)) for i in range(10)),
        TxCommit(),
    ]
    return rows


def patch_log(path: Path, *ps: list[object], options: PatchOptions = OPTS) -> Path:
    """A log of the patches ``ps``, each ended."""
    return write_log(path, [e for p in ps for e in (*p, PatchEnd())], options=options)


def test_joining_two_separately_written_logs_decodes(tmp_path: Path) -> None:
    a = patch_log(tmp_path / "a.jellyp", patch(1))
    b = patch_log(tmp_path / "b.jellyp", patch(2, 1, "http://other.org/y#"), patch(3, 2, "http://other.org/y#"))
    dest = tmp_path / "j.jellyp"
    assert append_logs(dest, [a, b]).appended == 3
    assert patches(read_events(dest)) == [
        patch(1),
        patch(2, 1, "http://other.org/y#"),
        patch(3, 2, "http://other.org/y#"),
    ]
    assert log_head(dest) == "uuid:3"
    with LogAppender(dest) as out:  # the destination took the first source's options
        assert out.options == OPTS


def test_appending_to_an_existing_log_continues_its_chain(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1), patch(2, 1))
    rdfp = patch_log(tmp_path / "more.rdfp", patch(3, 2, "http://z/"))
    assert append_logs(dest, [rdfp]).appended == 1
    assert patches(read_events(dest)) == [patch(1), patch(2, 1), patch(3, 2, "http://z/")]


def test_a_trailing_partial_frame_is_cut_before_appending(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1))
    whole = dest.read_bytes()
    partial = patch_log(tmp_path / "p.jellyp", patch(9)).read_bytes()
    dest.write_bytes(whole + partial[: len(partial) // 2])  # a writer crashed mid-frame
    src = patch_log(tmp_path / "b.jellyp", patch(2, 1))
    append_logs(dest, [src])
    assert patches(read_events(dest)) == [patch(1), patch(2, 1)]


def test_a_broken_chain_names_both_ids_and_writes_nothing(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1))
    before = dest.read_bytes()
    fork = patch_log(tmp_path / "fork.jellyp", patch(5, 4))
    with pytest.raises(
        ChainError, match=r"fork.jellyp: patch <uuid:5> has prev <uuid:4> but the head of .*log.jellyp is <uuid:1>"
    ):
        append_logs(dest, [fork])
    assert dest.read_bytes() == before


def test_the_chain_runs_through_the_sources(tmp_path: Path) -> None:
    a = patch_log(tmp_path / "a.jellyp", patch(1))
    gap = patch_log(tmp_path / "gap.jellyp", patch(3, 2))
    dest = tmp_path / "j.jellyp"
    with pytest.raises(ChainError, match=r"patch <uuid:3> has prev <uuid:2> .* is <uuid:1>"):
        append_logs(dest, [a, gap])
    assert not dest.exists()
    # Patches without ids or prev chain to anything (the check needs both).
    loose = patch_log(tmp_path / "loose.jellyp", patch(7)[1:])
    assert append_logs(dest, [a, loose, patch_log(tmp_path / "c.jellyp", patch(8, 1))]).appended == 3


def test_a_bad_source_appends_nothing(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1))
    before = dest.read_bytes()
    good = patch_log(tmp_path / "good.jellyp", patch(2, 1))
    bad = tmp_path / "bad.rdfp"
    bad.write_text("TX .\nA <http://x/s> <rel> 1 .\nTC .\n", encoding="utf-8")
    with pytest.raises(DecodeError, match=r"bad.rdfp, byte 5, line 2: IRI <rel> is not absolute"):
        append_logs(dest, [good, bad])
    assert dest.read_bytes() == before


def test_a_log_is_not_appended_to_itself(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1))
    with pytest.raises(UsageError, match="to itself"):
        append_logs(dest, [dest])


def test_the_command_appends_and_refuses_a_fork_in_one_line(tmp_path: Path) -> None:
    a = patch_log(tmp_path / "a.jellyp", patch(1))
    b = patch_log(tmp_path / "b.rdfp", patch(2, 1, "http://other.org/"))
    dest = tmp_path / "j.jellyp"
    run = [sys.executable, "-m", "patchsync", "append"]
    done = subprocess.run([*run, str(a), str(b), "-o", str(dest)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "appended 2, skipped 0 already present" in done.stdout
    assert patches(read_events(dest)) == [patch(1), patch(2, 1, "http://other.org/")]
    fork = patch_log(tmp_path / "fork.jellyp", patch(3, 1))
    before = dest.read_bytes()
    done = subprocess.run([*run, str(fork), "-o", str(dest)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "<uuid:1>" in lines[0] and "<uuid:2>" in lines[0], done.stderr
    assert dest.read_bytes() == before


def test_appending_the_same_logs_again_appends_nothing(tmp_path: Path) -> None:
    a = patch_log(tmp_path / "a.jellyp", patch(1), patch(2, 1))
    b = patch_log(tmp_path / "b.jellyp", patch(3, 2, "http://other.org/"))
    dest = tmp_path / "j.jellyp"
    first = append_logs(dest, [a, b])
    assert (first.appended, first.skipped, first.head) == (3, 0, "uuid:3")
    before = dest.read_bytes()
    again = append_logs(dest, [a, b])
    assert (again.appended, again.skipped, again.head) == (0, 3, "uuid:3")
    assert dest.read_bytes() == before
    # A source that grew: the patches held are skipped, the new ones continue the head.
    c = patch_log(tmp_path / "c.jellyp", patch(3, 2, "http://other.org/"), patch(4, 3))
    more = append_logs(dest, [a, c])
    assert (more.appended, more.skipped, more.head) == (1, 3, "uuid:4")
    assert patches(read_events(dest)) == [patch(1), patch(2, 1), patch(3, 2, "http://other.org/"), patch(4, 3)]


def test_a_first_patch_onto_a_log_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1))
    before = dest.read_bytes()
    other = patch_log(tmp_path / "other.jellyp", patch(9), patch(10, 9))
    with pytest.raises(
        ChainError,
        match=r"other.jellyp: patch <uuid:9> has no prev \(a first patch\) but .*log.jellyp is not empty: "
        r"its head is <uuid:1>; nothing was appended \(use chain='ignore'",
    ):
        append_logs(dest, [other])
    assert dest.read_bytes() == before
    report = append_logs(dest, [other], chain="ignore")
    # The head reported is the log's new one (it stayed the head before the append).
    assert (report.appended, report.skipped, report.head) == (2, 0, "uuid:10") == (2, 0, log_head(dest))
    assert patches(read_events(dest)) == [patch(1), patch(9), patch(10, 9)]


def test_the_library_appender_follows_the_same_rule(tmp_path: Path) -> None:
    dest = patch_log(tmp_path / "log.jellyp", patch(1), patch(2, 1))
    before = dest.read_bytes()
    with LogAppender(dest) as out:
        out.write([*patch(2, 1), PatchEnd()])  # the head again: already there
        assert out.skipped == 1
        with pytest.raises(
            ChainError, match=r"patch <uuid:7> has prev <uuid:6> but the head of .*log.jellyp is <uuid:2>"
        ):
            out.write([*patch(7, 6), PatchEnd()])
        with pytest.raises(ChainError, match="has no prev"):
            out.write([*patch(8), PatchEnd()])
    assert dest.read_bytes() == before
    with LogAppender(dest) as out:
        out.write([*patch(3, 2), PatchEnd(), *patch(4, 3), PatchEnd()])
        assert out.head == "uuid:4"
    assert patches(read_events(dest))[2:] == [patch(3, 2), patch(4, 3)]
    with LogAppender(dest, chain="ignore") as out:
        out.write([*patch(4, 3), PatchEnd()])
        out.write([*patch(9), PatchEnd(), *patch(10, 9)[1:], PatchEnd()])  # the last without an id
        assert out.head == "uuid:9"  # as chain_head reads the log: its last patch with an id
    assert patches(read_events(dest))[-4:-2] == [patch(4, 3), patch(4, 3)]
    assert log_head(dest) == "uuid:9"


def test_the_command_twice_does_not_double_the_log(tmp_path: Path) -> None:
    a = patch_log(tmp_path / "a.jellyp", patch(1), patch(2, 1))
    b = patch_log(tmp_path / "b.jellyp", patch(3, 2))
    dest = tmp_path / "j.jellyp"
    run = [sys.executable, "-m", "patchsync", "append", str(a), str(b), "-o", str(dest)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "appended 3, skipped 0 already present" in done.stdout, done.stderr
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "appended 0, skipped 3 already present" in done.stdout, done.stderr
    assert [p[0] for p in patches(read_events(dest))] == [Header("id", URIRef(f"uuid:{i}")) for i in (1, 2, 3)]
    other = patch_log(tmp_path / "other.jellyp", patch(9))
    done = subprocess.run([*run[:4], str(other), "-o", str(dest)], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert (
        "other.jellyp" in lines[0]
        and "<uuid:9>" in lines[0]
        and "<uuid:3>" in lines[0]
        and "--chain ignore" in lines[0]
    )


def test_a_directory_of_segments_is_appended_in_file_name_order(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    patch_log(logs / "seg-000002.jellyp", patch(3, 2))
    patch_log(logs / "seg-000001.jellyp", patch(1), patch(2, 1))
    dest = tmp_path / "j.jellyp"
    run = [sys.executable, "-m", "patchsync", "append", str(logs), "-o", str(dest)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "appended 3, skipped 0 already present (from 2 logs)" in done.stdout, done.stderr
    assert [p[0] for p in patches(read_events(dest))] == [Header("id", URIRef(f"uuid:{i}")) for i in (1, 2, 3)]
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([*run[:4], str(empty), "-o", str(dest)], capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1 and "without .jellyp segments" in lines[0], done.stderr
