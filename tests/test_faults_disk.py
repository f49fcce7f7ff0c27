"""Disk full and read-only target directories under ``apply`` and ``tail`` (real tmpfs mounts).

The target (a SQLite database, or a ``file:`` N-Quads target) and the daemon's state
directory live on a small tmpfs; the log lives elsewhere. When the tmpfs fills up or is
remounted read-only (as root, ``chmod`` does not stop writes) the command must stop with
one clear line and a non-zero exit, the target must hold exactly its last committed
units, and once space is freed (or the mount is writable again) a rerun must finish with
every patch applied once.

A ``file:`` target is rewritten as a whole at each flush, data first and its checkpoint
sidecar second (docs/design.md §3): a failure between the two leaves the data one flush ahead of
the checkpoint, which a rerun replays harmlessly. The checks accept exactly that.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_stream, open_target

from .apply_helpers import state
from .fault_helpers import (
    committed_reference,
    fill,
    frame_ends,
    one_error_line,
    reference,
    remount,
    run_cli,
    start_tail,
    tmpfs,
)
from .process_helpers import wait_for
from .test_tail import log_bytes, write_patches

TARGETS = ["sqlite", "file"]
FULL_MESSAGES = ("disk is full", "No space left on device")
READ_ONLY_MESSAGES = ("readonly database", "Read-only file system", "read-only")


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "mnt", "1m") as path:
        yield path


def _spec(kind: str, mnt: Path) -> str:
    return f"sqlite:///{mnt / 't.db'}" if kind == "sqlite" else f"file:{mnt / 't.nq'}"


def _open(spec: str) -> Any:
    return open_target(spec)


def _look(spec: str, log: Path) -> tuple[Any, Any, list[str]]:
    """(state, checkpoint of ``log``, applied patch ids) of the target, read without changing it."""
    t = _open(spec)
    try:
        st = state(t)
        cps = {s.source: s.checkpoint for s in t.sources()}
        history = t.history() if callable(getattr(t, "history", None)) else t.history
        ids = [r.patch_id for r in history if r.patch_id is not None]
    finally:
        if hasattr(t, "discard"):
            t.discard()
    return st, cps.get(str(log.resolve())), ids


def assert_last_committed(kind: str, spec: str, log: Path) -> Any:
    """The target holds exactly the units up to its checkpoint (file: possibly one flush ahead)."""
    st, cp, ids = _look(spec, log)
    assert len(ids) == len(set(ids))
    if cp is not None:
        assert len(ids) == cp.patches
    if st == committed_reference(log, cp):
        return cp
    assert kind == "file", "the SQL target must equal its committed prefix"
    # The data file was renamed into place and the sidecar write failed: the data equals
    # some later patch boundary of the log (one flush ahead), never a half unit.
    data = log.read_bytes()
    start = 0 if cp is None else cp.offset
    for end in frame_ends(data):
        if end <= start:
            continue
        probe = MemoryTarget()
        apply_stream(io.BytesIO(data[:end]), probe, "jellyp", source="ref")
        if state(probe) == st:
            return cp
    raise AssertionError("the file target matches no patch boundary of the log")


def assert_exactly_once(spec: str, log: Path, patches: int) -> None:
    st, cp, ids = _look(spec, log)
    assert st == reference(log)
    assert cp is not None and cp.patches == patches
    assert len(ids) == len(set(ids)) == patches


def _big_log(tmp_path: Path, first: int, last: int) -> bytes:
    return log_bytes(first, last, tmp_path)


# -- disk full ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TARGETS)
def test_disk_full_during_apply(tmp_path: Path, mnt: Path, kind: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 100)
    spec = _spec(kind, mnt)
    r = run_cli("apply", "--no-progress", str(log), "--target", spec)
    assert r.returncode == 0, r.stderr
    write_patches(log, 101, 2000, rows=8)
    ballast = fill(mnt) if kind == "file" else None  # a file target writes only at the end
    r = run_cli("apply", "--no-progress", str(log), "--target", spec)
    assert r.returncode == 1, r.stdout
    line = one_error_line(r.stderr)
    assert any(m in line for m in FULL_MESSAGES), line
    assert_last_committed(kind, spec, log)
    # Free space, rerun: everything exactly once.
    if ballast is not None:
        ballast.unlink()
    remount(mnt, "size=256m")
    r = run_cli("apply", "--no-progress", str(log), "--target", spec)
    assert r.returncode == 0, r.stderr
    assert_exactly_once(spec, log, 2000)


@pytest.mark.parametrize("kind", TARGETS)
def test_disk_full_during_tail(tmp_path: Path, mnt: Path, kind: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 100)
    spec = _spec(kind, mnt)
    d = start_tail(str(log), "--target", spec)
    try:
        _wait_applied(spec, log, 100)
        ballast = fill(mnt)
        rest = _big_log(tmp_path, 1, 600)
        # Append patches 101..600 of the same log: bytes after patch 100's frame.
        ends = frame_ends(rest)
        with open(log, "ab") as f:
            f.write(rest[ends[99] :])
        # It stops by itself at its next write; only a hang reaches this bound.
        _, err = d.communicate(timeout=600)
    finally:
        if d.poll() is None:
            d.kill()
            d.communicate()
    assert d.returncode == 1, err
    line = one_error_line(err)
    assert any(m in line for m in FULL_MESSAGES), line
    assert_last_committed(kind, spec, log)
    ballast.unlink()
    remount(mnt, "size=256m")
    r = run_cli("tail", str(log), "--target", spec, "--once")
    assert r.returncode == 0, r.stderr
    assert_exactly_once(spec, log, 600)


def _applied(spec: str, log: Path) -> int:
    try:
        _, cp, _ = _look(spec, log)
    except Exception:
        return -1
    return cp.patches if cp is not None else 0


def _wait_applied(spec: str, log: Path, patches: int) -> None:
    """Until the daemon applied ``patches``, for as long as it still applies more."""
    wait_for(
        lambda: _applied(spec, log) == patches,
        120,
        f"the first {patches} patches",
        progress=lambda: _applied(spec, log),
        interval=0.2,
    )


# -- read-only ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TARGETS)
def test_read_only_target_directory_during_apply(tmp_path: Path, mnt: Path, kind: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 50)
    spec = _spec(kind, mnt)
    r = run_cli("apply", "--no-progress", str(log), "--target", spec)
    assert r.returncode == 0, r.stderr
    write_patches(log, 51, 120)
    remount(mnt, "ro")
    try:
        r = run_cli("apply", "--no-progress", str(log), "--target", spec)
        assert r.returncode == 1, r.stdout
        line = one_error_line(r.stderr)
        assert any(m in line for m in READ_ONLY_MESSAGES), line
    finally:
        remount(mnt, "rw")
    # Checked once writable again: SQLite cannot even read a WAL database it cannot lock.
    cp = assert_last_committed(kind, spec, log)
    assert cp is not None and cp.patches == 50
    r = run_cli("apply", "--no-progress", str(log), "--target", spec)
    assert r.returncode == 0, r.stderr
    assert_exactly_once(spec, log, 120)


def test_read_only_target_directory_under_a_live_tail(tmp_path: Path, mnt: Path) -> None:
    # Linux refuses to remount a file system read-only while a process holds a file on
    # it open for writing (EBUSY), so the live case uses the file target (rewritten and
    # renamed at each flush, nothing held open) with the state directory elsewhere.
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 50)
    spec = _spec("file", mnt)
    d = start_tail(str(log), "--target", spec, "--state-dir", str(tmp_path / "state"))
    try:
        _wait_applied(spec, log, 50)
        remount(mnt, "ro")  # waits for the daemon to be through writing the target
        write_patches(log, 51, 120)
        # It stops by itself at its next write; only a hang reaches this bound.
        _, err = d.communicate(timeout=600)
        assert d.returncode == 1, err
        line = one_error_line(err)
        assert any(m in line for m in READ_ONLY_MESSAGES), line
        cp = assert_last_committed("file", spec, log)
        assert cp is not None and cp.patches == 50
    finally:
        if d.poll() is None:
            d.kill()
            d.communicate()
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], capture_output=True)
    r = run_cli("tail", str(log), "--target", spec, "--once", "--state-dir", str(tmp_path / "state"))
    assert r.returncode == 0, r.stderr
    assert_exactly_once(spec, log, 120)


@pytest.mark.parametrize("kind", TARGETS)
def test_tail_started_on_a_read_only_target_directory(tmp_path: Path, mnt: Path, kind: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 50)
    spec = _spec(kind, mnt)
    r = run_cli("tail", str(log), "--target", spec, "--once")
    assert r.returncode == 0, r.stderr
    write_patches(log, 51, 120)
    remount(mnt, "ro")
    try:
        r = run_cli("tail", str(log), "--target", spec, "--once")
        assert r.returncode == 1, r.stderr
        line = one_error_line(r.stderr)
        assert any(m in line for m in READ_ONLY_MESSAGES), line
    finally:
        remount(mnt, "rw")
    cp = assert_last_committed(kind, spec, log)
    assert cp is not None and cp.patches == 50
    r = run_cli("tail", str(log), "--target", spec, "--once")
    assert r.returncode == 0, r.stderr
    assert_exactly_once(spec, log, 120)
