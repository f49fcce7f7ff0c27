"""``patchsync ingest MESSAGES... -o LOG.jellyp``: each RDF Message becomes one patch (see
:mod:`patchsync.logs.ingest`)."""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands, add_relative_iris_flag, limits


def register(sub: Subcommands) -> None:
    """Add the ``ingest`` parser."""
    parser = sub.add_parser(
        "ingest",
        help="turn RDF Messages into patches, one patch per message",
        description="Append one patch per RDF Message of the MESSAGES logs (in order) to the .jellyp log LOG, "
        "chained after its head: the message's quads as adds, an empty message an empty patch. A rerun "
        "appends only the messages not yet ingested; a malformed message appends nothing.",
    )
    parser.add_argument("sources", nargs="+", metavar="MESSAGES", help="message logs, in order")
    parser.add_argument("-o", "--output", required=True, metavar="LOG", help="the .jellyp log appended to")
    parser.add_argument(
        "--messages",
        action="store_true",
        help="read N-Triples, N-Quads, Turtle, TriG and Jelly-RDF files as message logs "
        "(otherwise each is one message; .ndjsonld and .yamlld always are)",
    )
    parser.add_argument("--fsync", action="store_true", help="fsync LOG after writing")
    add_relative_iris_flag(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Ingest; prints one summary line."""
    from patchsync.logs.ingest import ingest_messages

    done = ingest_messages(args.output, args.sources, messages=args.messages, limits=limits(args), fsync=args.fsync)
    print(
        f"{args.output}: {done.appended} patches appended from {len(args.sources)} message logs "
        f"({done.skipped} messages were already ingested)"
    )
    return 0
