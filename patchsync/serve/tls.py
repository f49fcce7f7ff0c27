"""The server's TLS certificate and key: read and checked once, before any door listens.

Both doors serve the same certificate; a file that cannot be used stops the server at start
with one line naming the file and what is wrong with it (missing, unreadable, not PEM, a key
that does not match the certificate), instead of each door's library failing in its own
words later ("Failed to bind", "[SSL] PEM lib").
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from patchsync.errors import UsageError

_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_PRIVATE_KEY = b"PRIVATE KEY-----"


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A certificate chain and its private key, as PEM, checked to work together."""

    cert: Path
    key: Path
    cert_pem: bytes
    key_pem: bytes

    def ssl_context(self) -> ssl.SSLContext:
        """A server-side context serving this certificate."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.cert), str(self.key), password=_no_password)
        return context


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from None


def load_tls(cert: Path, key: Path) -> ServerTls:
    """The certificate ``cert`` and key ``key`` (PEM files), checked; one line naming the
    file otherwise."""
    cert_pem, key_pem = _read(cert, "--tls-cert"), _read(key, "--tls-key")
    if _CERTIFICATE not in cert_pem:
        raise UsageError(f"--tls-cert {cert}: not a PEM certificate (no '-----BEGIN CERTIFICATE-----' line)")
    try:
        # The certificates alone first, so a broken one is told apart from a broken key.
        ssl.create_default_context().load_verify_locations(cadata=cert_pem.decode("ascii", "replace"))
    except ssl.SSLError:
        raise UsageError(f"--tls-cert {cert}: a certificate in it cannot be read (broken PEM)") from None
    if _PRIVATE_KEY not in key_pem:
        raise UsageError(f"--tls-key {key}: not a PEM private key (no '-----BEGIN ... PRIVATE KEY-----' line)")
    tls = ServerTls(cert, key, cert_pem, key_pem)
    try:
        tls.ssl_context()
    except _Encrypted:
        raise UsageError(
            f"--tls-key {key}: the key is encrypted; give it unencrypted (readable by this user only)"
        ) from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise UsageError(f"--tls-key {key}: not the private key of the certificate in --tls-cert {cert}") from None
        raise UsageError(f"--tls-key {key}: the private key cannot be read (broken PEM)") from None
    return tls


class _Encrypted(Exception):
    """The key asks for a password (the server never prompts for one)."""


def _no_password() -> bytes:
    raise _Encrypted


__all__ = ["ServerTls", "load_tls"]
