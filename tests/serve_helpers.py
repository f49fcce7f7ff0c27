"""Shared helpers of the serve tests: patch payloads, logs, running a topic's coroutines."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from patchsync.events import Add, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS, encode_patch
from patchsync.options import PatchOptions

from .helpers import write_log

T = TypeVar("T")


def patch_id(n: int) -> str:
    return f"urn:test:p{n}"


def patch_events(n: int, prev: int | None, rows: int = 2) -> list[Event]:
    """Patch number ``n`` (its prev patch number ``prev``): ``rows`` added triples."""
    events: list[Event] = [Header("id", f"<{patch_id(n)}>")]
    if prev is not None:
        events.append(Header("prev", f"<{patch_id(prev)}>"))
    events.append(TxStart())
    for r in range(rows):
        events.append(Add(f"<http://ex.org/s{n}>", f"<http://ex.org/p{r}>", f'"value {n}.{r}"', None))
    events += [TxCommit(), PatchEnd()]
    return events


def payload(n: int, prev: int | None, rows: int = 2, options: PatchOptions | None = None) -> bytes:
    """Patch ``n`` as a one-patch Jelly-Patch stream (what a publisher sends)."""
    return encode_patch(patch_events(n, prev, rows), options or PatchOptions())


def big_payload(n: int, prev: int | None, size: int) -> bytes:
    """Patch ``n`` (``prev``: the patch before) adding one literal of ``size`` bytes."""
    events: list[Event] = [Header("id", f"<{patch_id(n)}>")]
    if prev is not None:
        events.append(Header("prev", f"<{patch_id(prev)}>"))
    events += [TxStart(), Add(f"<http://ex.org/s{n}>", "<http://ex.org/p>", '"' + "x" * size + '"', None)]
    events += [TxCommit(), PatchEnd()]
    return encode_patch(events, PatchOptions())


def chain_log(path: Path, count: int, rows: int = 2) -> Path:
    """A ``.jellyp`` log of patches 1..count chained, written in one stream (shared lookups)."""
    events: list[Event] = []
    for n in range(1, count + 1):
        events += patch_events(n, n - 1 if n > 1 else None, rows)
    return write_log(path, _nt(events), adapter=NT_TERMS)


def _nt(events: Sequence[Event]) -> list[Event]:
    return list(events)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(_wrap(coro))


async def _wrap(coro: Awaitable[T]) -> T:
    return await coro


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key (made here, never shipped)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("neither the cryptography package nor the openssl command is available")
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
                *("-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost"),
                *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    import ipaddress

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key
