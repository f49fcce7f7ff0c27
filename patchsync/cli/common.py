"""What the command modules share: exit codes, error lines, files in and out, targets.

Nothing here imports a heavy stack at module level: ``patchsync --version`` loads this
module, so SQLAlchemy, rdflib and friends are imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from patchsync.errors import PatchsyncError, UsageError
from patchsync.logs.files import replaced_whole

if TYPE_CHECKING:
    from patchsync.apply.target import Target
    from patchsync.options import Limits


class Subcommands(Protocol):
    """What a command module's ``register`` gets: argparse's sub-command table."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


EXIT_ERROR = 1
EXIT_USAGE = 2

#: Container allocations between the collector's youngest-generation passes while a command
#: runs (CPython's default is 700). SQL targets write each batch's quad tuples and drop them;
#: at 700 the passes caught every batch alive, promoted it and rescanned it, and the full
#: collections this fed rescanned every live object: most of the collector's time in
#: an apply into SQL (``python -m bench.apply_workload`` shows it), and little at this value. Targets that keep their quads
#: (``file:``) pay about the same either way (each kept tuple is scanned once), slightly more
#: here, from scanning larger passes. Cycles are still collected, in fewer, larger passes.
COMMAND_GC_THRESHOLD = 20_000


@contextmanager
def paced_collector(threshold: int = COMMAND_GC_THRESHOLD) -> Iterator[None]:
    """Run the body with the collector's first threshold raised to ``threshold``, then restore it.

    The command line owns its process, so it may tune the collector; the library does not
    (an embedding application keeps its own settings). Restored on any exit, so in-process
    callers of :func:`patchsync.cli.main.main` (tests) see the thresholds they had.
    """
    before = gc.get_threshold()
    gc.set_threshold(max(threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


DEFAULT_TARGET = "sqlite:///patchsync.db"
TARGET_HELP = (
    "a SQLAlchemy URL (sqlite:///state.db, postgresql+psycopg://user@host/db), "
    f"file:PATH.trig|.nq|.ttl|.nt, oxigraph:DIR or memory: (default {DEFAULT_TARGET})"
)

#: How the command line spells a library parameter that an error message names
#: (``PatchsyncError.params``): the flag that sets it, given the value.
FLAGS: dict[str, Callable[[object], str]] = {
    "reset": lambda _value: "--reset",
    "once": lambda _value: "--once",
    "chain": lambda value: f"--chain {value}",
    "graph": lambda value: f"--graph {value!r}",
    "retry_timeout": lambda value: f"--retry-timeout {value:g}" if isinstance(value, float) else "--retry-timeout",
    "require_absolute_iris": lambda _value: "--allow-relative-iris",
    "wait": lambda value: f"--wait {value:g}" if isinstance(value, float) else "--wait",
}


def fail(message: str) -> None:
    """Print one error line on stderr."""
    print(f"patchsync: {message}", file=sys.stderr)


def error_line(exc: PatchsyncError) -> str:
    """The error's message with each parameter it names spelled as the flag that sets it."""
    text = str(exc)
    for name, value in exc.params:
        flag = FLAGS.get(name)
        if flag is not None:
            text = text.replace(f"{name}={value!r}", flag(value))
    return text


def read_all(path: str) -> bytes:
    """The whole input: a file, or standard input for ``-``."""
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def refuse_input_as_output(inputs: list[str], output: str) -> None:
    """Refuse an ``output`` that is one of the ``inputs`` by any name (``./x``, a symbolic or
    a hard link): writing it would replace what is being read."""
    if output == "-":
        return
    out = Path(output)
    for name in inputs:
        if name == "-":
            continue
        try:
            same = out.resolve() == Path(name).resolve() or (out.exists() and os.path.samefile(name, out))
        except OSError:
            continue  # an input that cannot be read is reported when it is read
        if same:
            raise UsageError(f"{output}: the output is the input {name}; write it to another file")


def source_name(path: str) -> str:
    """How errors name an input."""
    return "<stdin>" if path == "-" else path


def patch_format(path: str, given: str | None, *, writing: bool = False) -> str:
    """The patch log format of ``path`` (by extension) or ``given`` (``--from``/``--to``)."""
    from patchsync.logs.patch_logs import format_of

    if path == "-" and not given:
        flag = "--to" if writing else "--from"
        raise UsageError(
            f"{'writing standard output' if writing else 'reading standard input'} needs {flag} jellyp|rdfp"
        )
    return format_of(path, given)


def log_files_of(names: list[str]) -> list[str]:
    """The log files ``names`` stand for, in order, for the commands that read logs whole
    (``apply``, ``publish``, ``compact``, ``append``): a directory its ``.jellyp`` segments by file name (the source
    registry's rule, as ``tail`` reads it); one without any is refused."""
    from patchsync.sources import DIRECTORY, resolve_source

    files: list[str] = []
    for name in names:
        source = resolve_source(name)
        if source.kind is DIRECTORY:
            segments = source.log_files()
            if not segments:
                raise UsageError(f"{name}: a directory without .jellyp segments; a directory stands for its segments")
            files += [str(path) for path in segments]
        else:
            files.append(name)
    return files


def check_logs(args: argparse.Namespace, logs: list[str]) -> None:
    """Refuse, before anything is opened, logs ``apply`` cannot read and a ``--base`` that
    is missing or no RDF file; RDF data given as a log is pointed to ``--base``."""
    from patchsync import formats

    for log in logs:
        known = formats.by_suffix(log)
        if not args.from_format and known is not None and known.kind == "rdf":
            raise UsageError(
                f"{log}: {Path(log).suffix} is RDF data (a snapshot or starting state), not a patch log; "
                f"load it with --base {log}"
            )
        patch_format(log, args.from_format)
        if not Path(log).is_file():
            raise UsageError(f"{log}: no such file")
    check_base(args)


def check_base(args: argparse.Namespace) -> None:
    """Refuse a ``--base`` that is missing or not an RDF file, before the target is opened."""
    from patchsync import formats
    from patchsync.sources import is_address

    if not args.base:
        return
    from patchsync.sources import address_snapshot

    if is_address(args.base):
        # A served snapshot, fetched when the base is loaded; a kind without one is refused now.
        address_snapshot(args.base)
        return
    formats.require(args.base, None, formats.RDF_CONVERT, "RDF", nameable=False)
    if not Path(args.base).is_file():
        raise UsageError(f"{args.base}: no such file")


@contextmanager
def output(path: str) -> Iterator[IO[bytes]]:
    """A binary output that appears at ``path`` only if the block succeeds (``-``: stdout)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with replaced_whole(path) as f:
        yield f


def open_target(spec: str, *, existing: bool = False) -> Target:
    """The target named on the command line (see :mod:`patchsync.apply.registry`); with
    ``existing`` (commands that only read it) one that does not exist is refused, not created."""
    from patchsync.apply.registry import open_target as open_registered

    return open_registered(spec, existing=existing)


def close_target(target: Target, *, failed: bool) -> None:
    """Close ``target``; after a failure without committing where the target can."""
    from patchsync.apply.target import discard_target

    if failed:
        discard_target(target)
    else:
        target.close()


def add_target_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default=DEFAULT_TARGET, help=TARGET_HELP)


def add_chain_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chain",
        choices=["strict", "ignore"],
        default="strict",
        help="strict (default): a patch's prev must be the target's last patch id, re-delivered ids are skipped",
    )


def add_relative_iris_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-relative-iris",
        action="store_true",
        help="accept IRIs without a scheme (refused by default: they are the mark of logs joined with cat; "
        "join logs with patchsync append)",
    )


def add_base_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--base",
        metavar="FILE",
        help="first load this RDF file into the empty target: a snapshot (.jelly from patchsync snapshot, "
        "or grpc://HOST:PORT/TOPIC: a served target's snapshot, or http://HOST:PORT/NAME/init: a served "
        "log's bootstrap snapshot) continues after its last patch; .nq/.trig/.rt/.rpb or a .jelly without "
        "position is a starting state the logs are applied on from their beginning",
    )


def load_base(target: Target, args: argparse.Namespace, logs: list[str]) -> None:
    """Load ``--base`` (if given) into ``target`` before the logs; prints one line on stderr."""
    if not args.base:
        return
    from patchsync.apply.base import load_base as load
    from patchsync.sources import address_snapshot, is_address

    if is_address(args.base):
        # A served snapshot, fetched whole first (nothing is loaded from half of one); found by
        # the address's scheme alone, as http://HOST:PORT/NAME/init names no log.
        with tempfile.TemporaryDirectory(prefix="patchsync-base-") as folder:
            path = Path(folder) / "base.jelly"
            address_snapshot(args.base)(args.base, path)
            report = load(target, path, logs, limits=limits(args), name=args.base)
    else:
        report = load(target, args.base, logs, limits=limits(args))
    head = report.position.head if report.position is not None else None
    where = f"continuing after patch {head}" if head else "no position: logs apply from their start"
    print(f"{args.base}: base of {report.quads} quads loaded, {where}", file=sys.stderr)


def limits(args: argparse.Namespace) -> Limits:
    """Decoder limits from the flags of ``apply``, ``tail`` and ``append``."""
    from patchsync.options import Limits

    return Limits(require_absolute_iris=not args.allow_relative_iris)


def result_line(r: Any) -> str:
    """One line for an :class:`~patchsync.apply.applier.ApplyResult`."""
    line = f"{r.patches} patches applied, {r.units} units ({r.added} added, {r.deleted} deleted, {r.noop} no-op)"
    if r.aborted:
        line += f", {r.aborted} aborted"
    if r.skipped:
        line += f", {r.skipped} re-delivered skipped"
    if r.replayed:
        line += f", {r.replayed} events already applied"
    return line


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """``--token-file`` and ``--tls-ca``: credentials for a network source (``grpc://``, ``http(s)://``)."""
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the token for a grpc:// or http(s):// source (or set PATCHSYNC_TOKEN)",
    )
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="PEM CA certificate: reach a grpc:// or https:// source over TLS (or set PATCHSYNC_TLS_CA to the file)",
    )


def use_client_flags(args: argparse.Namespace) -> None:
    """Hand ``--token-file`` / ``--tls-ca`` to the network clients (they read the environment).

    A flag wins over the environment: with ``--token-file``, a ``PATCHSYNC_TOKEN`` set in the
    shell is not used (the clients read the token itself first)."""
    import os

    if getattr(args, "token_file", None):
        os.environ.pop("PATCHSYNC_TOKEN", None)
        os.environ["PATCHSYNC_TOKEN_FILE"] = args.token_file
    if getattr(args, "tls_ca", None):
        os.environ["PATCHSYNC_TLS_CA"] = args.tls_ca
