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
    assert append_logs(dest, [a, b]) == 3
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
    assert append_logs(dest, [rdfp]) == 1
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
    with pytest.raises(ChainError, match=r"prev <uuid:4> but the head of .*log.jellyp is <uuid:1>"):
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
    assert append_logs(dest, [a, loose, patch_log(tmp_path / "c.jellyp", patch(8, 1))]) == 3


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
    assert "2 patches appended" in done.stdout
    assert patches(read_events(dest)) == [patch(1), patch(2, 1, "http://other.org/")]
    fork = patch_log(tmp_path / "fork.jellyp", patch(3, 1))
    before = dest.read_bytes()
    done = subprocess.run([*run, str(fork), "-o", str(dest)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "<uuid:1>" in lines[0] and "<uuid:2>" in lines[0], done.stderr
    assert dest.read_bytes() == before
