"""``patchsync append SRC... -o DEST``: join or append patch logs so the result decodes.

Joining Jelly-Patch logs with ``cat`` makes the second log's rows resolve against the
first log's lookup tables; this command decodes and re-encodes instead (see
:mod:`patchsync.logs.append`).
"""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands, add_relative_iris_flag, limits, log_files_of


def register(sub: Subcommands) -> None:
    """Add the ``append`` parser."""
    parser = sub.add_parser(
        "append",
        help="join or append patch logs (re-encoded, chain checked)",
        description="Append the patches of the SRC logs (.jellyp or .rdfp, in the order given) to the .jellyp "
        "log DEST, creating it if missing. Unlike cat, the patches are decoded and re-encoded, so the result "
        "decodes. Patches DEST already holds (by H id) are skipped and counted, so appending the same logs again "
        "appends nothing. Each other patch's H prev must name the patch before it (DEST's last H id, then the "
        "previous appended patch; a patch without H prev only starts an empty DEST); a broken chain appends "
        "nothing (exit 1).",
    )
    parser.add_argument(
        "sources",
        nargs="+",
        metavar="SRC",
        help="logs to append, in order; a directory stands for its .jellyp segments in file-name order",
    )
    parser.add_argument("-o", "--output", required=True, metavar="DEST", help="the .jellyp log appended to")
    parser.add_argument("--fsync", action="store_true", help="fsync DEST after writing")
    parser.add_argument(
        "--chain",
        choices=["strict", "ignore"],
        default="strict",
        help="strict (default): skip the patches DEST holds, refuse a patch that does not follow DEST's head; "
        "ignore: append every patch as given",
    )
    add_relative_iris_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Append; prints one summary line."""
    from patchsync.logs.append import append_logs

    sources = log_files_of(args.sources)
    report = append_logs(args.output, sources, limits=limits(args), fsync=args.fsync, chain=args.chain)
    print(
        f"{args.output}: appended {report.appended}, skipped {report.skipped} already present "
        f"(from {len(sources)} logs); head {report.head or '-'}"
    )
    return 0
