"""A SPARQL store behind HTTPS and credentials: the real Oxigraph server behind an aiohttp
reverse proxy of the tests (``sparql_helpers.AuthProxy``) that checks ``Authorization`` and
speaks TLS with a self-signed certificate made here (``serve_helpers.self_signed``).

- HTTP Basic, RFC 7617 §2 (https://www.rfc-editor.org/rfc/rfc7617#section-2): ``Basic
  base64(user ":" password)``; a bearer token, RFC 6750 §2.1
  (https://www.rfc-editor.org/rfc/rfc6750#section-2.1): ``Bearer TOKEN``.
- A refusal is 401 with ``WWW-Authenticate`` (RFC 9110 §11.6.1,
  https://www.rfc-editor.org/rfc/rfc9110#section-11.6.1); patchsync answers no challenge, so
  HTTP Digest (RFC 7616) is not spoken: such a store is refused in one line that says so.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget
from patchsync.apply.registry import open_target
from patchsync.errors import ApplyError, is_transient

from .apply_helpers import apply_text, state
from .serve_helpers import self_signed
from .sparql_helpers import AuthProxy

PATCHSYNC = [sys.executable, "-m", "patchsync"]
S, P = "<http://e/s>", "<http://e/p>"
LOG = f'H id <urn:1> .\nA {S} {P} "a" .\nA _:b {P} "b" <http://e/g> .\n'
USER, PASSWORD, TOKEN = "replica", "pa55-word-xyz", "tok-9f8e7d6c"
BASIC = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PATCHSYNC, *args], capture_output=True, text=True, timeout=600)


@pytest.fixture
def secrets(tmp_path: Path) -> dict[str, Path]:
    files = {"password": PASSWORD, "token": TOKEN, "wrong-password": "not-the-password", "wrong-token": "tok-wrong"}
    for name, value in files.items():
        (tmp_path / name).write_text(value + "\n")
    return {name: tmp_path / name for name in files}


@pytest.fixture
def proxy(oxigraph_server: Any, tmp_path: Path) -> Iterator[tuple[AuthProxy, Path]]:
    """The HTTPS proxy in front of the Oxigraph server, and the certificate to trust (ca=)."""
    cert, key = self_signed(tmp_path)
    upstream = f"http://127.0.0.1:{oxigraph_server.http_port}"
    with AuthProxy(upstream, {BASIC, f"Bearer {TOKEN}"}, cert=cert, key=key) as running:
        yield running, cert


def spec(proxy: AuthProxy, **options: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    return f"sparql+https://127.0.0.1:{proxy.port}?layout=oxigraph{extra}"


def test_basic_and_bearer_are_accepted_over_tls_with_ca(proxy: Any, secrets: dict[str, Path]) -> None:
    server, ca = proxy
    basic = open_target(spec(server, ca=str(ca), user=USER, **{"password-file": str(secrets["password"])}))
    apply_text(LOG, basic)
    assert state(basic)[0] == state(_reference())[0]
    basic.close()
    bearer = spec(server, ca=str(ca), **{"token-file": str(secrets["token"])})
    status = cli("status", "--target", bearer)
    assert status.returncode == 0 and "last id urn:1;" in status.stdout, status.stderr
    dump = cli("dump", "--target", bearer)
    assert dump.returncode == 0 and '"b"' in dump.stdout, dump.stderr
    assert server.refused == 0


def _reference() -> MemoryTarget:
    target = MemoryTarget()
    apply_text(LOG, target)
    return target


@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ({"user": USER, "password-file": "wrong-password"}, "not-the-password"),
        ({"user": "intruder", "password-file": "password"}, PASSWORD),
        ({"token-file": "wrong-token"}, "tok-wrong"),
        ({}, TOKEN),
    ],
    ids=["wrong-password", "wrong-user", "wrong-token", "none"],
)
def test_refused_credentials_are_one_line_that_shows_none(
    proxy: Any, secrets: dict[str, Path], tmp_path: Path, options: dict[str, str], shown: str
) -> None:
    server, ca = proxy
    named = {k: (str(secrets[v]) if k.endswith("-file") else v) for k, v in options.items()}
    log = tmp_path / "a.rdfp"
    log.write_text(LOG)
    done = cli("apply", str(log), "--target", spec(server, ca=str(ca), **named), "--no-progress")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "HTTP 401" in line and "authentication failed" in line, line
    everything = done.stdout + done.stderr
    for secret in (shown, PASSWORD, TOKEN, BASIC.split()[1], base64.b64encode(shown.encode()).decode()):
        assert secret not in everything
    assert server.refused >= 1


def test_tls_without_the_ca_is_refused_in_one_line(proxy: Any, secrets: dict[str, Path], tmp_path: Path) -> None:
    server, _ = proxy
    target = spec(server, **{"token-file": str(secrets["token"])})
    with pytest.raises(ApplyError) as caught:
        open_target(target)
    assert not is_transient(caught.value)  # tail does not retry a certificate it cannot trust
    log = tmp_path / "a.rdfp"
    log.write_text(LOG)
    done = cli("apply", str(log), "--target", target, "--no-progress")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "TLS failed" in line and "CERTIFICATE_VERIFY_FAILED" in line, line
    assert TOKEN not in done.stdout + done.stderr


def test_a_store_asking_for_digest_is_refused_saying_so(
    oxigraph_server: Any, secrets: dict[str, Path], tmp_path: Path
) -> None:
    upstream = f"http://127.0.0.1:{oxigraph_server.http_port}"
    challenge = 'Digest realm="virtuoso", nonce="7e3f", qop="auth", algorithm=MD5'
    with AuthProxy(upstream, set(), challenge=challenge) as server:
        target = (
            f"sparql+http://127.0.0.1:{server.port}?layout=oxigraph&user={USER}&password-file={secrets['password']}"
        )
        log = tmp_path / "a.rdfp"
        log.write_text(LOG)
        done = cli("apply", str(log), "--target", target, "--no-progress")
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert "HTTP 401" in line and "Digest" in line and "not supported" in line, line
    assert PASSWORD not in line
