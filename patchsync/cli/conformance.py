"""``patchsync conformance MANIFEST...``: run Jelly conformance manifests."""

from __future__ import annotations

import argparse

from patchsync.cli.common import EXIT_ERROR, Subcommands


def register(sub: Subcommands) -> None:
    conformance = sub.add_parser(
        "conformance",
        help="run conformance test manifests",
        description="Run Jelly conformance manifests; ends with the line 'N passed, M failed'.",
    )
    conformance.add_argument("manifests", nargs="+", help="manifest.ttl files")
    conformance.add_argument("-v", "--verbose", action="store_true", help="list every case, not only failures")
    conformance.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
