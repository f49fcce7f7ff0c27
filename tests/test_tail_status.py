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

from .nats_helpers import free_port
from .process_helpers import produce, read_until, stop, wait_for


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


def test_a_state_directory_belongs_to_one_target(tmp_path: Path) -> None:
    # A state directory's snapshots, locks and status are of one target's sources: a daemon
    # of another target given it is refused in one line, before that target is made.
    folder = logs(tmp_path)
    state = tmp_path / "state"
    first = f"sqlite:///{tmp_path / 'a.db'}"
    patchsync("tail", str(folder), "--target", first, "--state-dir", str(state), "--once")
    assert (state / "target").read_text().strip() == str((tmp_path / "a.db").resolve())
    other = tmp_path / "b.db"
    argv = ["tail", str(folder), "--target", f"sqlite:///{other}", "--state-dir", str(state), "--once"]
    refused = subprocess.run(
        [sys.executable, "-m", "patchsync", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"{state}: this state directory belongs to the target {(tmp_path / 'a.db').resolve()}" in line
    assert not other.exists()
    # The same target named with another option is the same target.
    again = patchsync("tail", str(folder), "--target", first + "?timeout=5", "--state-dir", str(state), "--once")
    assert again.returncode == 0


def test_a_server_target_is_named_without_its_credentials() -> None:
    from patchsync.tail.state import target_identity

    spec = "postgresql+psycopg://app:s3cret@127.0.0.1:5432/replica?connect_timeout=3"
    assert target_identity(spec) == "postgresql+psycopg://127.0.0.1:5432/replica"


def test_a_daemon_stopped_while_it_starts_stops_cleanly(tmp_path: Path, daemons: list[Any]) -> None:
    # SIGTERM before the tailer took the signals over (here: while the target is retried) is
    # a clean stop too. A script that stops a daemon soon after starting it (make run, the
    # operator's pair in getting-started.md) saw it killed, exit 143, on a loaded machine.
    (tmp_path / "logs").mkdir()
    target = f"postgresql://127.0.0.1:{free_port()}/nothing"  # nothing listens: it retries
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "patchsync",
            "tail",
            str(tmp_path / "logs"),
            "--target",
            target,
            "--retry-timeout",
            "600",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    daemons.append(daemon)
    read_until(daemon, "event=target_unavailable")
    code, err = stop(daemon)
    assert code == 0, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]  # it made nothing
