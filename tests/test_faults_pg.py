"""PostgreSQL going away under the tail daemon: connections killed, the server restarted.

The daemon (a real ``patchsync tail`` process) drains a backlog while another connection
kills its backend with ``pg_terminate_backend`` again and again, or while the server is
restarted. The daemon must log the loss, back off, reconnect, resume from the checkpoint
(the open database transaction and its checkpoint were lost together) and end equal to
the reference with every patch applied exactly once. ``patchsync apply`` fails fast with
one line instead, and a rerun finishes.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from patchsync.apply.targets.sql import SqlTarget

from .fault_helpers import (
    assert_exactly_once,
    one_error_line,
    patches_applied,
    run_cli,
    sql_checkpoint,
    start_tail,
)
from .process_helpers import wait_for
from .test_tail import write_patches

# Restarts the PostgreSQL server every other test shares: run alone, after the parallel pass.
pytestmark = [pytest.mark.postgres, pytest.mark.serial]

PATCHES = 1000


def _psycopg_conn(url: str) -> Any:
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return psycopg.connect(host=u.host, port=u.port or 5432, user=u.username, dbname=u.database, autocommit=True)


def _terminate_others(url: str) -> int:
    """Kill every other backend of the test database (the daemon's); how many were killed."""
    with _psycopg_conn(url) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()
    return int(row[0]) if row else 0


_patches = patches_applied


def _waiting_on_a_lock(url: str) -> bool:
    """Whether a backend of the test database waits for a lock (asked on a connection of
    its own: inside a transaction pg_stat_activity keeps showing what it first showed)."""
    with _psycopg_conn(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def _finish(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err


def test_daemon_reconnects_after_its_backend_is_killed_repeatedly(tmp_path: Path, pg_url: str) -> None:
    log = tmp_path / "log.jellyp"
    total = 0

    def more(patches: int) -> None:
        nonlocal total
        write_patches(log, total + 1, total + patches)
        total += patches

    more(PATCHES)
    d = start_tail(str(log), "--target", pg_url, "--retry-max-delay", "0.5", "--state-dir", str(tmp_path / "st"))
    rng = random.Random(5)
    rounds = 0

    def applied() -> int:
        return _patches(pg_url, log)

    try:
        # Each round kills the daemon's connection at a random moment of a drain (mid-unit,
        # mid-commit, or idle once it is through), then appends more so that the connection
        # is needed again, and waits until the whole backlog is applied, which takes a
        # reconnect, before the next round: no kill lands on a reconnect still under way,
        # however slow the machine. Waits follow the patches applied, not the clock.
        for _ in range(4):
            more(PATCHES // 8)
            time.sleep(rng.uniform(0.3, 1.2))
            wait_for(lambda: _terminate_others(pg_url) > 0, 300, "a connection of the daemon to kill", interval=0.1)
            rounds += 1
            more(PATCHES // 8)
            wait_for(lambda: applied() == total, what="the backlog to be applied again", progress=applied, interval=0.2)
    finally:
        if d.poll() is None:
            err = _finish(d)
        else:
            _, err = d.communicate()
    assert d.returncode == 0, err
    # The last round's reconnect may be logged after SIGTERM, which drops the line.
    assert rounds == 4 and err.count("event=reconnected") >= rounds - 1, err
    assert "event=target_unavailable" in err and "Traceback" not in err
    assert_exactly_once(pg_url, log, total)


def test_daemon_survives_a_server_restart(tmp_path: Path, pg_url: str) -> None:
    clusters = sorted(p.name for p in Path("/etc/postgresql").iterdir()) if Path("/etc/postgresql").is_dir() else []
    if not clusters:
        pytest.skip("no pg_ctlcluster-managed PostgreSQL on this machine")
    log = tmp_path / "log.jellyp"
    half = PATCHES // 2
    write_patches(log, 1, half)
    d = start_tail(str(log), "--target", pg_url, "--retry-max-delay", "1")
    try:
        wait_for(lambda: _patches(pg_url, log) > 0, timeout=300, what="first commit")
        restart = subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", clusters[-1], "main", "restart"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert restart.returncode == 0, restart.stderr
        # The rest arrives after the restart, so the daemon needs the server again even if
        # it had drained the first half before the restart began.
        write_patches(log, half + 1, PATCHES)
        wait_for(
            lambda: _patches(pg_url, log) == PATCHES,
            what="the backlog to drain after restart",
            progress=lambda: _patches(pg_url, log),
            interval=0.2,
        )
    finally:
        # Always leave the server running, whatever happened above.
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", clusters[-1], "main", "start"], capture_output=True
        )
        err = _finish(d) if d.poll() is None else d.communicate()[1]
    assert "event=reconnected" in err, err
    assert_exactly_once(pg_url, log, PATCHES)


def test_apply_fails_fast_on_a_dropped_connection_and_a_rerun_finishes(tmp_path: Path, pg_url: str) -> None:
    # The apply must be killed after its first commit and before its last. It commits when
    # a transaction is 2 s old (or holds 200k rows), and applies this log in about 2 s
    # now, so its first commit could be its last. A lock on ps_quads holds its first
    # write back for 2.5 s: that transaction then commits as soon as its write is through,
    # with nearly the whole log still to apply.
    total = 20 * PATCHES
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, total)
    SqlTarget(pg_url).close()  # the schema, so there is a table to lock
    holder = _psycopg_conn(pg_url)
    schema = make_url(pg_url).query["options"].rsplit("=", 1)[-1]  # conftest's -csearch_path=…
    holder.execute("BEGIN")
    holder.execute(f"LOCK TABLE {schema}.ps_quads IN SHARE MODE")
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchsync", "apply", "--no-progress", str(log), "--target", pg_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: _waiting_on_a_lock(pg_url), timeout=60, what="the apply's first write to wait")
        time.sleep(2.5)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    killed = threading.Event()

    def killer() -> None:
        # Kill the apply's backend once it has committed something (mid-run, not at connect).
        while proc.poll() is None and not killed.is_set():
            if _patches(pg_url, log) > 0 and _terminate_others(pg_url):
                killed.set()
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    _, err = proc.communicate(timeout=120)
    t.join()
    assert killed.is_set(), "the apply finished before its connection could be killed"
    assert proc.returncode == 1
    line = one_error_line(err)
    assert str(log.resolve()) in line and "failed" in line, line
    cp = sql_checkpoint(pg_url, log)
    assert cp is not None and 0 < cp.patches < total
    r = run_cli("apply", "--no-progress", str(log), "--target", pg_url)
    assert r.returncode == 0, r.stderr
    assert_exactly_once(pg_url, log, total)
