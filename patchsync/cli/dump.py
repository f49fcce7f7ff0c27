"""``patchsync dump``: write a target's committed state."""

from __future__ import annotations

import argparse

from patchsync import formats
from patchsync.cli.common import Subcommands, add_target_flag, open_target, output

DUMP_FORMATS = formats.names(formats.DUMP)


def register(sub: Subcommands) -> None:
    dump = sub.add_parser("dump", help="write a target's current state", description="Write a target's quads.")
    add_target_flag(dump)
    dump.add_argument(
        "--format",
        default=None,
        choices=DUMP_FORMATS,
        help="output format (default: the suffix of -o; nq on standard output)",
    )
    dump.add_argument("-o", "--output", default="-", help="output file (default: standard output)")
    dump.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.apply.dump import write_dump
    from patchsync.apply.target import dumpable
    from patchsync.errors import FormatError
    from patchsync.tail.state import target_identity

    fmt = args.format
    if fmt is None:
        # The suffix of -o names the format; a suffix dump does not write is refused, not written as N-Quads.
        fmt = "nq" if args.output == "-" else formats.require(args.output, None, formats.DUMP, "dump output").name
    target = open_target(args.target, existing=True)
    try:
        with output(args.output) as out:
            write_dump(dumpable(target), fmt, out)
    except FormatError as exc:
        # What the target holds is the fault, so the line names the target (without credentials).
        raise FormatError(f"{target_identity(args.target)}: {exc}") from None
    finally:
        target.close()
    return 0
