"""Waiting for conditions and stopping daemon processes: shared by the tail, stream and fault
tests (the ``daemons`` fixture that kills what a test left running is in ``conftest.py``)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def wait_for(cond: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Poll ``cond`` until it holds; fail the test naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 60.0) -> tuple[int, str]:
    """Send ``sig`` to a daemon still running and return its exit code and standard error."""
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err
