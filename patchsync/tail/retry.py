"""Waiting out a target or a source that is unavailable for now: backoff (which errors say
so is :func:`patchsync.errors.is_transient`, re-exported here; which of the two was lost,
:func:`lost_part`)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from patchsync.apply.target import Target
from patchsync.errors import PatchsyncError, UsageError, causes, is_transient
from patchsync.remote.errors import StreamUnavailable
from patchsync.tail.options import RETRY_INITIAL_SECONDS, RETRY_MAX_DELAY, RETRY_TIMEOUT, Log, no_log


class Backoff:
    """Exponential backoff with jitter, bounded per wait (``max_delay``) and in total (``timeout``).

    The clock starts at the first :meth:`next_delay` after a :meth:`reset`, so a target
    that keeps failing right after each reopen still reaches the timeout. With
    ``keep_clock`` (``tail --once``) :meth:`reset` does not restart it: the run gives up
    ``timeout`` seconds after its first failure however often the target came back between.
    """

    def __init__(
        self,
        *,
        initial: float = RETRY_INITIAL_SECONDS,
        max_delay: float = RETRY_MAX_DELAY,
        timeout: float = RETRY_TIMEOUT,
        rng: random.Random | None = None,
        keep_clock: bool = False,
    ) -> None:
        if initial <= 0 or max_delay < initial or timeout < 0:
            raise UsageError("retry delays must be positive, the longest at least the first, the timeout >= 0")
        self.initial = initial
        self.max_delay = max_delay
        self.timeout = timeout
        self.rng = rng or random.Random()
        self.keep_clock = keep_clock
        self.attempt = 0
        self.since: float | None = None

    def reset(self) -> None:
        """The target works again."""
        self.attempt = 0
        if not self.keep_clock:
            self.since = None

    def elapsed(self, now: float) -> float:
        """Seconds since the first failure of the current outage (0 if none)."""
        return 0.0 if self.since is None else now - self.since

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: give up."""
        if self.since is None:
            self.since = now
        left = self.timeout - (now - self.since)
        if left <= 0:
            return None
        self.attempt += 1
        # Full doubling up to the cap, then a random half of it off, so daemons that lost
        # the same server do not all come back in the same instant.
        cap = min(self.max_delay, self.initial * 2.0 ** min(self.attempt - 1, 60))
        return min(left, cap * self.rng.uniform(0.5, 1.0))


def lost_part(exc: BaseException) -> str:
    """What a transient error (:func:`is_transient`) lost: ``"source"`` when the server a
    source reads from is out of reach (a stream's, a served log's), else ``"target"``."""
    return "source" if any(isinstance(current, StreamUnavailable) for current in causes(exc)) else "target"


def open_retrying(
    opener: Callable[[], Target],
    *,
    retry_max_delay: float = RETRY_MAX_DELAY,
    retry_timeout: float = RETRY_TIMEOUT,
    log: Log | None = None,
) -> Target:
    """``opener()``, retried with backoff while it fails with a transient error (a locked or
    restarting database at the daemon's start)."""
    backoff = Backoff(max_delay=retry_max_delay, timeout=retry_timeout)
    while True:
        try:
            return opener()
        except PatchsyncError as exc:
            if not is_transient(exc):
                raise
            delay = backoff.next_delay(time.monotonic())
            if delay is None:
                raise
            (log or no_log)(
                "target_unavailable", {"error": str(exc), "attempt": backoff.attempt, "retry_in": round(delay, 3)}
            )
            time.sleep(delay)


__all__ = ["Backoff", "is_transient", "lost_part", "open_retrying"]
