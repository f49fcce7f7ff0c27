"""The lock of a state directory: one ``spark-replay`` (or ``--follow``) writes it at a time.

The lock is an exclusive ``flock`` on ``STATE/.lock``, whose text is the holder's PID. The
kernel releases a ``flock`` when its process dies however it dies, so a lock file left by a
dead process excludes nobody: the next run takes it over and writes its own PID. The PID is
only there to name the holder in the refusal; it never decides whether the lock is held.

Within one process the lock is counted: the CLI holds it for the whole command (before a JVM
starts, so a refusal is quick) and :func:`~._incremental.replay_into`, called again per
micro-batch by ``--follow``, takes it once more without waiting on itself.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from patchsync.errors import UsageError

#: The lock file inside a state directory.
LOCK = ".lock"

_held: dict[Path, list[int]] = {}  # directory -> [descriptor, holds]
_guard = threading.Lock()


def _refusal(root: Path, fd: int) -> UsageError:
    try:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        holder = "unknown"
    return UsageError(f"{root}: another spark-replay (PID {holder}) is writing this state directory; one run at a time")


def acquire(state: Path) -> None:
    """Take the lock of the state directory ``state`` (created if missing), or refuse at once.

    Raises :class:`~patchsync.errors.UsageError` naming the directory and the holder's PID
    when another process holds it.
    """
    root = state.resolve()
    with _guard:
        if root in _held:
            _held[root][1] += 1
            return
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            refusal = _refusal(root, fd)
            os.close(fd)
            raise refusal from None
        except BaseException:
            os.close(fd)
            raise
        # Ours now (a dead holder's PID, if any, is overwritten).
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[root] = [fd, 1]


def release(state: Path) -> None:
    """Give back one hold of the lock taken by :func:`acquire`; the last one unlocks."""
    root = state.resolve()
    with _guard:
        entry = _held.get(root)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _held[root]
            os.close(entry[0])  # closing the only descriptor releases the flock


@contextmanager
def state_lock(state: Path) -> Iterator[None]:
    """Hold the lock of ``state`` for the ``with`` block (see :func:`acquire`)."""
    acquire(state)
    try:
        yield
    finally:
        release(state)


__all__ = ["LOCK", "acquire", "release", "state_lock"]
