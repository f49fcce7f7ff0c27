"""``patchsync snapshot --target T -o FILE.jelly``: a target's state with its position.

A new replica starts from the file with ``apply --base`` or ``tail --base`` instead of
replaying the whole history (:mod:`patchsync.apply.snapshot_file`). ``--target`` may also
be a served target topic (``grpc://HOST:PORT/TOPIC``): the server's snapshot is fetched
(the source registry's ``snapshot`` role).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from patchsync.cli.common import Subcommands, add_client_flags, add_target_flag, open_target, use_client_flags
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
    add_client_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the snapshot; prints one summary line."""
    from patchsync.apply.snapshot_file import write_snapshot
    from patchsync.sources import resolve_source, scheme_of, source_schemes

    if not args.output.lower().endswith(".jelly"):
        raise UsageError(f"{args.output}: a snapshot is a Jelly-RDF file; name it FILE.jelly")
    if scheme_of(args.target) in source_schemes():  # a source's address, not a target's URL
        return _fetch(args, resolve_source(args.target).snapshot())
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


def _fetch(args: argparse.Namespace, fetch: Any) -> int:
    """Write the snapshot a server sends for a served target topic (as it is: not decoded here)."""
    import os

    from patchsync.apply.snapshot_file import read_position

    use_client_flags(args)
    fetch(args.target, args.output)
    position = read_position(args.output)
    head = position.head if position is not None else None
    sources = len(position.sources) if position is not None else 0
    size = os.path.getsize(args.output)
    print(f"{args.output}: {size} bytes from {args.target} at patch {head or '(none)'}, {sources} source checkpoints")
    return 0


def _without_password(spec: str) -> str:
    """The target as recorded in the snapshot: a URL's password is left out."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1@", spec)
