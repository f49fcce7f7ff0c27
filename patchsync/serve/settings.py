"""The settings of one ``patchsync serve`` process: listeners, security and limits.

Limits belong to the process, not to a front door (docs/decisions/0001-serve-and-topics.md):
every door refuses a message over :attr:`ServeSettings.max_message_bytes`, counts its
streams against :attr:`ServeSettings.max_streams`, and gives each subscriber a queue of
:attr:`ServeSettings.subscriber_buffer` patches, beyond which the subscriber reads from
the log again instead of holding more in memory.

A listener on an address other than loopback needs tokens (``--tokens``) or an explicit
``--allow-anonymous``: :meth:`ServeSettings.check` refuses it otherwise.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from patchsync.errors import UsageError
from patchsync.serve.auth import Tokens
from patchsync.serve.doors import door_flags

#: Largest message (one patch, one frame) a door accepts or sends, in bytes.
DEFAULT_MAX_MESSAGE_BYTES = 16 << 20
#: Concurrent streams (subscriptions and publishes) over every door.
DEFAULT_MAX_STREAMS = 256
#: Patches queued for one live subscriber before it falls back to reading the log.
DEFAULT_SUBSCRIBER_BUFFER = 1024
#: Seconds in-flight requests get to finish after SIGTERM.
DEFAULT_GRACE = 10.0


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
    fsync: bool = False
    #: Where ``/metrics`` is served on its own (``None``: only by a door that serves it).
    metrics: Address | None = None
    #: A directory whose subdirectories are served as segment-directory log topics, one per
    #: name, and where new ones are created (RDF Delta's ``create_datasource``).
    log_root: Path | None = None

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
        for value, name in ((self.max_message_bytes, "max message bytes"), (self.max_streams, "max streams")):
            if value < 1:
                raise UsageError(f"{name} {value}: must be at least 1")
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
    "DEFAULT_GRACE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_SUBSCRIBER_BUFFER",
    "Address",
    "ServeSettings",
    "parse_address",
]
