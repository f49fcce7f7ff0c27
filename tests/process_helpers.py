"""Waiting for conditions and stopping daemon processes: shared by the tail, stream and fault
tests (the ``daemons`` fixture that kills what a test left running is in ``conftest.py``);
``patchsync`` and ``python`` as a reader of the docs has them, and what ``make run`` leaves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A program, not a shell function: a function would put a subshell between `$!` and the
# daemon a walkthrough stops with `kill`.
WRAPPER = '#!/bin/sh\nexec "{python}" {args} "$@"\n'


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


def programs(folder: Path) -> dict[str, str]:
    """The environment of a reader in ``folder``: ``patchsync`` and ``python`` on PATH are this
    checkout's (wrappers in ``folder/.bin``)."""
    bin_dir = folder / ".bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        for name, args in (("patchsync", "-m patchsync"), ("python", "")):
            (bin_dir / name).write_text(WRAPPER.format(python=sys.executable, args=args))
            (bin_dir / name).chmod(0o755)
    return {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def make_run(folder: Path) -> None:
    """What ``make run`` leaves in ``folder`` (with ``examples/`` there): its recipe itself, run
    by make with this checkout's ``patchsync`` and ``python`` (the set-up of .venv left out)."""
    env = programs(folder)
    done = subprocess.run(
        ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-o", ".venv/.native", "run",
         f"BIN={folder / '.bin'}"],
        cwd=folder, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and "replica equals the log" in done.stdout, done.stdout + done.stderr


def produce(log: Path, *args: str) -> str:
    """Run ``examples/producer.py LOG ARGS`` (``--count N --rate R --rotate K``) as a reader of
    the README would; the last patch id it prints."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "producer.py"), str(log), *args],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip()
