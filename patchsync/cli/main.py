"""The ``patchsync`` command line: the only module that parses argv, prints or exits.

Every user error ends in one line on stderr (``patchsync: <file>, byte N, ...: <rule>``)
and a non-zero exit code, never a traceback. Output files are written to a temporary
name and renamed into place only when the whole conversion succeeded, so a failure never
leaves a half-written file behind.
"""

from __future__ import annotations

import argparse
import importlib
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

from patchsync import __version__
from patchsync.errors import PatchsyncError, UsageError
from patchsync.options import PatchOptions, StatementType, StreamType

EXIT_ERROR = 1
EXIT_USAGE = 2


# Patch formats, then the RDF dataset formats of patchsync.logs.rdf_files (.jelly and text).
_FORMATS = ["jellyp", "rdfp", "jelly", "nt", "nq", "ttl", "trig"]


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
    convert.add_argument("--from", dest="from_format", choices=_FORMATS, help="input format")
    convert.add_argument("--to", dest="to_format", choices=_FORMATS, help="output format")
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

    inspect = sub.add_parser(
        "inspect", help="summarize a patch file", description="Validate a patch file and summarize it."
    )
    inspect.add_argument("file", help="a .jellyp or .rdfp file, or - with --from")
    inspect.add_argument("--from", dest="from_format", choices=_FORMATS, help="input format")
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")

    conformance = sub.add_parser(
        "conformance",
        help="run conformance test manifests",
        description="Run Jelly conformance manifests; ends with the line 'N passed, M failed'.",
    )
    conformance.add_argument("manifests", nargs="+", help="manifest.ttl files")
    conformance.add_argument("-v", "--verbose", action="store_true", help="list every case, not only failures")
    _add_apply_parsers(sub)
    _add_diff_parsers(sub)
    _add_spark_parser(sub)
    importlib.import_module("patchsync.cli.append").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``patchsync`` command."""
    # rdflib logs a traceback for every ill-typed literal; a user sees one-line errors only.
    logging.getLogger("rdflib").setLevel(logging.ERROR)
    parser = _parser()
    args = parser.parse_args(argv)
    handlers = {
        "convert": _convert,
        "inspect": _inspect,
        "conformance": _conformance,
        "apply": _apply,
        "dump": _dump,
        "status": _status,
        "tail": _tail,
        "db": _db,
        "diff": _diff,
        "reverse": _reverse,
        "spark-replay": _spark_replay,
    }
    try:
        return (handlers.get(args.command) or args.func)(args)
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
    from patchsync.logs.patch_logs import format_of

    if path == "-" and not given:
        raise UsageError("reading standard input needs --from jellyp|rdfp")
    return format_of(path, given)


def _output_format(path: str, given: str | None) -> str:
    from patchsync.logs.patch_logs import format_of

    if path == "-" and not given:
        raise UsageError("writing standard output needs --to jellyp|rdfp")
    return format_of(path, given)


def _read_all(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def _events(data: bytes, fmt: str, source: str) -> Iterator[Any]:
    import io

    from patchsync.logs.patch_logs import iter_stream_events
    from patchsync.terms.ntriples import NTriplesTerms

    # N-Triples strings keep every term exactly as written (no rdflib normalization).
    return iter_stream_events(io.BytesIO(data), fmt, adapter=NTriplesTerms(), source=source)


def _scan_features(data: bytes, fmt: str, source: str) -> tuple[PatchOptions | None, bool, bool, bool]:
    """First pass over the input: its options (Jelly) or the features it uses (text)."""
    from patchsync.events import Add, Delete, Options
    from patchsync.terms import BNODE, LITERAL, TRIPLE
    from patchsync.terms.ntriples import NTriplesTerms

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
    from patchsync.logs.patch_logs import write_events
    from patchsync.logs.rdf_files import rdf_format_of

    rdf_in, rdf_out = rdf_format_of(args.input, args.from_format), rdf_format_of(args.output, args.to_format)
    if rdf_in or rdf_out:
        return _convert_rdf(args, rdf_in, rdf_out)
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
    from patchsync.terms.ntriples import NTriplesTerms

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
    from patchsync.logs.rdf_files import rdf_format_of

    if rdf_format_of(args.file, args.from_format) == "jelly":
        return _inspect_jelly(args)
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
        from patchsync.codec.frame_stats import frame_stats

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


# -- RDF datasets (.jelly, .nt, .nq, .ttl, .trig) ----------------------------------------


def _convert_rdf(args: argparse.Namespace, in_fmt: str | None, out_fmt: str | None) -> int:
    from patchsync.logs.rdf_files import convert_rdf

    if in_fmt is None or out_fmt is None:
        raise UsageError(
            "convert works between patch formats (.jellyp, .rdfp) or between RDF formats "
            "(.jelly, .nt, .nq, .ttl, .trig), not from one kind to the other"
        )
    if args.input == "-" and not args.from_format:
        raise UsageError("reading standard input needs --from")
    if args.output == "-" and not args.to_format:
        raise UsageError("writing standard output needs --to")
    if args.frame_size is not None and args.frame_size < 1:
        raise UsageError("--frame-size must be at least 1")
    data = _read_all(args.input)
    with _output(args.output) as out:
        convert_rdf(
            data,
            in_fmt,
            out,
            out_fmt,
            source="<stdin>" if args.input == "-" else args.input,
            physical=args.physical,
            frame_rows=args.frame_size,
        )
    return 0


def _inspect_jelly(args: argparse.Namespace) -> int:
    from patchsync.logs.rdf_files import jelly_summary

    summary = jelly_summary(_read_all(args.file), "<stdin>" if args.file == "-" else args.file)
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
    return 0


# -- diff and reverse ----------------------------------------------------------------


def _add_diff_parsers(sub: Any) -> None:
    diff = sub.add_parser(
        "diff",
        help="the patch turning one RDF file into another",
        description="Write the minimal patch turning OLD into NEW. Inputs: .nt .nq .ttl .trig .n3 .jsonld .rdf; "
        "blank nodes are matched by label (.nt .nq .ttl .trig keep labels), or by structure with --canonical.",
    )
    diff.add_argument("old", metavar="OLD", help="the RDF file the patch applies to")
    diff.add_argument("new", metavar="NEW", help="the RDF file the patch produces")
    diff.add_argument("-o", "--output", required=True, help="the patch (.jellyp or .rdfp, or - with --to)")
    diff.add_argument("--to", dest="to_format", choices=["jellyp", "rdfp"], help="output format")
    diff.add_argument("--canonical", action="store_true", help="match blank nodes by rdflib's canonicalization")
    diff.add_argument("--prefixes", action="store_true", help="also write PA/PD rows for changed prefixes")

    reverse = sub.add_parser(
        "reverse",
        help="the inverse of a recorded log",
        description="Write the patches that undo a log of real changes (as patchsync.capture records), "
        "last patch first.",
    )
    reverse.add_argument("log", metavar="PATCH", help="a .jellyp or .rdfp log, or - with --from")
    reverse.add_argument("-o", "--output", required=True, help="output file (.jellyp or .rdfp, or - with --to)")
    reverse.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="input format")
    reverse.add_argument("--to", dest="to_format", choices=["jellyp", "rdfp"], help="output format")


def _diff(args: argparse.Namespace) -> int:
    from patchsync.capture.diff import diff, read_dataset
    from patchsync.logs.patch_logs import write_events
    from patchsync.terms.rdflib_adapter import RdflibTerms

    out_fmt = _output_format(args.output, args.to_format)
    old, new = read_dataset(args.old), read_dataset(args.new)
    events = diff(old, new, canonical=args.canonical, prefixes=args.prefixes)
    with _output(args.output) as out:
        write_events(events, out, out_fmt, options=PatchOptions(), adapter=RdflibTerms())
    return 0


def _reverse(args: argparse.Namespace) -> int:
    import io

    from patchsync.capture.diff import reverse
    from patchsync.events import Options
    from patchsync.logs.patch_logs import iter_stream_events, write_events
    from patchsync.terms.rdflib_adapter import RdflibTerms

    in_fmt = _input_format(args.log, args.from_format)
    out_fmt = _output_format(args.output, args.to_format)
    source = "<stdin>" if args.log == "-" else args.log
    data = _read_all(args.log)
    # Reversing needs the whole log (the last patch comes first), so it is decoded and
    # checked completely before anything is written.
    events = list(iter_stream_events(io.BytesIO(data), in_fmt, adapter=RdflibTerms(), source=source))
    found = next((e.options for e in events if type(e) is Options), None)
    if found is not None and found.stream_type is StreamType.FLAT:
        found = PatchOptions(**{**_options_dict(found), "stream_type": StreamType.PUNCTUATED})
    inverse = list(reverse(events))
    with _output(args.output) as out:
        write_events(inverse, out, out_fmt, options=found or PatchOptions(), adapter=RdflibTerms())
    return 0


def _options_dict(options: PatchOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in PatchOptions.__slots__}


# -- conformance ---------------------------------------------------------------------


def _conformance(args: argparse.Namespace) -> int:
    from patchsync.conformance import run_manifests

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


# -- apply, dump, status, db ---------------------------------------------------------

DEFAULT_TARGET = "sqlite:///patchsync.db"


def _add_apply_parsers(sub: Any) -> None:
    target_help = (
        "a SQLAlchemy URL (sqlite:///state.db, postgresql+psycopg://user@host/db), "
        f"file:PATH.trig|.nq|.ttl|.nt or oxigraph:DIR (default {DEFAULT_TARGET})"
    )
    apply = sub.add_parser(
        "apply",
        help="apply patch logs to a target",
        description="Apply .jellyp/.rdfp patch logs to a target. Each unit (transaction) is applied atomically "
        "with the log's checkpoint, so re-running resumes where the last run stopped and applies nothing twice.",
    )
    apply.add_argument("logs", nargs="+", metavar="LOG", help="patch logs, applied in the order given")
    apply.add_argument("--target", default=DEFAULT_TARGET, help=target_help)
    apply.add_argument(
        "--chain",
        choices=["strict", "ignore"],
        default="strict",
        help="strict (default): a patch's prev must be the target's last patch id, re-delivered ids are skipped",
    )
    apply.add_argument("--reset", action="store_true", help="start a log over when its checkpoint no longer matches it")
    apply.add_argument("--from", dest="from_format", choices=["jellyp", "rdfp"], help="log format")
    apply.add_argument("--no-progress", action="store_true", help="no progress bar even on a terminal")
    _add_relative_iris_flag(apply)
    apply.add_argument(
        "--graph",
        metavar="IRI",
        help="put statements that name no graph (TRIPLES streams, triple rows of .rdfp) in this graph "
        "instead of the default graph",
    )

    dump = sub.add_parser("dump", help="write a target's current state", description="Write a target's quads.")
    dump.add_argument("--target", default=DEFAULT_TARGET, help=target_help)
    dump.add_argument("--format", default=None, choices=["nq", "nt", "trig", "ttl"], help="output format (default nq)")
    dump.add_argument("-o", "--output", default="-", help="output file (default: standard output)")

    status = sub.add_parser(
        "status",
        help="show per-log checkpoints of a target",
        description="Per source log: position, patches, last id, time.",
    )
    status.add_argument("--target", default=DEFAULT_TARGET, help=target_help)
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--state-dir", metavar="DIR", help="a tail daemon's state directory (see tail --state-dir)")

    _add_tail_parser(sub, target_help)

    db = sub.add_parser("db", help="manage a SQL target's schema", description="Manage a SQL target's schema.")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="upgrade the schema to the newest revision")
    upgrade.add_argument("target", metavar="TARGET", help="a SQLAlchemy URL")


def _open_target(spec: str) -> Any:
    from patchsync.apply.api import open_target

    return open_target(spec)


class _Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.name = ""
        self.size = 0
        self.start = 0.0

    def begin(self, name: str, size: int) -> None:
        import time

        self.name, self.size, self.start = name, size, time.monotonic()

    def __call__(self, result: Any, offset: int) -> None:
        import time

        if not self.enabled:
            return
        fraction = min(1.0, offset / self.size) if self.size else 0.0
        width = 24
        bar = "#" * int(fraction * width)
        rate = result.rows / max(time.monotonic() - self.start, 1e-9)
        sys.stderr.write(f"\r{self.name} [{bar:<{width}}] {fraction:4.0%} {result.rows:,} rows {rate:,.0f} rows/s ")
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _apply(args: argparse.Namespace) -> int:
    import time

    from patchsync.apply.api import apply_file
    from patchsync.apply.applier import ApplyResult

    for log in args.logs:
        _input_format(log, args.from_format)
        if not Path(log).is_file():
            raise UsageError(f"{log}: no such file")
    target = _open_target(args.target)
    total = ApplyResult(source="total")
    progress = _Progress(not args.no_progress)
    started = time.monotonic()
    try:
        for log in args.logs:
            progress.begin(log, Path(log).stat().st_size)
            try:
                result = apply_file(
                    log,
                    target,
                    fmt=args.from_format,
                    chain=args.chain,
                    reset=args.reset,
                    progress=progress,
                    graph=args.graph,
                    limits=_limits(args),
                )
            finally:
                progress.end()
            total.merge(result)
            print(f"{log}: {_result_line(result)}")
        target.close()
    except BaseException:
        discard = getattr(target, "discard", None)
        (discard or target.close)()
        raise
    elapsed = time.monotonic() - started
    rate = total.rows / elapsed if elapsed > 0 else 0.0
    print(f"total: {_result_line(total)} in {elapsed:.2f}s ({rate:,.0f} rows/s)")
    return 0


def _add_tail_parser(sub: Any, target_help: str) -> None:
    tail = sub.add_parser(
        "tail",
        help="keep a target in step with growing patch logs",
        description="Tail .jellyp logs (files, or directories read in file-name order) into a target: each unit "
        "is applied as soon as it is complete, with the log's checkpoint; a restart resumes every log from its "
        "checkpoint. SIGTERM/SIGINT finish the current unit and exit 0. Log lines go to stderr.",
    )
    tail.add_argument("paths", nargs="+", metavar="PATH", help="a .jellyp log or a directory of them")
    tail.add_argument("--target", default=DEFAULT_TARGET, help=target_help)
    tail.add_argument(
        "--chain",
        choices=["strict", "ignore"],
        default="strict",
        help="strict (default): a patch's prev must be the target's last patch id, re-delivered ids are skipped",
    )
    tail.add_argument("--poll", action="store_true", help="poll the file system instead of inotify (network mounts)")
    tail.add_argument(
        "--poll-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between polls, and the longest wait without a file event (default 1)",
    )
    tail.add_argument("--once", action="store_true", help="apply what the logs hold now and exit")
    _add_relative_iris_flag(tail)
    tail.add_argument(
        "--keep-going", action="store_true", help="when one log fails, keep tailing the others (exit 1 at the end)"
    )
    tail.add_argument("--reset", action="store_true", help="start a log over when its checkpoint no longer matches it")
    tail.add_argument(
        "--state-dir",
        metavar="DIR",
        help="locks, decoder snapshots and status of the daemon (default: next to a SQLite/file/Oxigraph target, "
        "as TARGET.tail)",
    )
    tail.add_argument(
        "--log-interval", type=float, default=1.0, metavar="S", help="at most one progress line per log per S seconds"
    )
    tail.add_argument(
        "--retry-max-delay",
        type=float,
        default=30.0,
        metavar="S",
        help="when the target is unavailable (connection lost, server restarting, SQLite locked), wait 0.2 s, "
        "then twice as long per failed attempt, at most S seconds (default 30)",
    )
    tail.add_argument(
        "--retry-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give up (exit 1) when the target stays unavailable for S seconds (default 600; 0: never retry)",
    )


class _TailLog:
    """Structured ``key=value`` lines on stderr; progress lines rate-limited per source."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last: dict[str, float] = {}

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        import time

        if event == "applied" and fields.get("state") == "live":
            now = time.monotonic()
            source = str(fields.get("source"))
            if now - self.last.get(source, -1e9) < self.interval:
                return
            self.last[source] = now
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        parts = [f"ts={stamp}", f"event={event}"]
        for key, value in fields.items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
            if not text or any(c in text for c in ' "='):
                text = json.dumps(text)
            parts.append(f"{key}={text}")
        print(" ".join(parts), file=sys.stderr, flush=True)


def _add_relative_iris_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-relative-iris",
        action="store_true",
        help="accept IRIs without a scheme (refused by default: they are the mark of logs joined with cat; "
        "join logs with patchsync append)",
    )


def _limits(args: argparse.Namespace) -> Any:
    from patchsync.options import Limits

    return Limits(require_absolute_iris=not args.allow_relative_iris)


def _tail(args: argparse.Namespace) -> int:
    from patchsync.tail import Tailer, TailOptions, default_state_dir, open_retrying

    state_dir = args.state_dir or default_state_dir(args.target)
    log = _TailLog(args.log_interval)
    retry = {"retry_max_delay": args.retry_max_delay, "retry_timeout": args.retry_timeout}
    target = open_retrying(lambda: _open_target(args.target), log=log, **retry)
    tailer = None
    try:
        tailer = Tailer(
            args.paths,
            target,
            TailOptions(
                chain=args.chain,
                reset=args.reset,
                keep_going=args.keep_going,
                state_dir=state_dir,
                poll=args.poll,
                poll_interval=args.poll_interval,
                log=log,
                reopen=lambda: _open_target(args.target),
                limits=_limits(args),
                **retry,
            ),
        )
        try:
            reports = tailer.run_once() if args.once else tailer.run()
        finally:
            tailer.close()
        target = tailer.target  # reopened if the first one was lost
        target.close()
    except BaseException:
        if tailer is not None:
            target = tailer.target
        discard = getattr(target, "discard", None)
        (discard or target.close)()
        raise
    failed = [r for r in reports if r.state == "failed"]
    for r in failed:
        _fail(r.error or f"{r.source}: failed")
    return EXIT_ERROR if failed else 0


def _result_line(r: Any) -> str:
    line = f"{r.patches} patches applied, {r.units} units ({r.added} added, {r.deleted} deleted, {r.noop} no-op)"
    if r.aborted:
        line += f", {r.aborted} aborted"
    if r.skipped:
        line += f", {r.skipped} re-delivered skipped"
    if r.replayed:
        line += f", {r.replayed} events already applied"
    return line


def _dump(args: argparse.Namespace) -> int:
    from patchsync.apply.dump import write_dump

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lstrip(".") if args.output != "-" else ""
        fmt = suffix if suffix in ("nq", "nt", "trig", "ttl") else "nq"
    target = _open_target(args.target)
    try:
        with _output(args.output) as out:
            write_dump(target, fmt, out)
    finally:
        target.close()
    return 0


def _status(args: argparse.Namespace) -> int:
    import datetime

    from patchsync.tail import default_state_dir, lag_bytes, read_status

    target = _open_target(args.target)
    try:
        sources = target.sources()
    finally:
        target.close()
    state_dir = getattr(args, "state_dir", None) or default_state_dir(args.target)
    daemon = read_status(state_dir) if state_dir is not None else {}
    rows = []
    for st in sources:
        cp = st.checkpoint
        when = (
            datetime.datetime.fromtimestamp(cp.updated_at, datetime.UTC).isoformat(timespec="seconds")
            if cp.updated_at
            else None
        )
        rows.append(
            {
                "source": st.source,
                "position": {"offset": cp.offset, "frame": cp.frame, "row": cp.row},
                "patches": cp.patches,
                "last_id": cp.last_id,
                "updated_at": when,
                "fingerprint": cp.fingerprint,
                "lag_bytes": lag_bytes(st.source, cp),
                "tail": daemon.get(st.source),
            }
        )
    if args.json:
        print(json.dumps({"target": args.target, "sources": rows}, indent=2))
        return 0
    if not rows:
        print("no logs applied")
    for r in rows:
        pos = r["position"]
        print(
            f"{r['source']}: byte {pos['offset']}, frame {pos['frame']}, row {pos['row']}; "
            f"{r['patches']} patches; last id {r['last_id'] or '-'}; at {r['updated_at'] or '-'}"
            + (f"; {r['lag_bytes']} bytes behind" if r["lag_bytes"] is not None else "")
            + _tail_state(r["tail"])
        )
    return 0


def _tail_state(rec: dict[str, Any] | None) -> str:
    if not rec:
        return ""
    text = f"; tail {rec.get('state')}"
    if rec.get("error"):
        text += f": {rec['error']}"
    return text


def _db(args: argparse.Namespace) -> int:
    from patchsync.apply.targets.sql import upgrade_database

    if "://" not in args.target:
        raise UsageError(f"db upgrade needs a SQLAlchemy URL, not {args.target!r}")
    before, after = upgrade_database(args.target)
    if before == after:
        print(f"schema already at revision {after}")
    else:
        print(f"schema upgraded from {before or 'empty'} to {after}")
    return 0


# -- spark-replay --------------------------------------------------------------------


def _add_spark_parser(sub: Any) -> None:
    replay = sub.add_parser(
        "spark-replay",
        help="replay patch logs with Spark, writing the state as Parquet or N-Quads",
        description="Replay .jellyp logs (files or directories, in order) on Spark: per quad, the last committed "
        "operation wins. Needs the spark extra (pip install 'patchsync[spark]') and Java 17+.",
    )
    replay.add_argument("logs", nargs="+", metavar="LOG", help=".jellyp logs or directories of them, in log order")
    replay.add_argument("--base", action="append", metavar="SNAPSHOT", help="starting state: .jelly, .nq or .nt")
    replay.add_argument("--out", required=True, metavar="DIR", help="output directory (replaced)")
    replay.add_argument("--master", default="local[2]", help="Spark master URL (default local[2])")
    replay.add_argument("--format", default="parquet", choices=["parquet", "nq"], help="output format")


def _spark_replay(args: argparse.Namespace) -> int:
    import time

    from patchsync.spark import build_session, write_replay

    for path in [*args.logs, *(args.base or [])]:
        if not Path(path).exists():
            raise UsageError(f"{path}: no such file or directory")
    started = time.monotonic()
    spark = build_session(args.master, app_name="patchsync spark-replay", quiet=True)
    try:
        write_replay(spark, args.logs, args.out, base=args.base, fmt=args.format)
    except Exception as exc:
        # Any other job failure arrives as a py4j/pyspark exception carrying both stack
        # traces; the user gets its first line.
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PatchsyncError(f"Spark job failed: {first}") from None
    finally:
        spark.stop()
    print(f"{args.out}: {args.format} written in {time.monotonic() - started:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
