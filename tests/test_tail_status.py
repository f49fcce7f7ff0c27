"""``patchsync status`` says a tail daemon runs only while one does.

A daemon holds the state directory's daemon lock while it runs (the kernel drops it however
the process ends) and writes its last ``status.json`` without a PID when it stops cleanly; so
after ``--once``, after SIGTERM and after ``kill -9`` status says the daemon is not running.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from .process_helpers import produce, stop, wait_for


def patchsync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args], capture_output=True, text=True, timeout=120, check=True
    )


def logs(folder: Path) -> Path:
    """Two segments of chained patches, as the README's producer writes them."""
    produce(folder / "logs", "--count", "30", "--rate", "0", "--rotate", "20")
    return folder / "logs"


def start_daemon(folder: Path, daemons: list[Any]) -> subprocess.Popen[str]:
    """A tail daemon of ``logs(folder)`` into ``folder/r.db``, once it wrote its first status."""
    daemon = subprocess.Popen(
        [sys.executable, "-m", "patchsync", "tail", str(logs(folder)), "--target", f"sqlite:///{folder / 'r.db'}"],
        stderr=subprocess.PIPE,
        text=True,
    )
    daemons.append(daemon)
    wait_for(lambda: (folder / "r.db.tail" / "status.json").exists(), what="the daemon's first status")
    return daemon


def tail_records(target: str) -> list[dict[str, Any] | None]:
    return [row["tail"] for row in json.loads(patchsync("status", "--json", "--target", target).stdout)["sources"]]


def status_json(target_db: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(f"{target_db}.tail") / "status.json").read_text())
    return data


def test_after_once_no_daemon_runs(tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'r.db'}"
    patchsync("tail", str(logs(tmp_path)), "--target", target, "--once")
    shown = patchsync("status", "--target", target).stdout.splitlines()
    assert len(shown) == 2 and all(line.endswith("; tail not running") for line in shown), shown
    assert all(rec is not None and rec["running"] is False and rec["pid"] is None for rec in tail_records(target))
    assert status_json(tmp_path / "r.db")["pid"] is None


def test_a_daemon_is_live_while_it_runs_and_not_after_sigterm(tmp_path: Path, daemons: list[Any]) -> None:
    target = f"sqlite:///{tmp_path / 'r.db'}"
    daemon = start_daemon(tmp_path, daemons)
    records = tail_records(target)
    assert records and all(rec is not None and rec["running"] and rec["pid"] == daemon.pid for rec in records)
    assert "; tail live" in patchsync("status", "--target", target).stdout
    code, err = stop(daemon)
    assert code == 0, err
    assert status_json(tmp_path / "r.db")["pid"] is None
    shown = patchsync("status", "--target", target).stdout
    assert "tail live" not in shown and shown.count("; tail not running") == 2, shown


def test_after_kill_9_the_dead_pid_is_not_live(tmp_path: Path, daemons: list[Any]) -> None:
    target = f"sqlite:///{tmp_path / 'r.db'}"
    daemon = start_daemon(tmp_path, daemons)
    stop(daemon, signal.SIGKILL)
    assert status_json(tmp_path / "r.db")["pid"] == daemon.pid  # nothing could clear it
    assert all(rec is not None and not rec["running"] and rec["pid"] is None for rec in tail_records(target))
    assert "tail live" not in patchsync("status", "--target", target).stdout
