"""Waiting for conditions and stopping daemon processes: shared by the tail, stream and fault
tests (the ``daemons`` fixture that kills what a test left running is in ``conftest.py``)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Hashable


def wait_for(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``cond`` until it holds; fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_progressing(
    cond: Callable[[], bool],
    progress: Callable[[], Hashable],
    *,
    stall: float = 60.0,
    what: str = "condition",
) -> None:
    """Poll ``cond`` until it holds, for as long as ``progress()`` keeps changing.

    The deadline follows progress, not wall time: it is ``stall`` seconds after ``progress()``
    last returned something new (a log file's size, a row count), so a slow, loaded machine
    waits longer and a stuck one fails. ``cond`` may raise to fail at once (a process that
    exited).
    """
    seen = progress()
    deadline = time.monotonic() + stall
    while not cond():
        now = progress()
        if now != seen:
            seen, deadline = now, time.monotonic() + stall
        elif time.monotonic() > deadline:
            raise AssertionError(f"no progress for {stall:.0f} s waiting for {what}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 60.0) -> tuple[int, str]:
    """Send ``sig`` to a daemon still running and return its exit code and standard error."""
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err
