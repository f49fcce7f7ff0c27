"""Bearer tokens: the one check both front doors make before any topic operation.

A tokens file holds one grant per line, ``read TOKEN`` or ``write TOKEN`` (``write``
implies ``read``); blank lines and lines starting with ``#`` are ignored. A server without
a tokens file lets every request read and write (it then listens on loopback only, unless
told otherwise: :mod:`patchsync.serve.settings`). Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from patchsync.errors import UsageError
from patchsync.serve.errors import Forbidden, Unauthenticated


class Access(IntEnum):
    """What a request may do; a higher grant includes the lower ones."""

    READ = 1
    WRITE = 2


_GRANTS = {"read": Access.READ, "write": Access.WRITE}


@dataclass(frozen=True, slots=True)
class Tokens:
    """The tokens a server accepts, each with its grant (``None``: no tokens, all allowed)."""

    grants: tuple[tuple[bytes, Access], ...] | None = None

    @property
    def required(self) -> bool:
        """Whether requests must present a token."""
        return self.grants is not None

    def check(self, token: str | None, needed: Access, what: str) -> None:
        """Refuse a request needing ``needed`` with ``token`` (``None``: none presented).

        :class:`Unauthenticated` when a token is required and missing or unknown,
        :class:`Forbidden` when it is known but grants less than ``needed``; ``what``
        names the request in the message.
        """
        if self.grants is None:
            return
        if not token:
            raise Unauthenticated(f"{what}: a token is required (authorization: Bearer TOKEN)")
        # A header's bytes that are not UTF-8 arrive as lone surrogates (aiohttp decodes
        # them with surrogateescape): encoded as they are, they match no token of the file
        # (UTF-8 text), so such a token is unknown, not a fault of the server.
        presented = token.encode("utf-8", "surrogatepass")
        granted: Access | None = None
        # Every entry is compared, so the time taken does not tell which one matched.
        for secret, access in self.grants:
            if hmac.compare_digest(secret, presented) and (granted is None or access > granted):
                granted = access
        if granted is None:
            raise Unauthenticated(f"{what}: the token is not known to this server")
        if granted < needed:
            raise Forbidden(f"{what}: the token may {granted.name.lower()} only, this needs {needed.name.lower()}")


def bearer(header: str | None) -> str | None:
    """The token of an ``authorization`` value ``Bearer TOKEN`` (``None`` if absent or another scheme)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def load_tokens(path: str | os.PathLike[str] | None) -> Tokens:
    """The tokens of the file ``path`` (``None``: no tokens); a malformed line is one error line."""
    if path is None:
        return Tokens()
    grants: list[tuple[bytes, Access]] = []
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the tokens file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: the tokens file is not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2 or words[0] not in _GRANTS:
            raise UsageError(f"{path} line {number}: expected 'read TOKEN' or 'write TOKEN'")
        grants.append((words[1].encode("utf-8"), _GRANTS[words[0]]))
    if not grants:
        raise UsageError(f"{path}: the tokens file holds no token")
    return Tokens(tuple(grants))


__all__ = ["Access", "Tokens", "bearer", "load_tokens"]
