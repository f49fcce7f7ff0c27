"""``patchsync serve --listen HOST:PORT --topic NAME=SPEC ...``: topics over the network.

One process serves every front door given (``--listen`` for gRPC; other doors add their
own flag through :func:`patchsync.serve.app.register_door`) over the same topics.
"""

from __future__ import annotations

import argparse

from patchsync.cli.common import Subcommands


def register(sub: Subcommands) -> None:
    """Add the ``serve`` parser."""
    from patchsync.serve.doors import DOORS
    from patchsync.serve.settings import (
        DEFAULT_BODY_TIMEOUT,
        DEFAULT_GRACE,
        DEFAULT_HEADER_TIMEOUT,
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_CLIENT_CONNECTIONS,
        DEFAULT_MAX_MESSAGE_BYTES,
        DEFAULT_MAX_STREAMS,
        DEFAULT_MIN_BODY_RATE,
        DEFAULT_SEND_TIMEOUT,
        DEFAULT_SUBSCRIBER_BUFFER,
    )

    parser = sub.add_parser(
        "serve",
        help="serve patch logs and targets over the network (Jelly gRPC, Jelly-Patch, RDF Delta HTTP)",
        description="Serve named topics: a log topic (a .jellyp file, a directory of segments created when "
        "missing, or nats://HOST:PORT/STREAM) takes appends that keep its chain and streams its patches, caught "
        "up then live; a target topic (sqlite:///..., postgresql+psycopg://..., file:..., oxigraph:...) is served "
        "read-only as snapshots. Without --tokens only loopback addresses are served unless --allow-anonymous. "
        "SIGTERM: publishes in flight finish or are refused whole, subscriptions end cleanly, exit 0.",
    )
    for kind in sorted(DOORS.values(), key=lambda k: k.name):
        parser.add_argument(kind.flag, metavar="HOST:PORT", dest=f"door_{kind.name}", help=kind.help)
    parser.add_argument("--topic", action="append", default=[], metavar="NAME=SPEC", help="a topic (repeat for more)")
    parser.add_argument("--tokens", metavar="FILE", help="lines 'read TOKEN' or 'write TOKEN' (write implies read)")
    parser.add_argument("--tls-cert", metavar="FILE", help="PEM certificate chain (with --tls-key): serve TLS")
    parser.add_argument("--tls-key", metavar="FILE", help="PEM private key of --tls-cert")
    parser.add_argument("--allow-anonymous", action="store_true", help="serve a non-loopback address without --tokens")
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        metavar="B",
        help=f"largest message, in bytes (default {DEFAULT_MAX_MESSAGE_BYTES}: {DEFAULT_MAX_MESSAGE_BYTES >> 20} MiB)",
    )
    parser.add_argument(
        "--max-streams",
        type=int,
        default=DEFAULT_MAX_STREAMS,
        metavar="N",
        help=f"concurrent streams, all doors (default {DEFAULT_MAX_STREAMS})",
    )
    parser.add_argument(
        "--subscriber-buffer",
        type=int,
        default=DEFAULT_SUBSCRIBER_BUFFER,
        metavar="N",
        help=f"patches queued per live subscriber (a slower one reads the log again instead; default "
        f"{DEFAULT_SUBSCRIBER_BUFFER})",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="S",
        help=f"seconds requests in flight get at SIGTERM (default {DEFAULT_GRACE:g})",
    )
    timeouts = parser.add_argument_group("limits on clients (docs/serving.md, 'Limits and timeouts')")
    timeouts.add_argument(
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="S",
        help=f"seconds a request's headers may take from their first byte (default {DEFAULT_HEADER_TIMEOUT:g})",
    )
    timeouts.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT,
        metavar="S",
        help=f"seconds a request body may take beyond what --min-body-rate allows (default {DEFAULT_BODY_TIMEOUT:g})",
    )
    timeouts.add_argument(
        "--min-body-rate",
        type=int,
        default=DEFAULT_MIN_BODY_RATE,
        metavar="B",
        help=f"bytes a second a request body must arrive at (default {DEFAULT_MIN_BODY_RATE})",
    )
    timeouts.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="S",
        help=f"seconds a connection with no request stays open (default {DEFAULT_IDLE_TIMEOUT:g})",
    )
    timeouts.add_argument(
        "--send-timeout",
        type=float,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="S",
        help=f"seconds a reader may take nothing before it is dropped (default {DEFAULT_SEND_TIMEOUT:g})",
    )
    timeouts.add_argument(
        "--max-client-connections",
        type=int,
        default=DEFAULT_MAX_CLIENT_CONNECTIONS,
        metavar="N",
        help=f"HTTP connections one client address may hold (default {DEFAULT_MAX_CLIENT_CONNECTIONS})",
    )
    parser.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics at /metrics there")
    parser.add_argument("--fsync", action="store_true", help="fsync a log topic after every append")
    parser.add_argument(
        "--log-root",
        metavar="DIR",
        help="serve every subdirectory of DIR as a log topic of that name, and create new ones there "
        "(RDF Delta's create_datasource; remove_datasource moves one to DIR/.removed)",
    )
    parser.add_argument(
        "--index-dir",
        metavar="DIR",
        help="where the patch id index of each nats:// topic is kept, so that a restart reads only what the "
        "stream gained meanwhile (default $XDG_CACHE_HOME/patchsync/nats-index, ~/.cache when unset; a cache: "
        "checked against its stream, built again when it does not match)",
    )
    parser.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> object:
    """The :class:`~patchsync.serve.settings.ServeSettings` the flags give."""
    from pathlib import Path

    from patchsync.serve.auth import load_tokens
    from patchsync.serve.doors import DOORS
    from patchsync.serve.settings import ServeSettings, default_index_dir, parse_address

    listeners = {}
    for kind in DOORS.values():
        value = getattr(args, f"door_{kind.name}", None)
        if value:
            listeners[kind.name] = parse_address(value, kind.flag)
    return ServeSettings(
        listeners=listeners,
        topics=tuple(args.topic),
        tokens=load_tokens(args.tokens),
        tls_cert=Path(args.tls_cert) if args.tls_cert else None,
        tls_key=Path(args.tls_key) if args.tls_key else None,
        allow_anonymous=args.allow_anonymous,
        max_message_bytes=args.max_message_bytes,
        max_streams=args.max_streams,
        subscriber_buffer=args.subscriber_buffer,
        grace=args.grace,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
        min_body_rate=args.min_body_rate,
        idle_timeout=args.idle_timeout,
        send_timeout=args.send_timeout,
        max_client_connections=args.max_client_connections,
        fsync=args.fsync,
        metrics=parse_address(args.metrics, "--metrics") if args.metrics else None,
        log_root=Path(args.log_root) if args.log_root else None,
        index_dir=Path(args.index_dir) if args.index_dir else default_index_dir(),
    ).check()


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT."""
    import gc

    from patchsync.serve.app import serve
    from patchsync.serve.settings import ServeSettings

    settings = settings_from(args)
    assert isinstance(settings, ServeSettings)
    # The command line paces the collector for batch commands; a server runs for weeks and
    # decodes patches whose decoders are cycles holding their last terms (a large literal
    # among them), so it collects at Python's own pace: its memory follows its load.
    gc.set_threshold(*SERVER_GC_THRESHOLDS)
    return serve(settings)


#: Python's default collector thresholds.
SERVER_GC_THRESHOLDS = (700, 10, 10)
