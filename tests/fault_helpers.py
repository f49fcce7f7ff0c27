"""Shared pieces of the fault suites (``test_faults_*.py``): real processes, real mounts.

Every fault test checks the same two things: while or after a fault, the target holds
exactly the units up to its stored checkpoint (nothing half-applied, nothing lost), and
once the fault is gone a rerun ends equal to the reference with every patch applied
once (the patch history holds each id exactly once).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_stream
from patchsync.apply.targets.sql import SqlTarget
from patchsync.codec.framing import read_varint

from .apply_helpers import state
from .process_helpers import wait_for
from .test_tail import reference

PATCHSYNC = [sys.executable, "-m", "patchsync"]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PATCHSYNC, *args], capture_output=True, text=True, timeout=timeout)


def start_tail(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*PATCHSYNC, "tail", *args, "--poll-interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def one_error_line(stderr: str) -> str:
    """The single ``patchsync:`` error line of a failed command (and no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("patchsync:")]
    assert len(lines) == 1, stderr
    return lines[0]


def frame_ends(data: bytes) -> list[int]:
    """Byte offsets where each complete frame of a delimited log ends (a partial one is left out)."""
    ends, pos = [], 0
    while pos < len(data):
        h = read_varint(data, pos, len(data))
        if h is None or h[1] + h[0] > len(data):
            break
        pos = h[1] + h[0]
        ends.append(pos)
    return ends


def prefix_through_frame(data: bytes, offset: int) -> bytes:
    """The log up to the end of the frame at ``offset`` (where the checkpoints sit here)."""
    h = read_varint(data, offset, len(data))
    assert h is not None
    return data[: h[1] + h[0]]


def committed_reference(log: Path, checkpoint: Any) -> Any:
    """The reference state of the units a checkpoint says were applied (empty without one)."""
    target = MemoryTarget()
    if checkpoint is not None:
        data = prefix_through_frame(log.read_bytes(), checkpoint.offset)
        apply_stream(io.BytesIO(data), target, "jellyp", source="ref")
    return state(target)


def sql_checkpoint(url: str, log: Path) -> Any:
    with SqlTarget(url) as t:
        return {s.source: s.checkpoint for s in t.sources()}.get(str(log.resolve()))


def patches_applied(url: str, log: Path) -> int:
    """The checkpoint's patch count (0 without one, -1 while the database cannot be read)."""
    try:
        cp = sql_checkpoint(url, log)
    except Exception:
        return -1
    return cp.patches if cp is not None else 0


def sql_state(url: str) -> Any:
    with SqlTarget(url) as t:
        return state(t)


def applied_ids(url: str) -> list[str]:
    with SqlTarget(url) as t:
        return [r.patch_id for r in t.history() if r.patch_id is not None]


def assert_exactly_once(url: str, log: Path, patches: int) -> None:
    """The target equals the reference and holds each of the log's ``patches`` ids once."""
    assert sql_state(url) == reference(log)
    ids = applied_ids(url)
    assert len(ids) == len(set(ids)) == patches
    cp = sql_checkpoint(url, log)
    assert cp is not None and cp.patches == patches


# -- tmpfs -------------------------------------------------------------------------------


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` for the block (skips the test if not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    r = _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str, wait: float = 120.0) -> None:
    """Remount ``path`` with ``options``. Linux refuses a read-only remount (EBUSY) while a
    process holds a file there open for writing, as a daemon does while it writes its
    target (a ``file:`` target's lock, held from a unit's start to its flush): that is tried
    again until the write is over, ``wait`` seconds at most."""
    tried: list[subprocess.CompletedProcess[str]] = []

    def done() -> bool:
        tried[:] = [_mount("-o", f"remount,{options}", str(path))]
        return tried[0].returncode == 0 or "busy" not in tried[0].stderr

    wait_for(done, wait, f"{path} to be free to remount {options}", interval=0.05)
    assert tried[0].returncode == 0, tried[0].stderr


def fill(path: Path) -> Path:
    """Take every free byte of the file system holding ``path``; delete the file to free them."""
    ballast = path / "ballast"
    with open(ballast, "wb") as f:
        chunk = b"\0" * (1 << 16)
        with contextlib.suppress(OSError):
            while True:
                f.write(chunk)
                f.flush()
    return ballast
