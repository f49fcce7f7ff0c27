"""The daemon's state directory: per-source lock files, decoder snapshots and ``status.json``.

The state directory belongs to one target. Each source (a log, by its resolved path) has
a lock file, so two daemons cannot both apply it, and a snapshot file, both named by a
hash of the source's name; ``status.json`` records where every source stands for
``patchsync status``.

Whether a daemon runs is told by a lock, not by the PID ``status.json`` records (a PID
outlives ``kill -9`` and may name another process by then): each daemon holds a shared
``flock`` on ``daemon.lock`` for as long as it runs, which the kernel releases however the
process ends, and :func:`daemon_running` asks whether anyone holds it. A daemon that stops
cleanly also writes its last ``status.json`` without a PID.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from patchsync.apply.registry import target_path
from patchsync.apply.target import Checkpoint
from patchsync.codec.framing import read_varint
from patchsync.errors import ApplyError, UsageError

STATUS_FILE = "status.json"
#: Names the target a state directory belongs to (its first daemon writes it).
TARGET_FILE = "target"
#: Held (shared) by every daemon using the state directory while it runs.
DAEMON_LOCK = "daemon.lock"


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def resume_point_path(state_dir: Path, source: str) -> Path:
    """Where the decoder snapshot of ``source`` is kept."""
    return state_dir / f"{_key(source)}.snapshot"


def lock_source(state_dir: Path, source: str) -> int:
    """Take the lock of ``source`` in ``state_dir``; its file descriptor (close it to release).

    Raises :class:`ApplyError` if another daemon holds it or the lock file cannot be made.
    """
    path = state_dir / f"{_key(source)}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ApplyError(f"{source}: cannot create the lock file {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ApplyError(f"{source}: another tail daemon is applying this log to the target") from None
    return fd


def hold_daemon_lock(state_dir: Path) -> int | None:
    """Hold the state directory's daemon lock while this daemon runs; the descriptor to close
    when it stops (``None`` when the lock file cannot be made: status then says not running)."""
    try:
        fd = os.open(state_dir / DAEMON_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    # Shared, so daemons of other sources may share the directory; waits only while a
    # daemon_running probe holds it, for a moment.
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def daemon_running(state_dir: str | os.PathLike[str]) -> bool:
    """Whether a daemon using ``state_dir`` runs now: one holds its daemon lock."""
    try:
        fd = os.open(Path(state_dir) / DAEMON_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # the probe's own lock, if it got one, goes with it
    return False


def write_status(state_dir: Path, sources: Iterable[dict[str, Any]], *, running: bool = True) -> None:
    """Replace ``status.json`` atomically with the records of ``sources``, with this process's
    PID while it runs (``running=False``: its last write, without one); raises ``OSError``."""
    data = {"updated_at": time.time(), "pid": os.getpid() if running else None, "sources": list(sources)}
    tmp = state_dir / (STATUS_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, state_dir / STATUS_FILE)


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The per-source records of the last daemon that used ``state_dir`` (empty if none),
    each with ``running`` (:func:`daemon_running`) and the daemon's ``pid`` while it runs."""
    try:
        data = json.loads((Path(state_dir) / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    running = daemon_running(state_dir)
    out: dict[str, dict[str, Any]] = {}
    for rec in data.get("sources", []) if isinstance(data, dict) else []:
        if isinstance(rec, dict) and "source" in rec:
            rec["running"] = running
            rec["pid"] = data.get("pid") if running else None
            rec["updated_at"] = data.get("updated_at")
            out[str(rec["source"])] = rec
    return out


def target_identity(target_spec: str) -> str:
    """What names a target in its state directory: its local path, resolved, or its address
    without credentials and options (a password is never written, and ``?timeout=`` or a
    changed option does not make it another target)."""
    where = target_path(target_spec)
    if where is not None:
        return str(where.resolve())
    scheme, _, rest = target_spec.partition("://")
    if not rest:
        return target_spec.partition("?")[0]
    authority, slash, path = rest.partition("/")
    host = authority.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path.partition('?')[0]}"


def claim_state_dir(state_dir: Path, target_spec: str) -> None:
    """Make ``state_dir`` the state directory of the target ``target_spec``, or refuse it
    (:class:`UsageError`) when it belongs to another target: its checkpoints are in that
    target, and its decoder snapshots and locks are of that target's sources."""
    identity = target_identity(target_spec)
    path = state_dir / TARGET_FILE
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        owner = path.read_text().strip()
    except FileNotFoundError:
        owner = ""
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the state directory's target: {exc.strerror or exc}") from None
    if owner and owner != identity:
        raise UsageError(
            f"{state_dir}: this state directory belongs to the target {owner}, not {identity}: "
            "give each target a --state-dir of its own"
        )
    if not owner:
        tmp = state_dir / (TARGET_FILE + ".tmp")
        try:
            tmp.write_text(identity + "\n")
            os.replace(tmp, path)
        except OSError as exc:
            raise UsageError(f"{path}: cannot record the state directory's target: {exc.strerror or exc}") from None


def default_state_dir(target_spec: str) -> Path | None:
    """Where the daemon keeps locks, snapshots and status for a target named on the CLI.

    Next to the store for SQLite (``DB.tail``), file and Oxigraph targets; ``None``
    (no snapshots, status or lock files) for other targets unless given explicitly.
    """
    try:
        where = target_path(target_spec)
    except UsageError:
        return None  # opening the target reports what is wrong with the spec
    return None if where is None else Path(f"{where}.tail")


def lag_bytes(path: str | os.PathLike[str], checkpoint: Checkpoint) -> int | None:
    """Bytes of ``path`` after the frame holding the checkpoint (``None`` if unreadable).

    Rows of that frame after the checkpoint are not counted: the frame is the unit of
    reading, and a frame's rows are applied together unless a transaction spans frames.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = os.pread(f.fileno(), 10, checkpoint.offset)
    except OSError:
        return None
    try:
        parsed = read_varint(header, 0, len(header))
    except ValueError:
        parsed = None
    end = checkpoint.offset + (parsed[1] + parsed[0] if parsed is not None else 0)
    return max(0, size - end)


__all__ = [
    "DAEMON_LOCK",
    "claim_state_dir",
    "daemon_running",
    "default_state_dir",
    "hold_daemon_lock",
    "lag_bytes",
    "lock_source",
    "read_status",
    "resume_point_path",
    "target_identity",
    "write_status",
]
