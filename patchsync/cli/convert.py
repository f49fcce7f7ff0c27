"""``patchsync convert IN OUT``: between patch formats, or between RDF formats."""

from __future__ import annotations

import argparse

from patchsync import formats
from patchsync.cli.common import Subcommands, output, patch_format, read_all, refuse_input_as_output, source_name
from patchsync.errors import UsageError

# Patch formats, then the RDF formats convert reads and writes, then formats that are only message logs.
FORMATS = (
    formats.names(formats.PATCH_LOG)
    + formats.names(formats.RDF_CONVERT)
    + [f.name for f in formats.with_role(formats.MESSAGES) if f.messages_only]
)


def register(sub: Subcommands) -> None:
    convert = sub.add_parser(
        "convert",
        help="convert between .jellyp and .rdfp, between RDF formats, or between RDF Message Logs",
        description="Convert a patch log between Jelly-Patch (.jellyp) and RDF Patch text (.rdfp), "
        "or RDF data between its formats. With --messages, RDF Message Logs keep their message "
        "boundaries (.ndjsonld and .yamlld are always message logs). "
        "Formats follow the file extensions; use - with --from/--to for pipes.",
    )
    convert.add_argument("input", help="input file, or - for standard input")
    convert.add_argument("output", help="output file, or - for standard output")
    convert.add_argument("--from", dest="from_format", choices=FORMATS, help="input format")
    convert.add_argument("--to", dest="to_format", choices=FORMATS, help="output format")
    convert.add_argument(
        "--physical",
        choices=["triples", "quads", "graphs"],
        help="Jelly-RDF physical stream type (default: the input's, else quads if it names graphs, else triples)",
    )
    convert.add_argument(
        "--stream-type",
        choices=["frame", "flat", "punctuated"],
        help="Jelly-Patch stream type (default: the input's, else punctuated); flat merges all patches into one",
    )
    convert.add_argument(
        "--statements", choices=["triples", "quads"], help="statement type (default: the input's, else quads)"
    )
    convert.add_argument("--frame-size", type=int, metavar="N", help="maximum rows per frame (default 1024)")
    convert.add_argument(
        "--messages",
        action="store_true",
        help="read and write RDF Message Logs: '# @message' lines in N-Triples, N-Quads, Turtle and TriG, "
        "one frame a message in Jelly-RDF",
    )
    convert.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from patchsync.logs.rdf_files import rdf_format_of

    refuse_input_as_output([args.input], args.output)
    message_in = formats.find(args.input, args.from_format, formats.MESSAGES)
    message_out = formats.find(args.output, args.to_format, formats.MESSAGES)
    if args.messages or any(f is not None and f.messages_only for f in (message_in, message_out)):
        return _convert_messages(args)
    rdf_in, rdf_out = rdf_format_of(args.input, args.from_format), rdf_format_of(args.output, args.to_format)
    if rdf_in or rdf_out:
        return _convert_rdf(args, rdf_in, rdf_out)
    from patchsync.logs.convert import convert_log
    from patchsync.options import StatementType, StreamType

    in_fmt = patch_format(args.input, args.from_format)
    out_fmt = patch_format(args.output, args.to_format, writing=True)
    _check_frame_size(args)
    data = read_all(args.input)
    with output(args.output) as out:
        convert_log(
            data,
            in_fmt,
            out,
            out_fmt,
            source=source_name(args.input),
            stream_type=StreamType[args.stream_type.upper()] if args.stream_type else None,
            statement_type=StatementType[args.statements.upper()] if args.statements else None,
            frame_rows=args.frame_size,
        )
    return 0


def _check_frame_size(args: argparse.Namespace) -> None:
    if args.frame_size is not None and args.frame_size < 1:
        raise UsageError("--frame-size must be at least 1")


def _convert_rdf(args: argparse.Namespace, in_fmt: str | None, out_fmt: str | None) -> int:
    from patchsync.logs.rdf_files import convert_rdf

    if in_fmt is None or out_fmt is None:
        patch = ", ".join(formats.suffixes(formats.PATCH_LOG))
        rdf = ", ".join(formats.suffixes(formats.RDF_CONVERT))
        raise UsageError(
            f"convert works between patch formats ({patch}) or between RDF formats ({rdf}), "
            "not from one kind to the other"
        )
    if args.input == "-" and not args.from_format:
        raise UsageError("reading standard input needs --from")
    if args.output == "-" and not args.to_format:
        raise UsageError("writing standard output needs --to")
    _check_frame_size(args)
    data = read_all(args.input)
    with output(args.output) as out:
        convert_rdf(
            data,
            in_fmt,
            out,
            out_fmt,
            source=source_name(args.input),
            physical=args.physical,
            frame_rows=args.frame_size,
        )
    return 0


def _message_side(path: str, given: str | None, messages: bool, writing: bool) -> tuple[str, bool]:
    """The format of one side of a message conversion, and whether that side is a message log."""
    if path == "-" and not given:
        raise UsageError("writing standard output needs --to" if writing else "reading standard input needs --from")
    found = formats.find(path, given, formats.MESSAGES) or formats.find(path, given, formats.RDF_CONVERT)
    if found is None:
        logs = ", ".join(formats.suffixes(formats.MESSAGES))
        raise UsageError(f"{path}: not an RDF Message Log format (expected one of: {logs})")
    if messages and formats.MESSAGES not in found.roles:
        logs = ", ".join(formats.suffixes(formats.MESSAGES))
        raise UsageError(f"{path}: {found.name} cannot hold an RDF Message Log (--messages needs one of: {logs})")
    return found.name, found.messages_only or messages


def _convert_messages(args: argparse.Namespace) -> int:
    from patchsync.logs.messages import convert_messages

    if args.stream_type or args.statements or args.physical:
        raise UsageError("--physical, --stream-type and --statements do not apply to RDF Message Logs")
    in_fmt, in_messages = _message_side(args.input, args.from_format, args.messages, writing=False)
    out_fmt, out_messages = _message_side(args.output, args.to_format, args.messages, writing=True)
    _check_frame_size(args)
    data = read_all(args.input)
    with output(args.output) as out:
        convert_messages(
            data,
            in_fmt,
            out,
            out_fmt,
            source=source_name(args.input),
            in_messages=in_messages,
            out_messages=out_messages,
            frame_rows=args.frame_size,
        )
    return 0
