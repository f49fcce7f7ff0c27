"""What the daemon holds for every source it follows, whatever its kind.

A *follower* is the daemon's reader of one source (docs/glossary.md): a log file
(:class:`~patchsync.tail.file_follower.FileFollower`), a NATS stream or a served log. Each
holds its host (the daemon, seen through :class:`FollowerHost`), the source's name, its
:class:`SourceReport` and the state directory's per-source lock; a subclass says how it
opens, reads (``pump``), resets and lets go of what it reads from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from patchsync.apply.applier import ApplyResult
from patchsync.apply.target import Target
from patchsync.tail.options import TailOptions
from patchsync.tail.state import lock_source


class FollowerHost(Protocol):
    """What a follower needs from the daemon running it."""

    @property
    def target(self) -> Target: ...

    @property
    def options(self) -> TailOptions: ...

    @property
    def stopping(self) -> bool: ...

    def log(self, event: str, fields: dict[str, Any]) -> None: ...

    def log_once(self, event: str, fields: dict[str, Any]) -> None: ...

    def target_progressed(self) -> None:
        """Units reached the target: the next loss of it starts a new backoff."""


@dataclass
class SourceReport:
    """Where one source stands: applied counts, position and lag."""

    source: str
    state: str = "starting"  # starting, live, finished, failed
    result: ApplyResult = field(default_factory=ApplyResult)
    size: int = 0
    applied_end: int = 0
    lag_bytes: int = 0
    lag_seconds: float = 0.0
    error: str | None = None
    resumed_from: int = 0
    #: Streams only: the last sequence applied whole, and messages after it in the stream.
    applied_seq: int | None = None
    lag_messages: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record logged and written to ``status.json``."""
        r = self.result
        record: dict[str, Any] = {
            "source": self.source,
            "state": self.state,
            "units": r.units,
            "rows": r.rows,
            "patches": r.patches,
            "size": self.size,
            "applied_end": self.applied_end,
            "lag_bytes": self.lag_bytes,
            "lag_seconds": round(self.lag_seconds, 3),
            "error": self.error,
        }
        if self.applied_seq is not None:
            # A stream's position is a sequence: its records say so rather than in bytes.
            del record["size"], record["applied_end"], record["lag_bytes"]
            record["applied_seq"] = self.applied_seq
            record["lag_messages"] = self.lag_messages
        return record


class Follower:
    """What every follower holds alike: its host, source name, report and per-source lock, and
    how it fails and closes.

    A subclass says how it opens, reads (``pump``) and resets, and what
    :meth:`_disconnect` lets go of (a file, a connection); the lock outlives a disconnect,
    so a reconnect to a lost target or server keeps the source's lock.
    """

    def __init__(self, host: FollowerHost, name: str) -> None:
        self.host = host
        self.options = host.options
        self.name = name
        self.report = SourceReport(name, result=ApplyResult(source=name))
        self.finished = False
        self.failed = False
        self.last_saved = 0.0  # when save_resume_point last ran
        self.lock_fd: int | None = None
        #: The source was reached once: a log file opened, a server's first answer (a run
        #: that fails before any source was reached leaves nothing it created, cli/tail.py).
        self.reached = False

    def _lock(self) -> None:
        """Take the per-source lock of the state directory, so two daemons cannot both apply it."""
        state_dir = self.options.state_dir
        if state_dir is None or self.lock_fd is not None:
            return  # held already: a reconnect to the target keeps the source's lock
        self.lock_fd = lock_source(state_dir, self.name)

    def save_resume_point(self, now: float) -> None:
        """Save where decoding can resume (a decoder snapshot); by default there is nothing to save:
        a source whose patches decode on their own resumes from its checkpoint alone."""
        self.last_saved = now

    def fail(self, exc: BaseException) -> None:
        """Stop this source for good with ``exc`` as its error."""
        self.failed = True
        self.report.state = "failed"
        self.report.error = str(exc)
        self.close()

    def _disconnect(self) -> None:
        """Let go of what the source reads from (the lock is kept)."""
        raise NotImplementedError

    def close(self) -> None:
        """Disconnect and release the lock."""
        self._disconnect()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


__all__ = ["Follower", "FollowerHost", "SourceReport"]
