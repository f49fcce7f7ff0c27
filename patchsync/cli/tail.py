"""``patchsync tail PATH...``: the daemon keeping a target in step with growing logs."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from patchsync.cli.common import (
    EXIT_ERROR,
    Subcommands,
    add_base_flag,
    add_chain_flag,
    add_client_flags,
    add_relative_iris_flag,
    add_target_flag,
    check_base,
    close_target,
    fail,
    limits,
    load_base,
    open_target,
    use_client_flags,
)

if TYPE_CHECKING:
    from patchsync.tail import SourceReport, Tailer


def register(sub: Subcommands) -> None:
    from patchsync.sources import FOLLOW, address_forms

    tail = sub.add_parser(
        "tail",
        help="keep a target in step with growing patch logs",
        description="Tail patch sources into a target: .jellyp logs (files, or directories read in file-name order, "
        "waited for until they appear), NATS streams and the topics of patchsync serve. Each unit is applied as soon "
        "as it is complete, with the source's checkpoint; a restart resumes every source from its checkpoint. "
        "SIGTERM/SIGINT finish the current unit and exit 0. Log lines go to stderr.",
    )
    tail.add_argument(
        "paths",
        nargs="+",
        metavar="SOURCE",
        help="a .jellyp log, a directory of them, or an address: " + ", ".join(address_forms(FOLLOW)),
    )
    add_target_flag(tail)
    add_chain_flag(tail)
    add_base_flag(tail)
    tail.add_argument("--poll", action="store_true", help="poll the file system instead of inotify (network mounts)")
    tail.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between polls, and the longest wait without a file event (default 1)",
    )
    tail.add_argument("--once", action="store_true", help="apply what the logs (or streams) hold now and exit 0")
    add_relative_iris_flag(tail)
    tail.add_argument(
        "--keep-going", action="store_true", help="when one log fails, keep tailing the others (exit 1 at the end)"
    )
    tail.add_argument("--reset", action="store_true", help="start a log over when its checkpoint no longer matches it")
    tail.add_argument(
        "--state-dir",
        metavar="DIR",
        help="locks, decoder snapshots and status of the daemon (default: next to a SQLite/file/Oxigraph target, "
        "as TARGET.tail)",
    )
    tail.add_argument(
        "--log-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="at most one progress line per log per S seconds (default 1)",
    )
    tail.add_argument(
        "--retry-max-delay",
        type=float,
        default=30.0,
        metavar="S",
        help="when the target is unavailable (connection lost, server restarting, SQLite locked), wait 0.2 s, "
        "then twice as long per failed attempt, at most S seconds (default 30)",
    )
    tail.add_argument(
        "--retry-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up (exit 1) when the target stays unavailable for S seconds (default 600; 0: never retry)",
    )
    add_client_flags(tail)
    tail.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="serve /$/metrics (Prometheus text: position, lag, units and rows per second, retries, last error), "
        "/$/healthz and /$/ready on HOST:PORT while tailing",
    )
    tail.set_defaults(func=run)


class TailLog:
    """Structured ``key=value`` lines on stderr; progress lines rate-limited per source.

    A progress line held back by the rate limit is kept, and :meth:`flush` prints the last
    one of each source when the run ends, so the final state of every source is always said.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last: dict[str, float] = {}
        self.held: dict[str, str] = {}

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        line = self.line(event, fields)
        if event == "applied" and fields.get("state") == "live":
            now = time.monotonic()
            source = str(fields.get("source"))
            if now - self.last.get(source, -1e9) < self.interval:
                self.held[source] = line
                return
            self.last[source] = now
            self.held.pop(source, None)
        print(line, file=sys.stderr, flush=True)

    def flush(self) -> None:
        """Print the progress lines the rate limit held back, the last of each source."""
        held, self.held = self.held, {}
        for line in held.values():
            print(line, file=sys.stderr, flush=True)

    @staticmethod
    def line(event: str, fields: dict[str, Any]) -> str:
        """One record as a ``key=value`` line."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        parts = [f"ts={stamp}", f"event={event}"]
        for key, value in fields.items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
            if not text or any(c in text for c in ' "='):
                text = json.dumps(text)
            parts.append(f"{key}={text}")
        return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    use_client_flags(args)
    from patchsync.apply.registry import check_target_directory
    from patchsync.sources import resolve_sources
    from patchsync.tail import default_state_dir
    from patchsync.tail.created import CreatedPaths
    from patchsync.tail.options import split_paths

    # Inputs first: a wrong path or base must not leave a new, empty target behind. The
    # daemon waits for a directory that does not exist yet; --once has nothing to wait for.
    split_paths(args.paths, missing_dirs=not args.once)
    for source in resolve_sources(args.paths):
        if source.has("check"):  # a stream that does not exist: refused before a replica is made
            source.check()(source.name)
    listen = None
    if args.metrics_listen:
        from patchsync.tail.metrics import parse_listen

        listen = parse_listen(args.metrics_listen)
    check_base(args)
    check_target_directory(args.target)  # apply's rule, before a state directory would make the directory
    state_dir = Path(args.state_dir) if args.state_dir else default_state_dir(args.target)
    # A run that fails before any source was reached applied nothing: it leaves nothing it made.
    created = CreatedPaths(args.target, state_dir)
    tailers: list[Tailer] = []
    try:
        with _stops_while_starting(tailers):
            reports = _tail(args, state_dir, listen, tailers)
    except BaseException as exc:
        if not any(t.reached for t in tailers):
            created.remove()
        if isinstance(exc, _Stopped):
            return 0
        raise
    failed = [r for r in reports if r.state == "failed"]
    if failed and not any(t.reached for t in tailers):
        created.remove()
    for r in failed:
        fail(r.error or f"{r.source}: failed")
    return EXIT_ERROR if failed else 0


class _Stopped(BaseException):
    """SIGTERM or SIGINT before the tailer existed: the run ends as a stop, having applied nothing."""


def _stops_while_starting(tailers: list[Tailer]) -> contextlib.AbstractContextManager[None]:
    """SIGTERM/SIGINT during start-up (imports, opening the target, loading a base) are a clean
    stop too, as they are once the tailer runs: a supervisor or script that stops a daemon
    soon after starting it, on a loaded machine, must not see it killed (exit 143). Before the
    tailer exists the start-up ends at once; after, the tailer is asked to stop (its own
    handlers take over while it runs)."""
    from patchsync.tail.observer import stop_signals

    def stop(signum: int, frame: object) -> None:
        if not tailers:
            raise _Stopped
        tailers[-1].stop()

    return stop_signals(stop)


def _tail(args: argparse.Namespace, state_dir: Path | None, listen: Any, tailers: list[Tailer]) -> list[SourceReport]:
    """Open the target and tail into it (its :class:`Tailer` added to ``tailers``); the sources' reports."""
    from patchsync.tail import Tailer, TailOptions, open_retrying
    from patchsync.tail.state import claim_state_dir

    if state_dir is not None:
        claim_state_dir(state_dir, args.target)  # before the target: a wrong one is not made
    log = TailLog(args.log_interval)
    retry = {"retry_max_delay": args.retry_max_delay, "retry_timeout": args.retry_timeout}
    target = open_retrying(lambda: open_target(args.target), log=log, **retry)
    tailer = None
    try:
        load_base(target, args, args.paths)
        tailer = Tailer(
            args.paths,
            target,
            TailOptions(
                chain=args.chain,
                reset=args.reset,
                keep_going=args.keep_going,
                state_dir=state_dir,
                poll=args.poll,
                poll_interval=args.poll_interval,
                log=log,
                reopen=lambda: open_target(args.target),
                limits=limits(args),
                **retry,
            ),
        )
        tailers.append(tailer)
        metrics = None
        try:
            if listen is not None:
                from patchsync.tail.metrics import MetricsServer

                metrics = MetricsServer(tailer, *listen).start()
            reports = tailer.run_once() if args.once else tailer.run()
        finally:
            log.flush()
            if metrics is not None:
                metrics.close()
            tailer.close()
        target = tailer.target  # reopened if the first one was lost
        target.close()
    except BaseException:
        if tailer is not None:
            target = tailer.target
        close_target(target, failed=True)
        raise
    return reports
