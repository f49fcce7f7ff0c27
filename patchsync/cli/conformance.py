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
    conformance.add_argument(
        "--coverage",
        action="store_true",
        help="also report coverage rule by rule: cases, passed and failed per rule, rules with no case",
    )
    conformance.add_argument(
        "--rules",
        action="append",
        metavar="FILE",
        help="the rules file for --coverage (default: rules.ttl next to each manifest or one directory up)",
    )
    conformance.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from patchsync.conformance import find_rules_files, format_coverage, load_rules, rule_coverage, run_manifests

    rules = []
    if args.coverage:
        files = [Path(p) for p in args.rules] if args.rules else find_rules_files(Path(m) for m in args.manifests)
        # Rules files are read first: a bad one is reported before the suite runs.
        rules = [rule for path in files for rule in load_rules(path)]
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
    if args.coverage:
        print(format_coverage(rule_coverage(report, rules)))
    print(line)
    return 0 if report.failed == 0 else EXIT_ERROR
