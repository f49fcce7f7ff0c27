"""``patchsync spark-replay LOG... --out DIR``: replay logs on Spark."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

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
    replay.add_argument("--out", required=True, metavar="DIR", help="output directory (replaced)")
    replay.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    replay.add_argument(
        "--format", default="parquet", choices=["parquet", "nq"], help="output format (default parquet)"
    )
    replay.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.spark import build_session, snapshot_files, write_replay

    for path in args.logs:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such file or directory")
    snapshot_files(args.base or [])  # a wrong base fails here, before a JVM starts
    started = time.monotonic()
    spark = build_session(args.master, app_name="patchsync spark-replay", quiet=True)
    try:
        write_replay(spark, args.logs, args.out, base=args.base, fmt=args.format)
    except Exception as exc:
        # Any other job failure arrives as a py4j/pyspark exception carrying both stack
        # traces; the user gets its first line.
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PatchsyncError(f"Spark job failed: {first}") from None
    finally:
        spark.stop()
    print(f"{args.out}: {args.format} written in {time.monotonic() - started:.2f}s")
    return 0
