"""A live tail never decodes bytes that straddle a truncation (docs/design.md §3).

A writer dies half way through a frame; the daemon reads that partial frame while it
applies the frames before it; the next writer (``patchsync append``, a real process) cuts
the partial frame off and appends whole patches in its place. The daemon must decode the
new bytes from the file, not the old partial frame joined to them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.apply.targets.sql import SqlTarget
from patchsync.tail import Tailer, TailOptions
from patchsync.tail.file_follower import FileFollower

from .apply_helpers import state
from .test_tail import log_bytes, reference, write_patches

REPO = Path(__file__).resolve().parent.parent


def _append(src: Path, dest: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "append", str(src), "-o", str(dest)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("torn", [0.2, 0.5, 0.9])
def test_partial_frame_cut_and_rewritten_while_the_daemon_applies(tmp_path: Path, sqlite_url: str, torn: float) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 10)
    size = log.stat().st_size
    frame_11 = log_bytes(1, 11, tmp_path)[size:]
    with open(log, "ab") as f:  # a writer that died in the middle of patch 11's frame
        f.write(frame_11[: max(1, int(len(frame_11) * torn))])
    more = tmp_path / "more.jellyp"
    write_patches(more, 11, 30)  # what the next writer appends (chained on patch 10)

    feed_frames = FileFollower._feed_frames
    appended: list[bool] = []

    def feed_then_recover(self: FileFollower) -> bool:
        # The daemon holds the partial frame it read and applies the frames before it;
        # meanwhile the next writer recovers the log. Exactly once, in that window.
        progressed = feed_frames(self)
        if not appended:
            appended.append(True)
            _append(more, log)
        return progressed

    mp = pytest.MonkeyPatch()
    mp.setattr(FileFollower, "_feed_frames", feed_then_recover)
    try:
        with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(chain="strict")) as tailer:
            [report] = tailer.run_once()
    finally:
        mp.undo()
    assert appended
    assert report.error is None and report.result.patches == 30, report
    with SqlTarget(sqlite_url) as target:
        assert state(target) == reference(log)


def test_partial_frame_cut_between_two_passes_of_a_daemon(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 10)
    size = log.stat().st_size
    frame_11 = log_bytes(1, 11, tmp_path)[size:]
    with open(log, "ab") as f:
        f.write(frame_11[: len(frame_11) // 2])
    options = TailOptions(chain="strict")
    with SqlTarget(sqlite_url) as target, Tailer([log], target, options) as tailer:
        [first] = tailer.run_once()
        assert first.result.patches == 10
        more = tmp_path / "more.jellyp"
        write_patches(more, 11, 30)
        _append(more, log)
        [second] = tailer.run_once()
        assert second.error is None and second.result.patches == 30, second
    with SqlTarget(sqlite_url) as target:
        assert state(target) == reference(log)


def test_a_read_that_began_before_the_cut_is_read_again(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One read(2) is not atomic against a writer: pages read before a cut hold the old partial
    # frame, pages read after it the new frames. Such a read is made up here (the old bytes
    # joined to what the file holds after the recovery); the daemon must not decode it.
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 10)
    size = log.stat().st_size
    frame_11 = log_bytes(1, 11, tmp_path)[size:]
    stale = frame_11[: len(frame_11) // 2]
    with open(log, "ab") as f:
        f.write(stale)
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(chain="strict")) as tailer:
        [first] = tailer.run_once()
        assert first.result.patches == 10
        more = tmp_path / "more.jellyp"
        write_patches(more, 11, 30, seed=2)  # other bytes than the partial frame's
        _append(more, log)
        assert log.read_bytes()[size : size + len(stale)] != stale

        pread = os.pread
        torn: list[int] = []

        def torn_read(fd: int, n: int, offset: int) -> bytes:
            data = pread(fd, n, offset)
            if offset == size and n > len(stale) and not torn:
                torn.append(offset)
                return stale + data[len(stale) :]
            return data

        monkeypatch.setattr(os, "pread", torn_read)
        [second] = tailer.run_once()
        monkeypatch.undo()
    assert torn, "the daemon did not read from the start of the partial frame"
    assert second.error is None and second.result.patches == 30, second
    with SqlTarget(sqlite_url) as target:
        assert state(target) == reference(log)
