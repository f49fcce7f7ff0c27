"""``patchsync ingest MESSAGES... -o DEST``: each RDF Message becomes one patch (see
:mod:`patchsync.ingest.run`)."""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands, add_relative_iris_flag, limits
from patchsync.ingest.modes import ADD, MODES


def register(sub: Subcommands) -> None:
    """Add the ``ingest`` parser."""
    from patchsync.sources import APPEND, address_forms

    parser = sub.add_parser(
        "ingest",
        help="turn RDF Messages into patches, one patch per message",
        description="Append one patch per RDF Message of the MESSAGES logs (in order) to DEST, chained after its "
        "head, each in one transaction; an empty message is an empty patch. A rerun (also after a crash) appends "
        "only the messages not yet ingested; a malformed message appends nothing.",
    )
    parser.add_argument("sources", nargs="+", metavar="MESSAGES", help="message logs, in order")
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DEST",
        help="a .jellyp or .rdfp log, or an address: " + ", ".join(address_forms(APPEND)),
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=ADD,
        help="add: the message's quads are added; replace-graph: each graph the message names holds exactly its "
        "quads; replace: the dataset becomes the message (default: add)",
    )
    parser.add_argument(
        "--state",
        metavar="TARGET",
        help="an apply target holding the current state (sqlite:///state.db ...), kept up to date with every "
        "patch; without it the replace modes replay DEST (a file)",
    )
    parser.add_argument(
        "--messages",
        action="store_true",
        help="read N-Triples, N-Quads, Turtle, TriG and Jelly-RDF files as message logs "
        "(otherwise each is one message; .ndjsonld and .yamlld always are)",
    )
    parser.add_argument("--fsync", action="store_true", help="fsync DEST after every patch (files)")
    add_relative_iris_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ingest; prints one summary line."""
    from patchsync.ingest import ingest_messages

    done = ingest_messages(
        args.output,
        args.sources,
        mode=args.mode,
        state=args.state,
        messages=args.messages,
        limits=limits(args),
        fsync=args.fsync,
    )
    caught = f"; {done.caught_up} patches applied to {args.state} to catch up" if done.caught_up else ""
    print(
        f"{args.output}: {done.appended} patches appended ({args.mode}) from {len(args.sources)} message logs "
        f"({done.skipped} messages were already ingested{caught})"
    )
    return 0
