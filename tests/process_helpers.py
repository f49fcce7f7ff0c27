"""Waiting for conditions and stopping daemon processes: shared by the tail, stream and fault
tests (the ``daemons`` fixture that kills what a test left running is in ``conftest.py``);
``patchsync`` and ``python`` as a reader of the docs has them, and what ``make run`` leaves.

CI runs on a loaded 2-core machine, so a wait must not fail because the machine is slow:
:func:`wait_for` given a ``progress`` measure waits as long as that measure still moves
(patches applied, a log's length), and fails only when it stood still for ``timeout``
seconds, or after ``cap`` seconds in all (only a real hang, or a livelock, gets there).
"""

from __future__ import annotations

import os
import select
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

#: Longest any wait may take, progress or not: only a hang or a livelock reaches it.
CAP = 900.0


def wait_for(
    cond: Callable[[], bool],
    timeout: float = 60.0,
    what: str = "condition",
    *,
    progress: Callable[[], object] | None = None,
    cap: float = CAP,
    interval: float = 0.05,
) -> None:
    """Poll ``cond`` until it holds; fail the test naming ``what`` after ``timeout`` seconds.

    With ``progress``, the ``timeout`` counts from the last change of ``progress()`` instead
    of from the start: the wait goes on while something still advances, up to ``cap``.
    """
    start = time.monotonic()
    deadline = start + timeout
    last = progress() if progress is not None else None
    while True:
        if cond():
            return
        now = time.monotonic()
        if progress is not None:
            current = progress()
            if current != last:
                last, deadline = current, now + timeout
        if now >= deadline or now - start >= cap:
            still = f" (no progress for {timeout:g} s; last {last!r})" if progress is not None else ""
            raise AssertionError(f"timed out waiting for {what}{still}")
        time.sleep(interval)


def wait_for_value(measure: Callable[[], object], goal: object, what: str, timeout: float = 60.0) -> None:
    """Until ``measure()`` equals ``goal`` (patches applied, a head version), for as long as
    it still changes: ``timeout`` seconds without a change fail the test."""
    seen: list[object] = []

    def reached() -> bool:
        seen[:] = [measure()]
        return seen[0] == goal

    wait_for(reached, timeout, f"{what} ({goal!r})", progress=lambda: seen[0] if seen else None, interval=0.1)


def killed_index_rows(script: str, args: list[str], paused: Path, index: Path) -> int:
    """Run ``script`` (an index build that touches ``paused`` once some rows are committed,
    then waits), kill -9 it there, and answer how many rows the killed build committed."""
    import sqlite3

    proc = subprocess.Popen([sys.executable, "-c", script, *args])
    try:
        wait_for(lambda: paused.exists() or proc.poll() is not None, what="index rows")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the index was built before it could be killed"
    with sqlite3.connect(index) as db:
        [(committed,)] = db.execute("SELECT count(*) FROM patches").fetchall()
    assert isinstance(committed, int)
    return committed


def read_until(proc: subprocess.Popen[str], text: str, timeout: float = 300.0) -> str:
    """Read the process's stderr until a line contains ``text``; returns what was read.
    (``timeout`` is for a process that hangs: a slow one still gets there.)"""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return "".join(seen)
    raise AssertionError(f"no line with {text!r} on stderr; got: {''.join(seen)}")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM, timeout: float = 120.0) -> tuple[int, str]:
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
