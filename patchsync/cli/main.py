"""The ``patchsync`` command line: the top-level parser, the command table and dispatch.

Each command lives in a module of this package (``register(sub)`` adds its parsers,
``run(args)`` does the work); this module only routes to them and turns errors into one
line on stderr and an exit code, never a traceback. The command modules are imported when
the parser is built, and each imports its heavy stacks (rdflib, SQLAlchemy, Spark) only when
it runs, so ``patchsync --version`` and commands that need none of them start quickly.

A command whose output is a pipe closed early (``patchsync dump | head``) stops quietly with
:data:`EXIT_CLOSED_PIPE`, as a Unix tool the closed pipe stops does.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import signal
import sys
from collections.abc import Sequence

from patchsync import __version__
from patchsync.cli.common import EXIT_ERROR, EXIT_USAGE, error_line, fail, paced_collector
from patchsync.errors import PatchsyncError, UsageError, missing_extra

#: The exit status of a command whose output was closed before it finished: 128 + SIGPIPE,
#: what a shell reports for a Unix tool a closed pipe stopped (``set -o pipefail`` sees it).
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE

#: The command modules, in the order ``--help`` lists their commands.
COMMANDS = (
    "convert",
    "inspect",
    "conformance",
    "apply",
    "dump",
    "status",
    "tail",
    "db",
    "diff",
    "spark",
    "append",
    "ingest",
    "publish",
    "compact",
    "snapshot",
    "serve",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every command module registered."""
    parser = argparse.ArgumentParser(prog="patchsync", description="RDF Patch replication engine.")
    parser.add_argument("--version", action="version", version=f"patchsync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"patchsync.cli.{name}").register(sub)
    for command in set(sub.choices.values()):
        # An unknown flag is reported with the usage of the command it was given to.
        command.set_defaults(command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``patchsync`` command."""
    # rdflib logs a traceback for every ill-typed literal; a user sees one-line errors only.
    logging.getLogger("rdflib").setLevel(logging.ERROR)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with paced_collector():
            code: int = args.func(args)
        # What is still buffered goes now: a closed pipe shows here, not at interpreter exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError as exc:
        if not output_closed():
            fail(os_error_line(exc))
            return EXIT_ERROR
        # The interpreter flushes stdout once more at exit: let that go nowhere, silently.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    except UsageError as exc:
        fail(error_line(exc))
        return EXIT_USAGE
    except PatchsyncError as exc:
        fail(error_line(exc))
        return EXIT_ERROR
    except OSError as exc:
        fail(os_error_line(exc))
        return EXIT_ERROR
    except ImportError as exc:
        # Commands import what they use when they run: an extra that is not installed.
        missing = missing_extra(exc, f"patchsync {args.command}")
        if missing is None:
            raise
        fail(str(missing))
        return EXIT_USAGE
    except KeyboardInterrupt:
        fail("interrupted")
        return 130


def os_error_line(exc: OSError) -> str:
    """An operating system error as one line, naming the file it concerns."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"


def output_closed() -> bool:
    """Whether standard output or error is a pipe whose reader has gone (poll says POLLERR)."""
    poller = select.poll()
    for stream in (sys.stdout, sys.stderr):
        try:
            poller.register(stream.fileno(), select.POLLOUT)
        except (OSError, ValueError):  # closed, or replaced by an object without a descriptor
            continue
    return any(events & select.POLLERR for _fd, events in poller.poll(0))
