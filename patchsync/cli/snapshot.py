"""``patchsync snapshot --target T -o FILE.jelly``: a target's state with its position.

A new replica starts from the file with ``apply --base`` or ``tail --base`` instead of
replaying the whole history (:mod:`patchsync.apply.snapshot_file`).
"""

from __future__ import annotations

import argparse
import re

from patchsync.cli.common import Subcommands, add_target_flag, open_target
from patchsync.errors import UsageError


def register(sub: Subcommands) -> None:
    """Add the ``snapshot`` parser."""
    parser = sub.add_parser(
        "snapshot",
        help="write a target's state with its position (a base for new replicas)",
        description="Write every quad of the target to a Jelly-RDF file, with the target's position (its last "
        "patch id and the checkpoint of every source, stream sequences included) in the first frame's "
        "metadata. Start a new replica with apply --base FILE or tail --base FILE.",
    )
    add_target_flag(parser)
    parser.add_argument("-o", "--output", required=True, metavar="FILE.jelly", help="the snapshot file written")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the snapshot; prints one summary line."""
    from patchsync.apply.snapshot_file import write_snapshot

    if not args.output.lower().endswith(".jelly"):
        raise UsageError(f"{args.output}: a snapshot is a Jelly-RDF file; name it FILE.jelly")
    target = open_target(args.target, existing=True)
    try:
        report = write_snapshot(target, args.output, name=_without_password(args.target))
    finally:
        target.close()
    position = report.position
    print(
        f"{args.output}: {report.quads} quads at patch {position.head or '(none)'}, "
        f"{len(position.sources)} source checkpoints"
    )
    return 0


def _without_password(spec: str) -> str:
    """The target as recorded in the snapshot: a URL's password is left out."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", spec)
