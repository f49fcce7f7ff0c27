"""Stream addresses: ``nats://HOST:PORT/STREAM``.

A patch stream is named by the server to connect to and the JetStream stream that holds
the patches. Patches are published on one subject per stream, ``patchsync.<STREAM>``, so
several patch streams can share a server without their subjects overlapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from patchsync.errors import UsageError

DEFAULT_PORT = 4222
#: The subject prefix patches are published under (``patchsync.<STREAM>``).
SUBJECT_PREFIX = "patchsync."

# JetStream refuses names with whitespace, '.', '*', '>' and path separators (the name
# becomes a directory on the server and a token of API subjects); we accept what is left
# of ASCII, which keeps every name a single subject token.
_STREAM_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}\Z")


@dataclass(frozen=True, slots=True)
class StreamURL:
    """A parsed ``nats://[USER[:PASSWORD]@]HOST[:PORT]/STREAM`` address."""

    host: str
    port: int
    stream: str
    user: str | None = None
    password: str | None = None

    @property
    def server(self) -> str:
        """The server address the client connects to (credentials included)."""
        auth = ""
        if self.user is not None:
            auth = self.user if self.password is None else f"{self.user}:{self.password}"
            auth += "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"nats://{auth}{host}:{self.port}"

    @property
    def subject(self) -> str:
        """The subject the stream's patches are published on."""
        return SUBJECT_PREFIX + self.stream

    def __str__(self) -> str:
        # Never prints a password: this is what log lines and error messages show.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"nats://{host}:{self.port}/{self.stream}"


def is_stream_url(text: str) -> bool:
    """Whether ``text`` names a stream (``nats://...``) rather than a file."""
    return text.lower().startswith("nats://")


def parse_stream_url(text: str) -> StreamURL:
    """Parse ``nats://HOST:PORT/STREAM``; a malformed address is one :class:`UsageError` line."""
    parts = urlsplit(text)
    if parts.scheme.lower() != "nats":
        raise UsageError(f"{text}: not a stream address (expected nats://HOST:PORT/STREAM)")
    if parts.query or parts.fragment:
        raise UsageError(f"{text}: a stream address has no query or fragment (nats://HOST:PORT/STREAM)")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise UsageError(f"{text}: the port must be a number from 1 to 65535") from None
    if not host:
        raise UsageError(f"{text}: the address names no host (nats://HOST:PORT/STREAM)")
    if port == 0:
        raise UsageError(f"{text}: the port must be a number from 1 to 65535")
    stream = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not stream:
        raise UsageError(f"{text}: the address names no stream (nats://HOST:PORT/STREAM)")
    if not _STREAM_NAME.match(stream):
        raise UsageError(
            f"{text}: stream name {stream!r} is not allowed (1 to 200 characters: letters, digits, '_' and '-')"
        )
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return StreamURL(host, port or DEFAULT_PORT, stream, user, password)


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` the rest (one or more tokens)."""
    want = subject.split(".")
    for i, token in enumerate(pattern.split(".")):
        if token == ">":
            return len(want) > i
        if i >= len(want) or (token != "*" and token != want[i]):
            return False
    return len(pattern.split(".")) == len(want)
