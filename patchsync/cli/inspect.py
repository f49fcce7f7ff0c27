"""``patchsync inspect FILE``: validate a patch log or Jelly-RDF file and summarize it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from patchsync.cli.common import Subcommands, patch_format, read_all, source_name
from patchsync.cli.convert import FORMATS


def register(sub: Subcommands) -> None:
    inspect = sub.add_parser(
        "inspect", help="summarize a patch file", description="Validate a patch file and summarize it."
    )
    inspect.add_argument("file", help="a .jellyp or .rdfp file, or - with --from")
    inspect.add_argument("--from", dest="from_format", choices=FORMATS, help="input format")
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")
    inspect.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.logs.rdf_files import rdf_format_of

    if rdf_format_of(args.file, args.from_format) == "jelly":
        return _inspect_jelly(args)
    from patchsync.logs.convert import summarize_log

    fmt = patch_format(args.file, args.from_format)
    summary = summarize_log(read_all(args.file), fmt, source_name(args.file))
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
