"""What a ``tail`` run creates, so that a run failing before any source was reached leaves none of it.

A run that never reached its source (a server out of reach, the wrong door, a stream that is
not there) applied nothing; the empty target, its lock file and its state directory it made on
the way would only be left for the user to find and delete. :class:`CreatedPaths` notes, before
the run, which of them do not exist yet, and :meth:`CreatedPaths.remove` removes those the run
made: the target's local path with the files named after it beside it (``DB-sources.lock``,
``DB-wal``, ``DB.tail``, ``F.nq.lock``, ``F.nq.patchsync.json``) when the target is new, and a
new state directory. Nothing that existed before the run is ever removed, nor a state directory
another daemon has started using meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from patchsync.apply.registry import target_path
from patchsync.errors import UsageError
from patchsync.tail.state import daemon_running

#: What follows a target's name in the names of the files kept beside it.
_SEPARATORS = ("-", ".")


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _outermost_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its ancestors that does not exist (``None``: ``path`` exists)."""
    if _exists(path):
        return None
    missing = path.absolute()
    while missing.parent != missing and not _exists(missing.parent):
        missing = missing.parent
    return missing


def _beside(path: Path) -> set[str]:
    """The names in ``path``'s directory that are ``path``'s own or that of a file kept beside it."""
    try:
        names = os.listdir(path.parent)
    except OSError:
        return set()
    return {n for n in names if n == path.name or any(n.startswith(path.name + sep) for sep in _SEPARATORS)}


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


class CreatedPaths:
    """The target (``target_spec``) and state directory paths that do not exist before a run."""

    def __init__(self, target_spec: str, state_dir: Path | None) -> None:
        try:
            where = target_path(target_spec)
        except UsageError:
            where = None  # opening the target says what is wrong with the spec
        #: A new target's path and the names beside it before the run.
        self._target = (where, _beside(where)) if where is not None and not _exists(where) else None
        #: The outermost new directory of the state directory's path, and that path.
        self._state_dir = _outermost_missing(state_dir) if state_dir is not None else None
        self._state_path = state_dir

    def remove(self) -> None:
        """Remove what the run made of them (call once the target is closed and the daemon's lock released)."""
        state_dir = self._state_path.absolute() if self._state_path is not None else None
        if self._state_dir is not None and state_dir is not None and not daemon_running(state_dir):
            _remove(self._state_dir)  # unless another daemon took it up meanwhile: then it is theirs
        if self._target is not None:
            where, before = self._target
            for name in sorted(_beside(where) - before):
                if (where.parent / name).absolute() != state_dir:  # the state directory: decided above
                    _remove(where.parent / name)


__all__ = ["CreatedPaths"]
