"""A replica that applied everything stays caught up: opening a log for appending writes
nothing until a patch is written (docs/design.md §6), so a producer with nothing to write
leaves its segments as they are, and ``status`` reports no lag on every kind of target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.logs.patch_logs import LogAppender

from .test_tail import producer, write_patches

ROOT = Path(__file__).resolve().parents[1]


def _produce(logs: Path, count: int) -> None:
    script = str(ROOT / "examples" / "producer.py")
    done = subprocess.run(
        [sys.executable, script, str(logs), "--count", str(count), "--rotate", "10", "--rate", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _files(logs: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(logs.iterdir())}


def test_an_appender_given_nothing_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 3)
    before = log.read_bytes()
    for _ in range(3):
        with LogAppender(log, producer.OPTIONS) as out:
            assert out.head == "urn:patch:3"
    assert log.read_bytes() == before
    new = tmp_path / "new.jellyp"
    LogAppender(new, producer.OPTIONS).close()
    assert new.read_bytes() == b""  # created, but no options row without a patch


def test_a_producer_with_nothing_to_write_touches_no_segment(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _produce(logs, 20)  # two full segments of ten
    before = _files(logs)
    assert list(before) == ["00000001.jellyp", "00000002.jellyp"]
    _produce(logs, 0)  # nothing more to write
    assert _files(logs) == before


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_status_of_a_caught_up_replica_reports_no_lag(tmp_path: Path, kind: str) -> None:
    logs = tmp_path / "logs"
    _produce(logs, 15)
    target = f"sqlite:///{tmp_path / 'replica.db'}" if kind == "sqlite" else f"file:{tmp_path / 'replica.nq'}"
    run = [sys.executable, "-m", "patchsync"]
    files = [str(p) for p in sorted(logs.glob("*.jellyp"))]
    applied = subprocess.run([*run, "apply", *files, "--target", target], capture_output=True, text=True, timeout=120)
    assert applied.returncode == 0, applied.stderr
    _produce(logs, 0)  # nothing to write
    status = subprocess.run([*run, "status", "--target", target, "--json"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)["sources"]
    assert [r["lag_bytes"] for r in rows] == [0, 0]
    assert sum(r["patches"] for r in rows) == 15
    text = subprocess.run([*run, "status", "--target", target], capture_output=True, text=True, timeout=120)
    assert text.stdout.count("; 0 bytes behind") == 2, text.stdout
