"""The tail daemon's settings: one frozen, validated :class:`TailOptions`, and its defaults."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.apply.applier import CHAIN_POLICIES
from patchsync.apply.target import Target
from patchsync.errors import UsageError
from patchsync.options import Limits
from patchsync.sources import FOLLOW, LOG_SUFFIX, directory_logs, resolve_sources

#: Events of an unfinished unit held back before they are passed to the applier anyway.
HOLD_EVENTS = 100_000
#: Seconds between snapshots of a source's decoder state.
SNAPSHOT_SECONDS = 5.0
#: First wait before reopening a target that became unavailable; doubled per failed attempt.
RETRY_INITIAL_SECONDS = 0.2
#: Longest single wait between two attempts to reopen the target.
RETRY_MAX_DELAY = 30.0
#: Seconds the target may stay unavailable before the daemon gives up (exit 1).
RETRY_TIMEOUT = 600.0

#: Receives the daemon's structured log records: an event name and its fields.
Log = Callable[[str, dict[str, Any]], None]


def no_log(_event: str, _fields: dict[str, Any]) -> None:
    """A :data:`Log` that drops every record."""


@dataclass(frozen=True, slots=True)
class TailOptions:
    """How a :class:`~patchsync.tail.tailer.Tailer` runs; checked when built.

    ``chain`` is the applier's chain policy (``"strict"`` or ``"ignore"``); ``reset``
    starts a log over when its checkpoint no longer matches it; with ``keep_going`` a
    failed source does not stop the others. ``state_dir`` holds per-source locks, decoder
    snapshots and ``status.json`` (``None``: none of them). ``poll`` uses watchdog's polling
    observer; ``poll_interval`` is also the longest the daemon sleeps without a file event.
    ``limits`` bound the decoders; ``hold_events`` events of an unfinished unit are held
    back before they are passed on anyway; a snapshot is written every
    ``snapshot_seconds``. ``log`` receives structured log records.

    ``reopen`` opens the target anew: with it, a target that becomes unavailable
    (:func:`~patchsync.tail.retry.is_transient`) is discarded and reopened after a backoff
    (exponential from ``RETRY_INITIAL_SECONDS`` up to ``retry_max_delay``, with jitter);
    after ``retry_timeout`` seconds without success the daemon gives up. Without it such
    errors stop the daemon.
    """

    chain: str = "strict"
    reset: bool = False
    keep_going: bool = False
    state_dir: Path | None = None
    poll: bool = False
    poll_interval: float = 1.0
    limits: Limits = field(default_factory=Limits)
    hold_events: int = HOLD_EVENTS
    snapshot_seconds: float = SNAPSHOT_SECONDS
    log: Log = no_log
    reopen: Callable[[], Target] | None = None
    retry_max_delay: float = RETRY_MAX_DELAY
    retry_timeout: float = RETRY_TIMEOUT

    def __post_init__(self) -> None:
        if self.chain not in CHAIN_POLICIES:
            raise UsageError(f"chain is {self.chain!r}; expected one of {', '.join(sorted(CHAIN_POLICIES))}")
        if self.state_dir is not None and not isinstance(self.state_dir, Path):
            # Accept any path-like at run time; the field holds a Path.
            object.__setattr__(self, "state_dir", Path(os.fspath(self.state_dir)))
        if not _positive(self.poll_interval):
            raise UsageError(f"poll_interval must be a positive number of seconds, not {self.poll_interval!r}")
        if type(self.hold_events) is not int or self.hold_events < 1:
            raise UsageError(f"hold_events must be a positive integer, not {self.hold_events!r}")
        if not _positive(self.snapshot_seconds, zero=True):
            raise UsageError(f"snapshot_seconds must be a number of seconds >= 0, not {self.snapshot_seconds!r}")
        if not _positive(self.retry_max_delay) or self.retry_max_delay < RETRY_INITIAL_SECONDS:
            raise UsageError(
                f"retry_max_delay must be at least {RETRY_INITIAL_SECONDS} seconds, not {self.retry_max_delay!r}"
            )
        if not _positive(self.retry_timeout, zero=True):
            raise UsageError(f"retry_timeout must be a number of seconds >= 0, not {self.retry_timeout!r}")
        if not isinstance(self.limits, Limits):
            raise UsageError(f"limits must be a Limits, not {type(self.limits).__name__}")
        if not callable(self.log) or (self.reopen is not None and not callable(self.reopen)):
            raise UsageError("log and reopen must be callables")


def split_paths(paths: Sequence[str | os.PathLike[str]], *, missing_dirs: bool = True) -> tuple[list[str], list[Path]]:
    """The stream addresses and the log paths among ``paths``, each checked: a malformed
    address, or a path that is neither a directory nor a ``.jellyp`` log (which may appear
    later, in a directory that exists), is refused with :class:`UsageError` before anything
    is opened or created. A path that does not exist and has no file suffix is a directory
    that may appear later (a daemon on a fresh volume waits for it); without
    ``missing_dirs`` (``tail --once``, which has nothing to wait for) it is refused too."""
    # An address is no path (Path() would fold its "//"): kept as text.
    sources = [source.require(FOLLOW, "tail") for source in resolve_sources(paths)]
    streams = [source.name for source in sources if not source.is_path]
    for source in sources:
        if not source.is_path:
            source.connect()  # loaded now: a client that is not installed is named before a target exists
    logs = [source.path for source in sources if source.is_path]
    for p in logs:
        if p.is_dir():
            if not missing_dirs and (others := unfollowed_files(p)):
                raise UsageError(no_segments(p, others))  # --once would do nothing, silently
            continue
        known = formats.by_suffix(p)
        if known is not None and known.kind == "rdf":
            raise UsageError(
                f"{p}: {p.suffix} is RDF data (a snapshot or starting state), not a patch log; load it with --base {p}"
            )
        if known is None and missing_dirs and not p.exists():
            continue  # a directory to come: the daemon waits for it
        if known is None and not p.exists():
            raise UsageError(f"{p}: no such directory (tail without --once waits for it to appear)")
        if known is None or known.name != "jellyp":
            raise UsageError(
                f"{p}: neither a directory nor a .jellyp log; tail reads Jelly-Patch logs or directories of them"
            )
        if not p.exists() and not p.parent.is_dir():
            raise UsageError(f"{p}: no such file, and its directory {p.parent} does not exist")
    return streams, logs


def unfollowed_files(directory: Path, segments: Sequence[Path] | None = None) -> list[Path]:
    """The files of ``directory`` that tail does not follow when it holds no ``.jellyp``
    segment (none when it holds one, or nothing but hidden files and directories);
    ``segments``: its segments, when the caller listed them already."""
    try:
        if segments if segments is not None else directory_logs(directory):
            return []
        return sorted(f for f in directory.iterdir() if not f.name.startswith(".") and f.is_file())
    except OSError:
        return []


def no_segments(directory: Path, others: Sequence[Path]) -> str:
    """What is said of a directory holding ``others`` but no segment to follow: it and the files followed."""
    names = ", ".join(f.name for f in others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    hint = ""
    if any(f.name.lower().endswith(".rdfp") for f in others):
        hint = " (patchsync convert LOG.rdfp LOG.jellyp makes one of an RDF Patch log)"
    return (
        f"{directory}: a directory without {LOG_SUFFIX} segments, only {names}; "
        f"tail follows the {LOG_SUFFIX} segments of a directory, in file-name order{hint}"
    )


def _positive(value: object, *, zero: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return False
    return value >= 0 if zero else value > 0


__all__ = [
    "HOLD_EVENTS",
    "RETRY_INITIAL_SECONDS",
    "RETRY_MAX_DELAY",
    "RETRY_TIMEOUT",
    "SNAPSHOT_SECONDS",
    "Log",
    "TailOptions",
    "no_log",
    "no_segments",
    "split_paths",
    "unfollowed_files",
]
