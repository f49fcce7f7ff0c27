"""The daemon's main loop: :class:`Tailer` runs every source, waits, and survives the target.

See the package docstring (:mod:`patchsync.tail`) for the theory of operation.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.apply.target import Target, discard_target
from patchsync.errors import PatchsyncError, TargetUnavailable, UsageError, param
from patchsync.options import Limits
from patchsync.remote.errors import StreamUnavailable
from patchsync.sources import directory_logs
from patchsync.tail.file_follower import FileFollower
from patchsync.tail.follower import SourceReport
from patchsync.tail.network_follower import NetworkFollower
from patchsync.tail.observer import DirectoryWatch, Waker, stop_signals
from patchsync.tail.options import (
    HOLD_EVENTS,
    RETRY_MAX_DELAY,
    RETRY_TIMEOUT,
    SNAPSHOT_SECONDS,
    Log,
    TailOptions,
    no_log,
    no_segments,
    split_paths,
    unfollowed_files,
)
from patchsync.tail.retry import Backoff, is_transient, lost_part
from patchsync.tail.state import hold_daemon_lock, write_status

#: Seconds between rewrites of the state directory's status.json while running.
STATUS_SECONDS = 1.0


class _TargetLost(Exception):
    """Internal: the target, or a source's server, became unavailable during a pass (unwinds
    to the main loop, which discards the target and reconnects everything)."""

    def __init__(self, error: PatchsyncError) -> None:
        super().__init__(str(error))
        self.error = error


class Tailer:
    """Tails ``.jellyp`` logs (files or directories of them) and streams into ``target`` (see :mod:`patchsync.tail`).

    ``paths`` are log files, directories or remote log addresses (``nats://HOST:PORT/STREAM``,
    ``grpc://``, ``http(s)://``: :mod:`patchsync.tail.network_follower`); ``options`` say how (:class:`TailOptions`).
    With ``options.reopen``, a target, or a source's server, that becomes unavailable
    (:func:`is_transient`) is waited out: the target is discarded and reopened after a
    backoff, and every source reconnects and resumes from the reopened target's
    checkpoint; after ``options.retry_timeout`` seconds without success
    :class:`TargetUnavailable` is raised. Without it such errors stop the daemon. A
    one-shot run (:meth:`run_once`) waits out the target but not a source: a source out of
    reach fails (the next run resumes from its checkpoint).
    """

    def __init__(
        self, paths: Sequence[str | os.PathLike[str]], target: Target, options: TailOptions | None = None
    ) -> None:
        if not paths:
            raise UsageError("tail needs at least one log file or directory")
        self.streams, self.paths = split_paths(paths)
        self.options = options = options if options is not None else TailOptions()
        self.target = target
        self._daemon_lock: int | None = None
        if options.state_dir is not None:
            options.state_dir.mkdir(parents=True, exist_ok=True)
            self._daemon_lock = hold_daemon_lock(options.state_dir)
        self.stopping = False
        #: A one-shot run (:meth:`run_once`): a source out of reach is not waited for.
        self.once = False
        self.followers: dict[Path | str, FileFollower | NetworkFollower] = {}
        self._order: list[FileFollower | NetworkFollower] = []
        #: Seconds a stream source's fetch may wait for new messages (0 with ``run_once``).
        self.stream_wait = 0.0
        self._waker = Waker()
        dirs = (str(p if p.is_dir() else p.parent) for p in self.paths)
        self._watch = DirectoryWatch(dirs, self.wake, poll=options.poll, interval=options.poll_interval)
        self._status_at = -1e9
        self._backoff = Backoff(max_delay=options.retry_max_delay, timeout=options.retry_timeout)
        self._logged: set[tuple[str, str]] = set()
        self.reconnects = 0
        #: Attempts to reconnect after losing the target or a source, and which of the two
        #: is being reconnected now (``"target"``, ``"source"``, ``None``: neither), for metrics.
        self.retries = 0
        self.reconnecting: str | None = None
        #: The backoff attempt that reopened the target, until a pass confirms the sources
        #: reconnected too (a stream's server may still be out of reach).
        self._reopened_at: int | None = None

    # -- what followers see (FollowerHost) -----------------------------------------------

    def log(self, event: str, fields: dict[str, Any]) -> None:
        """Emit a structured log record through ``options.log``."""
        self.options.log(event, fields)

    def log_once(self, event: str, fields: dict[str, Any]) -> None:
        """Log ``event`` only the first time for its source (for repeating, harmless failures)."""
        key = (event, str(fields.get("source", "")))
        if key not in self._logged:
            self._logged.add(key)
            self.log(event, fields)

    def target_progressed(self) -> None:
        """Units reached the target: a later loss of it starts a new backoff."""
        self._backoff.reset()

    # -- control -----------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the daemon to stop after the current pass (safe from a signal handler)."""
        self.stopping = True
        self.wake()

    def wake(self) -> None:
        """Wake the main loop (from the observer thread or a signal handler)."""
        self._waker.wake()

    # -- discovery ---------------------------------------------------------------------

    def _discover(self) -> None:
        """Find the log files; in a directory, every file before the newest is finished."""
        for p in self.paths:
            if p.is_dir():
                self._watch.add(str(p))  # watched from now on if it appeared after the start
                files = directory_logs(p)
                if not files and (others := unfollowed_files(p, files)):
                    # Waited for still (a segment may come), but not silently.
                    self.log_once("no_segments", {"source": str(p), "reason": no_segments(p, others)})
                for i, f in enumerate(files):
                    src = self._follow_file(f)
                    if i < len(files) - 1:
                        src.finished = True
            elif formats.by_suffix(p) is not None:
                self._follow_file(p)  # a log file (split_paths let only .jellyp ones through)
            else:
                # A directory that does not exist yet (a fresh volume): looked for every pass.
                self.log_once("waiting", {"source": str(p), "reason": "no such directory yet; tailed once it appears"})
        for url in self.streams:
            if url not in self.followers:
                stream = self.followers[url] = NetworkFollower(self, url)
                self._order.append(stream)

    def _follow_file(self, path: Path) -> FileFollower:
        src = self.followers.get(path)
        if not isinstance(src, FileFollower):
            src = FileFollower(self, path)
            self.followers[path] = src
            self._order.append(src)
        return src

    # -- running -----------------------------------------------------------------------

    def run_once(self) -> list[SourceReport]:
        """Apply what the logs hold now and return (the ``--once`` mode); raises on a failed source."""
        self.stream_wait = 0.0
        self.once = True
        self._backoff.keep_clock = True  # a one-shot run gives up retry_timeout after its first failure
        with self._signals():
            while not self.stopping:
                if self._step(time.monotonic()):
                    continue
                try:
                    self._finish()
                    return self.reports()
                except _TargetLost as lost:
                    self._reconnect(lost.error)
            self._finish_on_stop()
        return self.reports()

    def _signals(self) -> contextlib.AbstractContextManager[None]:
        """SIGTERM/SIGINT ask for a stop instead of killing the process mid-unit."""
        return stop_signals(lambda _s, _f: self.stop())

    def run(self, *, install_signals: bool = True) -> list[SourceReport]:
        """Tail until stopped (SIGTERM/SIGINT or :meth:`stop`), then flush and return."""
        with self._signals() if install_signals else contextlib.nullcontext():
            self._loop()
        for src in self._order:
            self.log("summary", src.report.as_dict())
        self.log("stop", {"sources": len(self._order)})
        return self.reports()

    def _loop(self) -> None:
        # Streams wake nothing: their fetch waits for new messages instead (returning as
        # soon as one arrives). With files too, a short wait keeps the files' turn coming.
        only_streams = not self.paths
        interval = self.options.poll_interval
        self.stream_wait = interval / len(self.streams) if only_streams else min(interval, 0.05)
        try:
            if self.paths:
                self._watch.start()
            paths = [str(p) for p in self.paths] + self.streams
            self.log("start", {"paths": paths, "observer": self._watch.kind})
            while not self.stopping:
                if self._step(time.monotonic()):
                    continue  # a backlog (or a reopened target): read on without waiting
                if self.stopping:
                    break
                if not only_streams or all(src.failed for src in self._order):
                    self._waker.wait(interval)
            self._finish_on_stop()
        finally:
            self._watch.stop()
            self.close()

    def _step(self, now: float) -> bool:
        """One pass; after losing the target, reconnect and ask for another pass at once."""
        try:
            more = self._pass(now)
        except _TargetLost as lost:
            self._reconnect(lost.error)
            return True
        if self._reopened_at is not None and not self.stopping:
            self.reconnects += 1
            self.log("reconnected", {"attempt": self._reopened_at, "reconnects": self.reconnects})
        self._reopened_at = None
        self._backoff.reset()  # a whole pass worked: the next loss starts a new backoff
        return more

    def _pass(self, now: float) -> bool:
        """Pump every source once; returns whether one of them has bytes left to read."""
        self._discover()
        more = False
        for src in list(self._order):
            if self.stopping:
                break
            try:
                more |= src.pump(now)
                if now - src.last_saved >= self.options.snapshot_seconds:
                    src.save_resume_point(now)
            except PatchsyncError as exc:
                error = self._failure(exc)
                if error is None:
                    raise _TargetLost(exc) from exc
                src.fail(error)
                # A source out of reach that a one-shot run does not wait for is named as
                # the daemon names one it waits for.
                self.log("failed" if error is exc else "source_unavailable", src.report.as_dict())
                self._write_status(now)
                if not self.options.keep_going:
                    if error is exc:
                        raise
                    raise error from exc
        if now - self._status_at >= STATUS_SECONDS:
            self._write_status(now)
        return more

    def _failure(self, exc: PatchsyncError) -> PatchsyncError | None:
        """The error a source fails with for ``exc``, or ``None`` when it is waited out."""
        if self.once and is_transient(exc) and lost_part(exc) == "source":
            # A cron job must not hang on a server that is down: publish does not wait either.
            return StreamUnavailable(
                f"{exc}; a one-shot run ({param('once', True)}) does not wait for a source out of reach "
                "(the next run resumes from the checkpoint)"
            ).naming(("once", True))
        if self.options.reopen is not None and is_transient(exc):
            return None
        return exc

    def _finish(self) -> None:
        now = time.monotonic()
        for src in self._order:
            if src.applier is not None and not src.failed:
                try:
                    src.applier.pause()
                    src.save_resume_point(now)
                except PatchsyncError as exc:
                    if self.options.reopen is not None and is_transient(exc):
                        raise _TargetLost(exc) from exc
                    raise
        self._write_status(now)

    def _finish_on_stop(self) -> None:
        # Stopping with the target out of reach loses nothing: the units of the open
        # database transaction went with it, with their checkpoint, and are applied again
        # on the next start.
        try:
            self._finish()
        except _TargetLost as lost:
            self.log("stop_without_flush", {"error": str(lost.error)})
            self._drop_target()
            self._write_status(time.monotonic())

    # -- losing and reopening the target -----------------------------------------------

    def _drop_target(self) -> None:
        with contextlib.suppress(Exception):
            discard_target(self.target)
        for src in self._order:
            src.reset()

    def _reconnect(self, error: BaseException) -> None:
        """Discard the target, wait with backoff, reopen it; every source then reconnects and resumes.

        The reconnect is logged by the next pass that completes: only then have the
        sources' own connections (a stream's server) come back as well.
        """
        reopen = self.options.reopen
        assert reopen is not None
        self._drop_target()
        try:
            self._reopen(reopen, error)
        finally:
            self.reconnecting = None

    def _reopen(self, reopen: Callable[[], Target], error: BaseException) -> None:
        while True:
            part = self.reconnecting = lost_part(error)
            delay = self._backoff.next_delay(time.monotonic())
            if delay is None:
                raise TargetUnavailable(
                    f"the {part} stayed unavailable for {self._backoff.elapsed(time.monotonic()):.1f}s "
                    f"({param('retry_timeout', self._backoff.timeout)}); giving up. Last error: {error}"
                ).naming(("retry_timeout", self._backoff.timeout)) from error
            self.log(
                f"{part}_unavailable",
                {"error": str(error), "attempt": self._backoff.attempt, "retry_in": round(delay, 3)},
            )
            deadline = time.monotonic() + delay
            while not self.stopping and (left := deadline - time.monotonic()) > 0:
                self._waker.wait(left)  # file events wake it too: wait out the rest
            if self.stopping:
                return
            self.retries += 1
            try:
                self.target = reopen()
            except PatchsyncError as exc:
                if not is_transient(exc):
                    raise
                error = exc
                continue
            self._reopened_at = self._backoff.attempt
            return

    # -- reporting ---------------------------------------------------------------------

    @property
    def reached(self) -> bool:
        """Whether any source was reached once (a log file opened, a server's answer)."""
        return any(src.reached for src in self._order)

    def reports(self) -> list[SourceReport]:
        """The state of every source."""
        return [s.report for s in self._order]

    def _write_status(self, now: float, *, running: bool = True) -> None:
        self._status_at = now
        state_dir = self.options.state_dir
        if state_dir is None:
            return
        try:
            write_status(state_dir, (s.report.as_dict() for s in self._order), running=running)
        except OSError as exc:
            # Status is for `patchsync status`; a full or read-only state directory must
            # not stop the daemon (the target's own errors do, with their own message).
            self.log_once("status_failed", {"error": exc.strerror or str(exc)})

    def close(self) -> None:
        """Release files and locks (the target is the caller's); ``status.json`` is written a
        last time, without a PID: no daemon runs any more."""
        for src in self._order:
            src.close()
        self._waker.close()
        if self._daemon_lock is not None:
            if self._order:  # a daemon that found no source leaves the last one's status be
                self._write_status(time.monotonic(), running=False)
            os.close(self._daemon_lock)
            self._daemon_lock = None

    def __enter__(self) -> Tailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tail(
    paths: Sequence[str | os.PathLike[str]],
    target: Target,
    *,
    once: bool = False,
    chain: str = "strict",
    reset: bool = False,
    keep_going: bool = False,
    state_dir: str | os.PathLike[str] | None = None,
    poll: bool = False,
    poll_interval: float = 1.0,
    limits: Limits | None = None,
    hold_events: int = HOLD_EVENTS,
    snapshot_seconds: float = SNAPSHOT_SECONDS,
    log: Log | None = None,
    reopen: Callable[[], Target] | None = None,
    retry_max_delay: float = RETRY_MAX_DELAY,
    retry_timeout: float = RETRY_TIMEOUT,
) -> list[SourceReport]:
    """Tail logs into ``target`` until stopped (or, with ``once``, apply what is there).

    The other keywords are the fields of :class:`TailOptions`.
    """
    options = TailOptions(
        chain=chain,
        reset=reset,
        keep_going=keep_going,
        state_dir=Path(state_dir) if state_dir is not None else None,
        poll=poll,
        poll_interval=poll_interval,
        limits=limits if limits is not None else Limits(),
        hold_events=hold_events,
        snapshot_seconds=snapshot_seconds,
        log=log if log is not None else no_log,
        reopen=reopen,
        retry_max_delay=retry_max_delay,
        retry_timeout=retry_timeout,
    )
    tailer = Tailer(paths, target, options)
    if once:
        try:
            return tailer.run_once()
        finally:
            tailer.close()
    return tailer.run()


__all__ = ["STATUS_SECONDS", "Tailer", "tail"]
