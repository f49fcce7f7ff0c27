"""``patchsync publish LOG... DEST``: a log's patches into a NATS stream or a served topic."""

from __future__ import annotations

import argparse
import time

from patchsync.cli.common import (
    Subcommands,
    add_client_flags,
    add_relative_iris_flag,
    limits,
    log_files_of,
    use_client_flags,
)
from patchsync.errors import UsageError


def destinations() -> str:
    """Where publish can append, as the source registry writes the kinds that can."""
    from patchsync.sources import APPEND, address_forms

    return ", ".join(address_forms(APPEND))


def register(sub: Subcommands) -> None:
    publish = sub.add_parser(
        "publish",
        help="publish patch logs to a NATS stream or a served topic (grpc://, http://)",
        description="Publish every complete patch of the logs (.jellyp or .rdfp), in order, one patch per message, "
        "to the destination (a NATS stream is created when missing). Each patch is appended only if its prev is the "
        "destination's last patch (on NATS it carries its id as Nats-Msg-Id): a rerun (or a run after kill -9) "
        "continues where the destination ends and publishes nothing twice; a patch that does not follow its head is "
        "refused (exit 1). A patch is never split: one larger than the server's message limit is refused (exit 2), "
        "the patches before it stay published.",
    )
    publish.add_argument(
        "args",
        nargs="+",
        metavar="LOG... DEST",
        help=f"patch logs (a directory: its .jellyp segments in file-name order), then where to publish: "
        f"{destinations()}",
    )
    publish.add_argument(
        "--replicas",
        type=int,
        default=1,
        metavar="N",
        help="servers holding a new stream (1-5, default 1; >1 needs a cluster)",
    )
    publish.add_argument("--max-age", type=float, metavar="S", help="a new stream drops patches older than S seconds")
    publish.add_argument("--max-bytes", type=int, metavar="B", help="a new stream keeps at most B bytes (oldest go)")
    publish.add_argument("--max-msgs", type=int, metavar="N", help="a new stream keeps at most N patches (oldest go)")
    publish.add_argument(
        "--duplicate-window",
        type=float,
        metavar="S",
        help="seconds a new stream recognises a resent patch by its id alone (server default 120)",
    )
    publish.add_argument("--no-create", action="store_true", help="fail if the stream does not exist")
    add_relative_iris_flag(publish)
    add_client_flags(publish)
    publish.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    use_client_flags(args)
    from pathlib import Path

    from patchsync.remote.publish import StreamSettings
    from patchsync.sources import APPEND, is_address, resolve_source

    *names, address = args.args
    if not names or not is_address(address):
        raise UsageError(f"publish needs LOG... then where to publish: {destinations()}")
    for name in names:
        if is_address(name):
            raise UsageError(f"{name}: publish takes one destination, the last argument")
    logs = log_files_of(names)
    for log in logs:
        if not Path(log).is_file():
            raise UsageError(f"{log}: no such file")
    if args.replicas < 1 or args.replicas > 5:
        raise UsageError(f"--replicas {args.replicas}: a stream has 1 to 5 replicas")
    destination = resolve_source(address).require(APPEND, "publish")
    publish_logs = destination.publish()
    url = destination.address
    settings = StreamSettings(
        create=not args.no_create,
        replicas=args.replicas,
        max_age=args.max_age,
        max_bytes=args.max_bytes,
        max_msgs=args.max_msgs,
        duplicate_window=args.duplicate_window,
    )
    started = time.monotonic()
    report = publish_logs(logs, url, settings=settings, limits=limits(args))
    elapsed = time.monotonic() - started
    print(
        f"{url}: {report.published} patches published, {report.skipped} already in the stream; "
        f"head {report.head or '-'} (sequence {report.last_seq}) in {elapsed:.2f}s"
    )
    return 0
