"""``patchsync inspect FILE``: validate a patch log, Jelly-RDF, RDF Thrift or RDF Protobuf file and
summarize it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from patchsync.cli.common import Subcommands, patch_format, read_all, source_name
from patchsync.cli.convert import FORMATS

#: The RDF Binary formats ``inspect`` summarizes (Jena's RDF Thrift and RDF Protobuf).
_BINARY = ("rdf-thrift", "rdf-protobuf")


def register(sub: Subcommands) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="summarize a patch log, a binary RDF file or an RDF Message Log",
        description="Validate a patch log (.jellyp .rdfp), Jelly-RDF (.jelly), RDF Thrift (.rt) or "
        "RDF Protobuf (.rpb) file and summarize it.",
    )
    inspect.add_argument("file", help="a .jellyp, .rdfp, .jelly, .rt or .rpb file, or - with --from")
    inspect.add_argument("--from", dest="from_format", choices=FORMATS, help="input format")
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")
    inspect.add_argument(
        "--messages",
        action="store_true",
        help="read the file as an RDF Message Log and report its messages (.ndjsonld, .yamlld always are)",
    )
    inspect.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync import formats
    from patchsync.logs.rdf_files import rdf_format_of

    log = formats.find(args.file, args.from_format, formats.MESSAGES)
    if args.messages or (log is not None and log.messages_only):
        return _inspect_messages(args, log)
    rdf = rdf_format_of(args.file, args.from_format)
    if rdf == "jelly":
        return _inspect_jelly(args)
    if rdf in _BINARY:
        return _inspect_binary(args, rdf)
    from patchsync.logs.convert import summarize_log

    fmt = patch_format(args.file, args.from_format)
    # Streamed, not read whole: a log of any size is inspected in the memory of a few frames.
    if args.file == "-":
        summary = summarize_log(sys.stdin.buffer, fmt, source_name(args.file))
    else:
        with open(args.file, "rb") as f:
            summary = summarize_log(f, fmt, source_name(args.file))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"file:     {summary['file']} ({summary['format']}, {summary['bytes']} bytes)")
    if "options" in summary:
        o = summary["options"]
        print(
            f"options:  {o['stream_type']} {o['statement_type']}, version {o['version']}, "
            f"rdf_star={o['rdf_star']}, generalized={o['generalized_statements']}"
        )
    if "frames" in summary:
        print(f"frames:   {summary['frames']}")
    print(f"patches:  {summary['patches']}")
    print("rows:     " + ", ".join(f"{k} {v}" for k, v in summary["rows"].items()))
    if "lookups" in summary:
        for table, used in summary["lookups"].items():
            print(
                f"lookup:   {table}: {used['entries']} entries, highest id {used['highest_id']} of {used['max_size']}"
            )


def _inspect_jelly(args: argparse.Namespace) -> int:
    from patchsync.logs.rdf_files import jelly_summary

    summary = jelly_summary(read_all(args.file), source_name(args.file))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"file:       {summary['file']} (jelly, {summary['bytes']} bytes)")
    if "options" in summary:
        o = summary["options"]
        print(
            f"options:    {o['physical_type']}, logical type {o['logical_type']}, version {o['version']}, "
            f"rdf_star={o['rdf_star']}, generalized={o['generalized_statements']}"
        )
    print(f"frames:     {summary['frames']}")
    print(f"statements: {summary['statements']}")
    print("rows:       " + ", ".join(f"{k} {v}" for k, v in summary["rows"].items()))
    for key, value in summary.get("metadata", {}).items():
        print(f"metadata:   {key} = {value}")
    return 0


def _inspect_binary(args: argparse.Namespace, fmt: str) -> int:
    from patchsync.logs.rdf_files import binary_summary

    summary = binary_summary(read_all(args.file), fmt, source_name(args.file))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"file:       {summary['file']} ({summary['format']}, {summary['bytes']} bytes)")
    print(f"statements: {summary['statements']}")
    print("rows:       " + (", ".join(f"{k} {v}" for k, v in summary["rows"].items()) or "none"))
    print("prefixes:   " + (" ".join(f"{k}: <{v}>" for k, v in summary["prefixes"].items()) or "none"))
    for position, kinds in summary["terms"].items():
        print(f"terms {position}:    " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    return 0


def _inspect_messages(args: argparse.Namespace, log: Any) -> int:
    from patchsync import formats
    from patchsync.errors import UsageError
    from patchsync.logs.messages import message_summary

    if log is None:
        logs = ", ".join(formats.suffixes(formats.MESSAGES))
        raise UsageError(f"{args.file}: not an RDF Message Log format (expected one of: {logs})")
    if args.file == "-" and not args.from_format:
        raise UsageError("reading standard input needs --from")
    summary = message_summary(read_all(args.file), log.name, source_name(args.file))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"file:         {summary['file']} ({summary['format']} message log, {summary['bytes']} bytes)")
    print(f"messages:     {summary['messages']} ({summary['empty_messages']} empty)")
    print(f"statements:   {summary['statements']}")
    if "message_size" in summary:
        size = summary["message_size"]
        print(f"message size: min {size['min']}, median {size['median']}, max {size['max']} statements")
    return 0
