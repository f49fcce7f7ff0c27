"""Logs truncated or rewritten under a running tail daemon.

``tests/test_tail.py`` covers a log that shrank, one replaced between two runs and a bad
frame appended. These add the rewrites a live daemon must notice: the first frame
rewritten in place, the file replaced by a rename, and the subtle one: the log cut back
and written again past its old end with other patches, so neither its size nor its first
frame tell. Each time the daemon stops with one line naming the log, exits 1, and the
target holds exactly the units it had committed from the original log, none twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import CheckpointError
from patchsync.tail import Tailer, TailOptions
from patchsync.tail.file_follower import FileFollower

from .fault_helpers import (
    applied_ids,
    committed_reference,
    frame_ends,
    one_error_line,
    patches_applied,
    sql_checkpoint,
    sql_state,
    start_tail,
)
from .process_helpers import wait_for_value
from .test_tail import log_bytes, write_patches


def _run_until_stopped(log: Path, url: str, change: Any) -> tuple[str, bytes]:
    """Tail 20 patches, apply ``change(log)``, return the daemon's stderr and the original bytes."""
    write_patches(log, 1, 20)
    original = log.read_bytes()
    d = start_tail(str(log), "--target", url)
    try:
        wait_for_value(lambda: patches_applied(url, log), 20, "20 patches")
        change(log)
        _, err = d.communicate(timeout=120)
    finally:
        if d.poll() is None:
            d.kill()
            d.communicate()
    assert d.returncode == 1, err
    return err, original


def _assert_original_units_only(url: str, log: Path, original: bytes) -> None:
    cp = sql_checkpoint(url, log)
    assert cp is not None and cp.patches == 20
    saved = log.read_bytes()
    try:
        log.write_bytes(original)
        assert sql_state(url) == committed_reference(log, cp)
    finally:
        log.write_bytes(saved)
    ids = applied_ids(url)
    assert len(ids) == len(set(ids)) == 20


def test_first_frame_rewritten_in_place(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    other = log_bytes(1, 40, tmp_path).replace(b"value 1.0", b"VALUE 1.0")

    def rewrite(path: Path) -> None:
        with open(path, "r+b") as f:  # same inode, longer content, a different first frame
            f.write(other)

    err, original = _run_until_stopped(log, sqlite_url, rewrite)
    line = one_error_line(err)
    assert str(log.resolve()) in line and "first frame changed" in line, line
    _assert_original_units_only(sqlite_url, log, original)


def test_log_replaced_by_a_rename(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"

    def replace(path: Path) -> None:
        new = tmp_path / "new.jellyp"
        write_patches(new, 1, 40)  # even the same patches: another file is another log
        os.replace(new, path)

    err, original = _run_until_stopped(log, sqlite_url, replace)
    line = one_error_line(err)
    assert str(log.resolve()) in line and "inode changed" in line, line
    _assert_original_units_only(sqlite_url, log, original)


def test_log_cut_back_and_rewritten_past_its_old_end(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    first_ten = frame_ends(log_bytes(1, 20, tmp_path))[9]
    # Patches 11..60 of another producer (seed 2): same first frame, same first ten patches.
    other = log_bytes(1, 60, tmp_path)
    other_seed = tmp_path / "other.jellyp"
    write_patches(other_seed, 1, 60, seed=2, rows=6)
    replacement = other[:first_ten] + other_seed.read_bytes()[frame_ends(other_seed.read_bytes())[9] :]

    def rewrite(path: Path) -> None:
        with open(path, "r+b") as f:
            f.seek(first_ten)
            f.write(replacement[first_ten:])  # one write: the size only grows

    err, original = _run_until_stopped(log, sqlite_url, rewrite)
    line = one_error_line(err)
    assert str(log.resolve()) in line and "rewritten" in line, line
    _assert_original_units_only(sqlite_url, log, original)


def test_truncated_to_zero_and_regrown(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"

    def truncate_and_regrow(path: Path) -> None:
        with open(path, "r+b") as f:
            f.truncate(0)
        write_patches(path, 1, 40, seed=3, rows=7)

    err, original = _run_until_stopped(log, sqlite_url, truncate_and_regrow)
    line = one_error_line(err)
    assert str(log.resolve()) in line
    assert any(w in line for w in ("shrank", "first frame changed", "rewritten")), line
    _assert_original_units_only(sqlite_url, log, original)


@pytest.mark.parametrize("rewrite", ["first frame", "cut back"])
def test_rewrite_landing_between_the_check_and_the_read(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, rewrite: str
) -> None:
    # The race behind a flaky run of the tests above: the daemon checked the log, the
    # writer rewrote it, then the daemon read on and applied patches of the new content
    # before its next pass noticed. Here the rewrite lands exactly in that window, every time.
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 20)
    original = log.read_bytes()
    if rewrite == "first frame":
        other = log_bytes(1, 40, tmp_path).replace(b"value 1.0", b"VALUE 1.0")
        expected, at = "first frame changed", 0
    else:
        first_ten = frame_ends(original)[9]
        seed2 = tmp_path / "seed2.jellyp"
        write_patches(seed2, 1, 60, seed=2, rows=6)
        other = original[:first_ten] + seed2.read_bytes()[frame_ends(seed2.read_bytes())[9] :]
        expected, at = "the log was rewritten", first_ten
    state_dir = tmp_path / "state"
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        [first] = tailer.run_once()
    assert first.result.patches == 20

    check_file = FileFollower._check_file

    def check_then_rewrite(self: FileFollower) -> None:
        check_file(self)
        if log.read_bytes() == original:  # once: the writer's one write, after the check
            with open(log, "r+b") as f:
                f.seek(at)
                f.write(other[at:])

    monkeypatch.setattr(FileFollower, "_check_file", check_then_rewrite)
    with (
        pytest.raises(CheckpointError, match=expected),
        SqlTarget(sqlite_url) as target,
        Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer,
    ):
        tailer.run_once()
    _assert_original_units_only(sqlite_url, log, original)
