"""One classification of "retry later" against "no retry can fix it", and ``tail --once`` ends.

A database or role that does not exist, a failed authentication and a host name that does
not resolve fail at once everywhere (``apply`` did, ``tail`` retried them with backoff for
``--retry-timeout``, ten minutes by default); a refused connection is still retried.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.errors import ApplyError, TargetUnavailable, is_transient, permanent_failure
from patchsync.tail import Backoff
from patchsync.tail import is_transient as tail_is_transient

# Generous: before the fix these ran for the whole --retry-timeout (600 s by default).
QUICK = 60


def tail_once(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (cwd / "logs").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", "--once", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=QUICK,
    )


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ('connection failed: FATAL:  database "nosuch" does not exist', False),
        ('connection failed: FATAL:  role "nobody" does not exist', False),
        ('FATAL:  password authentication failed for user "postgres"', False),
        ("failed to resolve host 'nosuchhost.invalid': [Errno -2] Name or service not known", False),
        ("connection failed: Connection refused", True),
        ("the database system is starting up", True),
        ("database is locked", True),
    ],
)
def test_one_classification_for_every_caller(message: str, transient: bool) -> None:
    assert tail_is_transient is is_transient  # the daemon uses the one definition
    assert is_transient(TargetUnavailable(f"db: {message}")) is transient
    # The words may sit in the driver error the target error was raised from.
    try:
        try:
            raise OSError(message)
        except OSError as driver:
            raise TargetUnavailable("db: cannot open the database") from driver
    except TargetUnavailable as wrapped:
        assert is_transient(wrapped) is transient
    assert not is_transient(ApplyError(message))


def test_the_sql_backend_translates_permanent_connection_failures_to_apply_errors() -> None:
    from patchsync.apply.targets.sql import errors as sql_errors

    missing = OSError('connection failed: FATAL:  database "nosuch" does not exist')
    refused = OSError("connection failed: Connection refused")
    assert permanent_failure(missing) is missing and permanent_failure(refused) is None
    assert sql_errors.classify(missing) is ApplyError
    assert not hasattr(sql_errors, "is_transient")


def test_once_gives_up_retry_timeout_after_the_first_failure_however_often_it_recovered() -> None:
    kept = Backoff(timeout=10.0, keep_clock=True)
    assert kept.next_delay(0.0) is not None
    kept.reset()  # a pass worked in between
    assert kept.next_delay(11.0) is None
    fresh = Backoff(timeout=10.0)
    assert fresh.next_delay(0.0) is not None
    fresh.reset()
    assert fresh.next_delay(11.0) is not None  # the daemon starts each outage's clock anew


@pytest.mark.postgres
def test_tail_once_into_a_database_that_does_not_exist_fails_at_once(tmp_path: Path, pg_database: str) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(pg_database).set(database="patchsync_no_such_database").render_as_string(hide_password=False)
    done = tail_once(tmp_path, "logs", "--target", url)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "target_unavailable" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith('database "patchsync_no_such_database" does not exist')


def test_tail_once_from_a_stream_host_that_does_not_resolve_fails_at_once(tmp_path: Path) -> None:
    done = tail_once(tmp_path, "nats://nosuchhost.invalid:4222/patches", "--target", "sqlite:///t.db")
    assert done.returncode != 0
    assert "target_unavailable" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("patchsync: nats://nosuchhost.invalid:4222/patches: cannot connect: ")
    assert "retrying cannot fix this" in last


def test_tail_once_still_retries_a_refused_connection_then_gives_up(tmp_path: Path) -> None:
    done = tail_once(
        tmp_path, "logs", "--target", "postgresql+psycopg://postgres@127.0.0.1:1/x", "--retry-timeout", "1"
    )
    assert done.returncode == 1
    assert "target_unavailable" in done.stderr  # retried: a refused connection may come back
    assert "Connection refused" in done.stderr.strip().splitlines()[-1]
