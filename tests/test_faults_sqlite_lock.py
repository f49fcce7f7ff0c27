"""SQLite locked by another process (a child holding ``BEGIN EXCLUSIVE``).

``patchsync apply`` waits for the busy timeout (``?timeout=SECONDS`` in the URL) and then
fails with one line, applying nothing; it succeeds if the lock goes away in time. The
tail daemon treats the lock as the target being unavailable: it backs off, retries and
completes after the release, exactly once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from .fault_helpers import (
    assert_exactly_once,
    one_error_line,
    patches_applied,
    run_cli,
    sql_checkpoint,
    start_tail,
)
from .process_helpers import read_until, wait_for_value
from .test_tail import write_patches

_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()  # hold the lock until the test closes our stdin
conn.execute("COMMIT")
"""


class Lock:
    """A child process holding an exclusive lock on a SQLite database."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=120)
        assert self.proc.returncode == 0


def _url(db: Path, timeout: float | None = None) -> str:
    return f"sqlite:///{db}" + (f"?timeout={timeout}" if timeout is not None else "")


def test_apply_fails_clearly_after_the_busy_timeout_then_a_rerun_finishes(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    db = tmp_path / "t.db"
    write_patches(log, 1, 30)
    r = run_cli("apply", "--no-progress", str(log), "--target", _url(db))
    assert r.returncode == 0, r.stderr
    write_patches(log, 31, 60)
    lock = Lock(db)
    try:
        started = time.monotonic()
        r = run_cli("apply", "--no-progress", str(log), "--target", _url(db, 0.5))
        elapsed = time.monotonic() - started
    finally:
        lock.release()
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "database is locked" in line and str(db) in line, line
    assert elapsed < 20  # the configured wait, not the 30 s default
    assert sql_checkpoint(_url(db), log).patches == 30  # nothing of the second half
    r = run_cli("apply", "--no-progress", str(log), "--target", _url(db))
    assert r.returncode == 0, r.stderr
    assert_exactly_once(_url(db), log, 60)


def test_apply_succeeds_when_the_lock_is_released_within_the_timeout(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    db = tmp_path / "t.db"
    write_patches(log, 1, 40)
    run_cli("db", "upgrade", _url(db))
    lock = Lock(db)
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchsync", "apply", "--no-progress", str(log), "--target", _url(db, 20)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    assert proc.poll() is None  # waiting for the lock
    lock.release()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert_exactly_once(_url(db), log, 40)


def test_tail_waits_for_a_lock_and_completes_after_release(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    db = tmp_path / "t.db"
    write_patches(log, 1, 20)
    url = _url(db, 0.3)
    d = start_tail(str(log), "--target", url, "--retry-max-delay", "0.5")
    seen = ""
    try:
        wait_for_value(lambda: patches_applied(_url(db), log), 20, "first 20 patches")
        lock = Lock(db)
        try:
            write_patches(log, 21, 50)  # arrives while the database is locked
            # However long a loaded machine takes, the daemon met the lock before its release.
            seen = read_until(d, "event=target_unavailable")
        finally:
            lock.release()
        wait_for_value(lambda: patches_applied(_url(db), log), 50, "the rest after release")
    finally:
        d.terminate()
        _, err = d.communicate(timeout=120)
    err = seen + err
    assert d.returncode == 0, err
    assert "event=target_unavailable" in err and "database is locked" in err, err
    assert "event=reconnected" in err and "Traceback" not in err
    assert_exactly_once(url, log, 50)


def test_tail_started_on_a_locked_database_waits_for_it(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    db = tmp_path / "t.db"
    write_patches(log, 1, 25)
    run_cli("db", "upgrade", _url(db))
    lock = Lock(db)
    try:
        d = subprocess.Popen(
            [sys.executable, "-m", "patchsync", "tail", str(log), "--target", _url(db, 0.2), "--once"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first = read_until(d, "event=target_unavailable")
        time.sleep(0.5)
        assert d.poll() is None  # still waiting, not failed
    finally:
        lock.release()
    _, err = d.communicate(timeout=60)
    assert d.returncode == 0, first + err
    assert "database is locked" in first
    assert_exactly_once(_url(db), log, 25)


def test_tail_gives_up_after_the_retry_timeout(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    db = tmp_path / "t.db"
    write_patches(log, 1, 10)
    run_cli("db", "upgrade", _url(db))
    lock = Lock(db)
    try:
        r = run_cli("tail", str(log), "--target", _url(db, 0.1), "--once", "--retry-timeout", "1.5")
    finally:
        lock.release()
    assert r.returncode == 1
    line = one_error_line(r.stderr)
    assert "database is locked" in line, line
    assert sql_checkpoint(_url(db), log) is None
