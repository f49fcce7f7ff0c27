"""``patchsync spark-replay LOG... --out STATE``: replay logs on Spark, incrementally."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.cli.common import Subcommands
from patchsync.errors import PatchsyncError, UsageError


def register(sub: Subcommands) -> None:
    replay = sub.add_parser(
        "spark-replay",
        help="replay patch logs with Spark, writing the state as Parquet or N-Quads",
        description="Replay .jellyp logs (files or directories, in order) on Spark: per quad, the last committed "
        "operation wins. Needs the spark extra (pip install 'patchsync[spark]') and Java 17+.",
    )
    replay.add_argument("logs", nargs="+", metavar="LOG", help=".jellyp logs or directories of them, in log order")
    replay.add_argument(
        "--base",
        action="append",
        metavar="SNAPSHOT",
        help="starting state (repeatable): RDF files or directories of them, in any convert format: "
        + ", ".join(formats.suffixes(formats.RDF_CONVERT)),
    )
    replay.add_argument(
        "--out",
        required=True,
        metavar="STATE",
        help="state directory: each run writes a new version beside the previous one (STATE/v000001, ...) "
        "folding in only what was committed since, and names it in STATE/CURRENT",
    )
    replay.add_argument(
        "--full",
        action="store_true",
        help="replay every log from its start (a log replaced or cut is refused without it)",
    )
    replay.add_argument(
        "--keep", type=int, default=2, metavar="N", help="versions kept, the new one included (default 2)"
    )
    replay.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    replay.add_argument(
        "--format", default="parquet", choices=["parquet", "nq"], help="output format (default parquet)"
    )
    replay.add_argument(
        "--follow",
        action="store_true",
        help="keep running as a streaming query: fold in what is committed, a new version per trigger "
        "in which the logs grew, until SIGTERM or SIGINT",
    )
    replay.add_argument(
        "--trigger", type=float, default=10.0, metavar="SECONDS", help="with --follow: trigger interval (default 10)"
    )
    replay.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.spark import snapshot_files, state_lock

    for path in args.logs:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such file or directory")
    snapshot_files(args.base or [])  # a wrong base fails here, before a JVM starts
    # Held for the whole command (a --follow too), and taken before a JVM starts.
    with state_lock(Path(args.out)):
        return _replay(args)


def _replay(args: argparse.Namespace) -> int:
    from patchsync.spark import build_session, codec_errors, replay_into

    started = time.monotonic()
    spark = build_session(args.master, app_name="patchsync spark-replay", quiet=True)
    try:
        with codec_errors():
            if args.follow:
                return _follow(spark, args)
            version = replay_into(
                spark, args.logs, args.out, base=args.base, fmt=args.format, full=args.full, keep=args.keep
            )
    except Exception as exc:
        # Any other job failure arrives as a py4j/pyspark exception carrying both stack
        # traces; the user gets its first line.
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PatchsyncError(f"Spark job failed: {first}") from None
    finally:
        spark.stop()
    took = time.monotonic() - started
    if version.written:
        print(f"{version.path}: {args.format} {version.layers[-1].kind} written in {took:.2f}s, now current")
    else:
        print(f"{version.path}: up to date, nothing committed since ({took:.2f}s)")
    return 0


def _follow(spark: Any, args: argparse.Namespace) -> int:
    """Run the incremental replay as a streaming query until SIGTERM or SIGINT (exit 0)."""
    from patchsync.spark import StateVersion, follow

    stop = threading.Event()

    def written(version: StateVersion) -> None:
        print(f"{version.path}: {args.format} {version.layers[-1].kind} written, now current", flush=True)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    query = follow(
        spark, args.logs, args.out, trigger=args.trigger, fmt=args.format, keep=args.keep,
        base=args.base, on_version=written,
    )  # fmt: skip
    print(f"{args.out}: following {len(args.logs)} log path(s), trigger {args.trigger:g}s", file=sys.stderr, flush=True)
    # Wake up now and then to see the query fail (a log replaced or cut) or a signal arrive.
    while not stop.is_set() and query.isActive:
        stop.wait(0.5)
    if query.isActive:
        query.stop()
        return 0
    query.awaitTermination()  # raises the query's failure
    return 0
