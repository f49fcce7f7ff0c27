"""What a failed connection to a served log means: one set of rules for the gRPC and HTTP clients.

The clients of ``patchsync serve`` (:mod:`.grpc_client`, :mod:`.http_client`) meet the same
failures in their own library's words. Each recognises them and words them here, so that
both say the same thing and retry the same ones:

- a connection that fails in a way no retry can fix: the server's certificate is not
  trusted, TLS is spoken on one side only, or another protocol answers on the port
  (:func:`untrusted`, :func:`tls_mismatch`, :func:`wrong_protocol`): one
  :class:`~patchsync.errors.UsageError` line naming the server and what to change;
- anything else that stops a connection (refused, reset, timed out) is
  :func:`unreachable`, a :class:`~patchsync.nats.errors.StreamUnavailable` that the
  tail daemon retries;
- a refusal for want of a credential gets :func:`credential_hint`.

A client that was refused a plaintext connection cannot tell a server speaking TLS from one
going away mid-handshake by the error alone; :func:`speaks_tls` asks the server.
"""

from __future__ import annotations

import socket
import ssl

from patchsync.errors import UsageError
from patchsync.remote.errors import StreamUnavailable

#: The settings a client's credentials come from, as a user sets them: the command line's
#: flag, or the environment variable it sets.
CA_SETTING = "--tls-ca FILE (or PATCHSYNC_TLS_CA)"
CA_NAMES = "--tls-ca (or PATCHSYNC_TLS_CA)"
TOKEN_SETTING = "--token-file FILE (or PATCHSYNC_TOKEN)"
TOKEN_NAMES = "--token-file (or PATCHSYNC_TOKEN)"
#: Seconds :func:`speaks_tls` waits for the connection and the handshake.
PROBE_SECONDS = 2.0


def unreachable(where: str, address: str, why: str) -> StreamUnavailable:
    """The server at ``address`` cannot be reached for now (retrying may help)."""
    return StreamUnavailable(f"{where}: cannot reach the server at {address} ({why})")


def untrusted(where: str, why: str) -> UsageError:
    """The server's certificate did not verify: a setting is wrong, retrying cannot help."""
    return UsageError(
        f"{where}: the server's TLS certificate is not trusted ({why}); give {CA_SETTING} with the CA that signed it"
    )


def tls_mismatch(where: str, address: str, *, server_tls: bool, fix: str) -> UsageError:
    """TLS is spoken on one side only: the server (``server_tls``) or the client."""
    spoken = "speaks TLS" if server_tls else "does not speak TLS"
    return UsageError(f"{where}: the server at {address} {spoken}; {fix}")


def wrong_protocol(where: str, address: str, *, expected: str, answered: str, fix: str) -> UsageError:
    """Another protocol than ``expected`` answered at ``address`` (another door of the server)."""
    return UsageError(f"{where}: the server at {address} does not speak {expected} (it answered {answered}); {fix}")


def credential_hint(*, token_sent: bool) -> str:
    """What to do when the server wants a (different) token."""
    if token_sent:
        return f"check the token given by {TOKEN_NAMES}"
    return f"give a token with {TOKEN_SETTING}"


def speaks_tls(host: str, port: int, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the server at ``host:port`` completes a TLS handshake (its certificate unchecked:
    this only tells what it speaks, nothing is sent over the connection)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2", "http/1.1"])  # a gRPC server wants h2 offered
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ValueError):
        return False


__all__ = [
    "CA_NAMES",
    "CA_SETTING",
    "PROBE_SECONDS",
    "TOKEN_NAMES",
    "TOKEN_SETTING",
    "credential_hint",
    "speaks_tls",
    "tls_mismatch",
    "unreachable",
    "untrusted",
    "wrong_protocol",
]
