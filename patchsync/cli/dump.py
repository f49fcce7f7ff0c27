"""``patchsync dump``: write a target's committed state."""

from __future__ import annotations

import argparse

from patchsync import formats
from patchsync.cli.common import Subcommands, add_target_flag, open_target, output

DUMP_FORMATS = formats.names(formats.DUMP)


def register(sub: Subcommands) -> None:
    dump = sub.add_parser("dump", help="write a target's current state", description="Write a target's quads.")
    add_target_flag(dump)
    dump.add_argument("--format", default=None, choices=DUMP_FORMATS, help="output format (default nq)")
    dump.add_argument("-o", "--output", default="-", help="output file (default: standard output)")
    dump.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.apply.dump import write_dump
    from patchsync.apply.target import dumpable

    fmt = args.format
    if fmt is None:
        found = formats.find(args.output, None, formats.DUMP) if args.output != "-" else None
        fmt = found.name if found is not None else "nq"
    target = open_target(args.target)
    try:
        with output(args.output) as out:
            write_dump(dumpable(target), fmt, out)
    finally:
        target.close()
    return 0
