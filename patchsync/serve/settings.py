"""The settings of one ``patchsync serve`` process: listeners, security and limits.

Limits belong to the process, not to a front door (docs/decisions/0001-serve-and-topics.md):
every door refuses a message over :attr:`ServeSettings.max_message_bytes`, counts its
streams against :attr:`ServeSettings.max_streams`, and gives each subscriber a queue of
:attr:`ServeSettings.subscriber_buffer` patches, beyond which the subscriber reads from
the log again instead of holding more in memory. Timeouts bound every wait on a client:
for its headers, its body (at a minimum rate), between its requests, and for it to take
what is sent to it (docs/serving.md, "Limits and timeouts").

A listener on an address other than loopback needs tokens (``--tokens``) or an explicit
``--allow-anonymous``: :meth:`ServeSettings.check` refuses it otherwise.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchsync.errors import UsageError
from patchsync.serve.auth import Tokens
from patchsync.serve.doors import door_flags

if TYPE_CHECKING:
    from patchsync.serve.topics import TopicOptions

#: Largest message (one patch, one frame) a door accepts or sends, in bytes.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
#: Concurrent streams (subscriptions and publishes) over every door.
DEFAULT_MAX_STREAMS = 256
#: Patches queued for one live subscriber before it falls back to reading the log.
DEFAULT_SUBSCRIBER_BUFFER = 1024
#: Seconds in-flight requests get to finish after SIGTERM.
DEFAULT_GRACE = 10.0
#: Seconds a request's line and headers may take to arrive, from their first byte (gRPC:
#: a connection's handshake).
DEFAULT_HEADER_TIMEOUT = 10.0
#: Seconds a request body may take beyond what the minimum rate allows it (gRPC: the
#: wait for the next message of a publish stream).
DEFAULT_BODY_TIMEOUT = 30.0
#: Bytes a second a request body must arrive at, on average, once the body timeout is used up.
DEFAULT_MIN_BODY_RATE = 16 << 10
#: Seconds a connection with no request in progress stays open.
DEFAULT_IDLE_TIMEOUT = 60.0
#: Seconds a reader (subscriber, change feed, snapshot) may take nothing while something
#: waits to be sent to it, before it is dropped.
DEFAULT_SEND_TIMEOUT = 60.0
#: Connections one client address may hold open to the HTTP door at once.
DEFAULT_MAX_CLIENT_CONNECTIONS = 64


def default_index_dir() -> Path:
    """Where ``serve`` keeps the id indexes of NATS stream topics unless told:
    ``$XDG_CACHE_HOME/patchsync/nats-index`` (``~/.cache`` when unset). They are a cache:
    each is checked against its stream and built again when it does not match."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "patchsync" / "nats-index"


@dataclass(frozen=True, slots=True)
class Address:
    """A ``HOST:PORT`` to listen on (port 0: any free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        """Whether only this machine can reach the address."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name other than localhost may resolve to anything


def parse_address(text: str, flag: str = "--listen") -> Address:
    """``HOST:PORT`` or ``[V6]:PORT`` as an :class:`Address`; anything else is one error line."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{flag} {text}: expected HOST:PORT (a port from 0 to 65535)")
    return Address(host, int(port))


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Everything a serve process is started with, parsed."""

    #: Front door name (``grpc``, ``http``, ...) -> where it listens.
    listeners: Mapping[str, Address]
    #: ``NAME=SPEC`` of each topic, as given.
    topics: tuple[str, ...]
    tokens: Tokens = field(default_factory=Tokens)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    allow_anonymous: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_streams: int = DEFAULT_MAX_STREAMS
    subscriber_buffer: int = DEFAULT_SUBSCRIBER_BUFFER
    grace: float = DEFAULT_GRACE
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    min_body_rate: int = DEFAULT_MIN_BODY_RATE
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    max_client_connections: int = DEFAULT_MAX_CLIENT_CONNECTIONS
    fsync: bool = False
    #: Where ``/metrics`` is served on its own (``None``: only by a door that serves it).
    metrics: Address | None = None
    #: A directory whose subdirectories are served as segment-directory log topics, one per
    #: name, and where new ones are created (RDF Delta's ``create_datasource``).
    log_root: Path | None = None
    #: Where the id indexes of NATS stream topics are kept (``None``: in memory, each
    #: stream read whole at every start); :func:`default_index_dir` unless given.
    index_dir: Path | None = field(default_factory=default_index_dir)

    @property
    def topic_options(self) -> TopicOptions:
        """How the process's log topics run."""
        # Imported here: the command line reads these settings' defaults without the codec.
        from patchsync.serve.topics import TopicOptions

        return TopicOptions(subscriber_buffer=self.subscriber_buffer, fsync=self.fsync, index_dir=self.index_dir)

    @property
    def tls(self) -> bool:
        """Whether the listeners speak TLS."""
        return self.tls_cert is not None

    def check(self) -> ServeSettings:
        """Refuse settings that cannot work, or would expose the topics without tokens."""
        if not self.listeners:
            raise UsageError(f"serve needs a listener: {door_flags()}")
        if not self.topics and self.log_root is None:
            raise UsageError("serve needs at least one --topic NAME=SPEC, or --log-root DIR")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise UsageError("--tls-cert and --tls-key go together")
        for value, name in (
            (self.max_message_bytes, "--max-message-bytes"),
            (self.max_streams, "--max-streams"),
            (self.max_client_connections, "--max-client-connections"),
            (self.min_body_rate, "--min-body-rate"),
        ):
            if value < 1:
                raise UsageError(f"{name} {value}: must be at least 1")
        for seconds, name in (
            (self.header_timeout, "--header-timeout"),
            (self.body_timeout, "--body-timeout"),
            (self.idle_timeout, "--idle-timeout"),
            (self.send_timeout, "--send-timeout"),
        ):
            if not seconds > 0:
                raise UsageError(f"{name} {seconds:g}: must be more than 0 seconds")
        if self.subscriber_buffer < 1:
            raise UsageError(f"subscriber buffer {self.subscriber_buffer}: must be at least 1")
        if not self.tokens.required and not self.allow_anonymous:
            for door, address in sorted(self.listeners.items()):
                if not address.is_loopback:
                    raise UsageError(
                        f"{door} listener {address}: not a loopback address and no --tokens; "
                        "give --tokens FILE, or --allow-anonymous to serve anyone who can connect"
                    )
        # The separate metrics listener checks no token, so tokens do not make it safe to
        # open to the network: only an explicit --allow-anonymous does.
        if self.metrics is not None and not self.metrics.is_loopback and not self.allow_anonymous:
            raise UsageError(
                f"--metrics {self.metrics}: not a loopback address, and /metrics there checks no token; "
                "give --allow-anonymous to serve it to anyone who can connect"
            )
        return self


__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_GRACE",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_CLIENT_CONNECTIONS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MIN_BODY_RATE",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SUBSCRIBER_BUFFER",
    "Address",
    "ServeSettings",
    "default_index_dir",
    "parse_address",
]
