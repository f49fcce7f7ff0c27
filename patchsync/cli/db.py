"""``patchsync db upgrade TARGET``: migrate a SQL target's schema."""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands
from patchsync.errors import UsageError


def register(sub: Subcommands) -> None:
    db = sub.add_parser("db", help="manage a SQL target's schema", description="Manage a SQL target's schema.")
    db_sub = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    upgrade = db_sub.add_parser("upgrade", help="upgrade the schema to the newest revision")
    upgrade.add_argument("target", metavar="TARGET", help="a SQLAlchemy URL")
    upgrade.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if "://" not in args.target:
        raise UsageError(f"db upgrade needs a SQLAlchemy URL, not {args.target!r}")
    from patchsync.apply.targets.sql import upgrade_database

    before, after = upgrade_database(args.target)
    if before == after:
        print(f"schema already at revision {after}")
    else:
        print(f"schema upgraded from {before or 'empty'} to {after}")
    return 0
