"""The ``patchsync`` command line: the only module that parses argv, prints or exits.

Every user error ends in one line on stderr (``patchsync: <file>, byte N, ...: <rule>``)
and a non-zero exit code, never a traceback. Output files are written to a temporary
name and renamed into place only when the whole conversion succeeded, so a failure never
leaves a half-written file behind.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from . import __version__
from .errors import PatchsyncError, UsageError
from .options import PatchOptions, StatementType, StreamType

EXIT_ERROR = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchsync", description="RDF Patch replication engine.")
    parser.add_argument("--version", action="version", version=f"patchsync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    convert = sub.add_parser(
        "convert",
        help="convert between .jellyp and .rdfp",
        description="Convert a patch log between Jelly-Patch (.jellyp) and RDF Patch text (.rdfp). "
        "Formats follow the file extensions; use - with --from/--to for pipes.",
    )
    convert.add_argument("input", help="input file, or - for standard input")
    convert.add_argument("output", help="output file, or - for standard output")
    convert.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="input format")
    convert.add_argument("--to", dest="to_format", choices=["jellyp", "rdfp"], help="output format")
    convert.add_argument(
        "--stream-type",
        choices=["frame", "flat", "punctuated"],
        help="Jelly-Patch stream type (default: the input's, else punctuated); flat merges all patches into one",
    )
    convert.add_argument(
        "--statements", choices=["triples", "quads"], help="statement type (default: the input's, else quads)"
    )
    convert.add_argument("--frame-size", type=int, metavar="N", help="maximum rows per frame (default 1024)")

    inspect = sub.add_parser(
        "inspect", help="summarize a patch file", description="Validate a patch file and summarize it."
    )
    inspect.add_argument("file", help="a .jellyp or .rdfp file, or - with --from")
    inspect.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="input format")
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")

    conformance = sub.add_parser(
        "conformance",
        help="run conformance test manifests",
        description="Run Jelly conformance manifests; ends with the line 'N passed, M failed'.",
    )
    conformance.add_argument("manifests", nargs="+", help="manifest.ttl files")
    conformance.add_argument("-v", "--verbose", action="store_true", help="list every case, not only failures")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``patchsync`` command."""
    # rdflib logs a traceback for every ill-typed literal; a user sees one-line errors only.
    logging.getLogger("rdflib").setLevel(logging.ERROR)
    parser = _parser()
    args = parser.parse_args(argv)
    handlers = {"convert": _convert, "inspect": _inspect, "conformance": _conformance}
    try:
        return handlers[args.command](args)
    except UsageError as exc:
        _fail(str(exc))
        return EXIT_USAGE
    except PatchsyncError as exc:
        _fail(str(exc))
        return EXIT_ERROR
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _fail(f"{where}{exc.strerror or exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130


def _fail(message: str) -> None:
    print(f"patchsync: {message}", file=sys.stderr)


# -- convert -------------------------------------------------------------------------


def _input_format(path: str, given: str | None) -> str:
    from .files import format_of

    if path == "-" and not given:
        raise UsageError("reading standard input needs --from jellyp|rdfp")
    return format_of(path, given)


def _output_format(path: str, given: str | None) -> str:
    from .files import format_of

    if path == "-" and not given:
        raise UsageError("writing standard output needs --to jellyp|rdfp")
    return format_of(path, given)


def _read_all(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def _events(data: bytes, fmt: str, source: str) -> Iterator[Any]:
    import io

    from .codec.ntriples import NTriplesTerms
    from .files import iter_stream_events

    # N-Triples strings keep every term exactly as written (no rdflib normalization).
    return iter_stream_events(io.BytesIO(data), fmt, adapter=NTriplesTerms(), source=source)


def _scan_features(data: bytes, fmt: str, source: str) -> tuple[PatchOptions | None, bool, bool, bool]:
    """First pass over the input: its options (Jelly) or the features it uses (text)."""
    from .codec.ntriples import NTriplesTerms
    from .events import Add, Delete, Options
    from .terms import BNODE, LITERAL, TRIPLE

    adapter = NTriplesTerms()
    quads = star = generalized = False
    for event in _events(data, fmt, source):
        kind = type(event)
        if kind is Options:
            return event.options, False, False, False
        if kind is Add or kind is Delete:
            if event.g:
                quads = True
            for position, term in (("s", event.s), ("p", event.p), ("o", event.o)):
                u = adapter.unpack(term)
                if u[0] == TRIPLE:
                    star = True
                    if position == "p":
                        generalized = True
                elif (u[0] == LITERAL and position != "o") or (u[0] == BNODE and position == "p"):
                    generalized = True
            if event.g and adapter.unpack(event.g)[0] == LITERAL:
                generalized = True
    return None, quads, star, generalized


def _convert(args: argparse.Namespace) -> int:
    from .files import write_events

    in_fmt = _input_format(args.input, args.from_format)
    out_fmt = _output_format(args.output, args.to_format)
    if args.frame_size is not None and args.frame_size < 1:
        raise UsageError("--frame-size must be at least 1")
    source = "<stdin>" if args.input == "-" else args.input
    data = _read_all(args.input)
    # The first pass validates the whole input before anything is written and tells which
    # features the output options must declare (Jelly requires them up front).
    found, _quads, star, generalized = _scan_features(data, in_fmt, source)
    base = found or PatchOptions(rdf_star=star, generalized_statements=generalized)
    options = PatchOptions(
        stream_type=StreamType[args.stream_type.upper()] if args.stream_type else base.stream_type,
        statement_type=StatementType[args.statements.upper()] if args.statements else base.statement_type,
        generalized_statements=base.generalized_statements,
        rdf_star=base.rdf_star,
        max_name_table_size=base.max_name_table_size,
        max_prefix_table_size=base.max_prefix_table_size,
        max_datatype_table_size=base.max_datatype_table_size,
    )
    from .codec.ntriples import NTriplesTerms

    with _output(args.output) as out:
        write_events(
            _events(data, in_fmt, source),
            out,
            out_fmt,
            options=options,
            adapter=NTriplesTerms(),
            max_frame_rows=args.frame_size,
        )
    return 0


@contextmanager
def _output(path: str) -> Iterator[IO[bytes]]:
    """A binary output that appears at ``path`` only if the block succeeds."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


# -- inspect -------------------------------------------------------------------------

_ROW_CODES = {
    "Header": "H",
    "TxStart": "TX",
    "TxCommit": "TC",
    "TxAbort": "TA",
    "PrefixAdd": "PA",
    "PrefixDelete": "PD",
    "Add": "A",
    "Delete": "D",
}


def _inspect(args: argparse.Namespace) -> int:
    fmt = _input_format(args.file, args.from_format)
    source = "<stdin>" if args.file == "-" else args.file
    data = _read_all(args.file)
    summary: dict[str, Any] = {"file": source, "format": fmt, "bytes": len(data)}
    rows: Counter[str] = Counter()
    patches = 0
    options: PatchOptions | None = None
    for event in _events(data, fmt, source):
        name = type(event).__name__
        if name == "PatchEnd":
            patches += 1
        elif name == "Options":
            options = event.options
        else:
            rows[_ROW_CODES[name]] += 1
    summary["patches"] = patches
    if fmt == "jellyp":
        from .inspect import frame_stats

        stats = frame_stats(data, source)
        summary["frames"] = stats.frames
        if options is not None:
            summary["options"] = {
                "stream_type": options.stream_type.name,
                "statement_type": options.statement_type.name,
                "generalized_statements": options.generalized_statements,
                "rdf_star": options.rdf_star,
                "max_name_table_size": options.max_name_table_size,
                "max_prefix_table_size": options.max_prefix_table_size,
                "max_datatype_table_size": options.max_datatype_table_size,
                "version": options.version,
            }
        summary["lookups"] = stats.lookups
        rows.update(stats.rows)
    summary["rows"] = dict(sorted(rows.items()))
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


# -- conformance ---------------------------------------------------------------------


def _conformance(args: argparse.Namespace) -> int:
    from .conformance import run_manifests

    report = run_manifests(args.manifests)
    for case in report.results:
        if case.status == "failed" or args.verbose:
            print(
                f"{case.status.upper():7} {case.id}: {case.message}"
                if case.message
                else f"{case.status.upper():7} {case.id}"
            )
    line = f"{report.passed} passed, {report.failed} failed"
    if report.skipped:
        line += f", {report.skipped} skipped"
    print(line)
    return 0 if report.failed == 0 else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
