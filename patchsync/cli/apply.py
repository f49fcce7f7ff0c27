"""``patchsync apply LOG...``: apply patch logs to a target, each unit exactly once."""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from patchsync.apply.turns import DEFAULT_WAIT
from patchsync.cli.common import (
    Subcommands,
    add_base_flag,
    add_chain_flag,
    add_client_flags,
    add_relative_iris_flag,
    add_target_flag,
    check_logs,
    close_target,
    limits,
    load_base,
    log_files_of,
    open_target,
    result_line,
    use_client_flags,
)


def register(sub: Subcommands) -> None:
    apply = sub.add_parser(
        "apply",
        help="apply patch logs to a target",
        description="Apply .jellyp/.rdfp patch logs to a target. Each unit (transaction) is applied atomically "
        "with the log's checkpoint, so re-running resumes where the last run stopped and applies nothing twice. "
        "Overlapping runs take turns: one applies a log to a target at a time, the others wait (see --wait), then "
        "apply what is left.",
    )
    apply.add_argument(
        "logs",
        nargs="+",
        metavar="LOG",
        help="patch logs, applied in the order given; a directory stands for its .jellyp segments in file-name "
        "order, as tail reads it",
    )
    add_target_flag(apply)
    add_chain_flag(apply)
    add_base_flag(apply)
    add_client_flags(apply)
    apply.add_argument("--reset", action="store_true", help="start a log over when its checkpoint no longer matches it")
    apply.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help="when another applier is applying a log to the target (an overlapping run), wait for its turn as long "
        f"as that applier makes progress, and give up after SECONDS without any (default {DEFAULT_WAIT:g}; 0: at once); "
        "then apply what is left; an Oxigraph store another process has open (one process per store) is waited "
        "for SECONDS",
    )
    apply.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="log format")
    apply.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    add_relative_iris_flag(apply)
    apply.add_argument(
        "--graph",
        metavar="IRI",
        help="put statements that name no graph (TRIPLES streams, triple rows of .rdfp) in this graph "
        "instead of the default graph",
    )
    apply.set_defaults(func=run)


def _waiting(log: str, wait: float, busy: Exception) -> None:
    print(
        f"{log}: waiting for its turn: {busy}; waiting while it makes progress (--wait {wait:g})",
        file=sys.stderr,
        flush=True,
    )


def _held(target: str, wait: float, held: Exception) -> None:
    print(f"{target}: waiting for its turn: {held}; waiting up to --wait {wait:g} s", file=sys.stderr, flush=True)


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.name = ""
        self.size = 0
        self.start = 0.0

    def begin(self, name: str, size: int) -> None:
        self.name, self.size, self.start = name, size, time.monotonic()

    def __call__(self, result: Any, offset: int) -> None:
        if not self.enabled:
            return
        fraction = min(1.0, offset / self.size) if self.size else 0.0
        width = 24
        bar = "#" * int(fraction * width)
        rate = result.rows / max(time.monotonic() - self.start, 1e-9)
        sys.stderr.write(f"\r{self.name} [{bar:<{width}}] {fraction:4.0%} {result.rows:,} rows {rate:,.0f} rows/s ")
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    from patchsync.apply.api import apply_file, log_source
    from patchsync.apply.applier import ApplyResult
    from patchsync.apply.resume import default_snapshot_dir
    from patchsync.apply.turns import open_in_turn, wait_for_turn

    use_client_flags(args)
    logs = log_files_of(args.logs)
    check_logs(args, logs)
    target = open_in_turn(partial(open_target, args.target), args.wait, waiting=partial(_held, args.target, args.wait))
    total = ApplyResult(source="total")
    progress = Progress(not args.no_progress)
    started = time.monotonic()
    try:
        load_base(target, args, logs)
        for log in logs:
            wait_for_turn(target, log_source(log), args.wait, waiting=partial(_waiting, log, args.wait))
            progress.begin(log, Path(log).stat().st_size)
            try:
                result = apply_file(
                    log,
                    target,
                    fmt=args.from_format,
                    chain=args.chain,
                    reset=args.reset,
                    progress=progress,
                    graph=args.graph,
                    limits=limits(args),
                    snapshot_dir=default_snapshot_dir(),
                )
            finally:
                progress.end()
            total.merge(result)
            print(f"{log}: {result_line(result)}")
        target.close()
    except BaseException:
        close_target(target, failed=True)
        raise
    elapsed = time.monotonic() - started
    rate = total.rows / elapsed if elapsed > 0 else 0.0
    print(f"total: {result_line(total)} in {elapsed:.2f}s ({rate:,.0f} rows/s)")
    return 0
