"""The daemon's backoff policy and which errors count as "target unavailable"."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import ApplyError, CheckpointError, TargetUnavailable, UsageError
from patchsync.tail import Backoff, is_transient


def test_delays_double_with_jitter_up_to_the_cap_then_give_up() -> None:
    b = Backoff(initial=0.2, max_delay=3.0, timeout=60.0, rng=random.Random(1))
    delays = [b.next_delay(0.0) for _ in range(8)]
    caps = [0.2, 0.4, 0.8, 1.6, 3.0, 3.0, 3.0, 3.0]
    for d, cap in zip(delays, caps, strict=True):
        assert d is not None and cap * 0.5 <= d <= cap
    assert b.next_delay(59.0) is not None and b.next_delay(59.0) <= 1.0  # never past the timeout
    assert b.next_delay(60.0) is None
    b.reset()
    first = b.next_delay(100.0)
    assert first is not None and first <= 0.2  # a new outage starts over


def test_zero_timeout_never_retries() -> None:
    assert Backoff(timeout=0).next_delay(0.0) is None


def test_bad_settings_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        Backoff(initial=1.0, max_delay=0.5)


def test_transient_means_target_unavailable_somewhere_in_the_causes() -> None:
    assert not is_transient(ApplyError("disk full"))
    assert not is_transient(CheckpointError("replaced"))
    try:
        raise ApplyError("wrapped by the applier") from TargetUnavailable("connection lost")
    except ApplyError as exc:
        assert is_transient(exc)
    try:
        try:
            raise TargetUnavailable("server restarting")
        except TargetUnavailable:
            raise ApplyError("rolled back")  # noqa: B904 - the implicit context is the point
    except ApplyError as exc:
        assert is_transient(exc)
    # A driver's error is the backend's to translate: the daemon never guesses from its type.
    raw = ApplyError("cannot open")
    raw.__cause__ = sqlite3.OperationalError("database is locked")
    assert not is_transient(raw)
    looped = ApplyError("a")
    looped.__cause__ = ApplyError("b")
    looped.__cause__.__cause__ = looped
    assert not is_transient(looped)  # a cycle of causes ends


def test_a_locked_sqlite_database_is_transient(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't.db'}?timeout=0.1"
    SqlTarget(url).close()
    holder = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ApplyError) as locked:
            SqlTarget(url)
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert "database is locked" in str(locked.value)
    assert is_transient(locked.value)
