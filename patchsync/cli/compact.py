"""``patchsync compact LOG... -o NET.jellyp``: the net effect of patch logs as one patch.

See :mod:`patchsync.logs.compact` for what the net patch holds and how it chains.
"""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands, add_relative_iris_flag, limits, log_files_of
from patchsync.errors import UsageError


def register(sub: Subcommands) -> None:
    """Add the ``compact`` parser."""
    parser = sub.add_parser(
        "compact",
        help="write the net effect of patch logs as one patch",
        description="Read the LOGs (.jellyp or .rdfp, one chain, in the order given) and write one patch with "
        "their net effect: the last operation on each statement and prefix; aborted transactions are left "
        "out. The patch's id is the last patch's and its prev the first patch's, so it stands for the run "
        "in the chain.",
    )
    parser.add_argument(
        "logs",
        nargs="+",
        metavar="LOG",
        help="patch logs, in chain order; a directory stands for its .jellyp segments in file-name order",
    )
    parser.add_argument("-o", "--output", required=True, metavar="NET", help="the .jellyp or .rdfp file written")
    add_relative_iris_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compact; prints one summary line."""
    from pathlib import Path

    from patchsync.logs.compact import compact_logs

    logs = log_files_of(args.logs)
    for log in logs:
        if not Path(log).is_file():
            raise UsageError(f"{log}: no such file")
    report = compact_logs(logs, args.output, limits=limits(args))
    print(
        f"{args.output}: {report.patches} patches compacted into one "
        f"({report.added} adds, {report.deleted} deletes; id {report.last_id or '(none)'}, "
        f"prev {report.first_prev or '(none)'})"
    )
    return 0
