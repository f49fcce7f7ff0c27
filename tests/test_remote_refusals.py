"""What ``tail`` and ``publish`` say when a served log or a stream cannot be used: one line
naming the server and what to change, and no waiting for what no retry can fix.

- A source out of reach: the daemon waits for it (``source_unavailable``, backoff,
  ``--retry-timeout``); ``tail --once`` (the cron form) fails at once, as ``publish`` does.
- TLS on one side only, an untrusted certificate, the other door's port: a setting is wrong,
  so the first attempt fails with the setting to change (``--tls-ca``, ``https://``,
  ``http://``, the other port), whichever of gRPC and HTTP.
- A token missing or unknown: the line says where a token comes from.

TLS: https://www.rfc-editor.org/rfc/rfc8446 (a server answers a handshake it can verify or
refuses it); an HTTP/2 server's first frame is SETTINGS, https://www.rfc-editor.org/rfc/rfc9113#section-3.4;
gRPC runs over HTTP/2, https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .grpc_helpers import ServeProcess
from .nats_helpers import free_port
from .serve_helpers import chain_log, self_signed


def patchsync(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # No credentials but those a test gives.
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PATCHSYNC_T")}
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args],
        cwd=cwd,
        env=clean | (env or {}),
        capture_output=True,
        text=True,
        timeout=300,
    )


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a command that failed without retrying; checks the rest of stderr."""
    assert done.returncode != 0, done.stderr
    err = done.stderr
    assert "Traceback" not in err and "target_unavailable" not in err, err
    assert "retry_in=" not in err, err  # nothing was retried
    lines = err.strip().splitlines()
    assert all(line.startswith(("patchsync: ", "ts=")) for line in lines), err  # no library log lines
    line = lines[-1]
    assert line.startswith("patchsync: ") and line.isprintable(), err
    return line


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("refusals")
    chain_log(path / "log.jellyp", 3)
    (path / "other").mkdir()
    self_signed(path / "other")
    return path


@pytest.fixture(scope="module")
def plain(folder: Path) -> Iterator[ServeProcess]:
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", "t=plain"], folder).start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def tls(folder: Path) -> Iterator[ServeProcess]:
    (folder / "tls").mkdir()
    cert, key = self_signed(folder / "tls")
    args = ["--http", "127.0.0.1:0", "--topic", "t=secure", "--tls-cert", str(cert), "--tls-key", str(key)]
    server = ServeProcess(args, folder).start()
    yield server
    server.close()


@pytest.mark.parametrize("scheme", ["http", "grpc", "nats"])
def test_tail_once_does_not_wait_for_a_source_out_of_reach(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{free_port()}/t"
    done = patchsync("tail", url, "--target", f"sqlite:///{tmp_path / 'r.db'}", "--once", cwd=tmp_path)
    line = refused(done)
    assert done.returncode == 1
    assert line.startswith(f"patchsync: {url}: ") and "--once" in line, line
    assert "event=source_unavailable" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no replica, lock file or state directory left
    # publish says the same of the same server, just as fast.
    chain_log(tmp_path / "log.jellyp", 1)
    published = patchsync("publish", "log.jellyp", url, cwd=tmp_path)
    assert refused(published).startswith(f"patchsync: {url}: ")


def test_the_daemon_waits_for_a_source_and_names_it(tmp_path: Path) -> None:
    url = f"grpc://127.0.0.1:{free_port()}/t"
    done = patchsync("tail", url, "--target", f"sqlite:///{tmp_path / 'r.db'}", "--retry-timeout", "1", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("event=source_unavailable") >= 2, done.stderr
    assert "target_unavailable" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("patchsync: the source stayed unavailable") and "--retry-timeout 1" in last, last
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_run_that_never_reached_its_source_keeps_what_was_there(tmp_path: Path) -> None:
    chain_log(tmp_path / "log.jellyp", 2)
    target = ["--target", f"sqlite:///{tmp_path / 'r.db'}"]
    assert patchsync("tail", "log.jellyp", *target, "--once", cwd=tmp_path).returncode == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    assert before == ["log.jellyp", "r.db", "r.db-sources.lock", "r.db.tail"], before
    held = patchsync("dump", *target, cwd=tmp_path).stdout
    assert held.count("\n") >= 2, held
    url = f"http://127.0.0.1:{free_port()}/t"
    refused(patchsync("tail", url, *target, "--once", cwd=tmp_path))
    # A state directory of its own, new and two levels deep, goes; the replica and its own stay.
    refused(patchsync("tail", url, *target, "--once", "--state-dir", "new/state", cwd=tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "r.db.tail" / "target").exists()
    assert patchsync("dump", *target, cwd=tmp_path).stdout == held


def test_a_plaintext_client_of_a_tls_server_is_told_to_use_tls(folder: Path, tmp_path: Path, tls: ServeProcess) -> None:
    target = ["--target", f"sqlite:///{tmp_path / 'r.db'}"]
    grpc_line = refused(patchsync("tail", tls.url("t"), *target, cwd=folder))
    assert "speaks TLS" in grpc_line and "--tls-ca" in grpc_line, grpc_line
    http = f"http://127.0.0.1:{tls.http_port}/t"
    http_line = refused(patchsync("tail", http, *target, "--once", cwd=folder))
    assert f"use https://127.0.0.1:{tls.http_port}/t" in http_line, http_line


@pytest.mark.parametrize("door", ["grpc", "https"])
def test_an_untrusted_certificate_fails_at_once(folder: Path, tmp_path: Path, tls: ServeProcess, door: str) -> None:
    """Not ``--once``: even the daemon does not retry what only a setting can fix."""
    url = tls.url("t") if door == "grpc" else f"https://127.0.0.1:{tls.http_port}/t"
    wrong = ["--tls-ca", str(folder / "other" / "cert.pem")]
    done = patchsync("tail", url, "--target", f"sqlite:///{tmp_path / 'r.db'}", *wrong, cwd=folder)
    line = refused(done)
    assert done.returncode == 2
    assert f"{url}: the server's TLS certificate is not trusted" in line and "--tls-ca" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing made for a server not trusted
    assert refused(patchsync("publish", "log.jellyp", url, *wrong, cwd=folder)) == line


def test_a_tls_client_of_a_plaintext_server_is_told_it_speaks_none(folder: Path, plain: ServeProcess) -> None:
    ca = ["--tls-ca", str(folder / "other" / "cert.pem")]
    grpc_line = refused(patchsync("publish", "log.jellyp", plain.url("t"), *ca, cwd=folder))
    assert "does not speak TLS" in grpc_line and "--tls-ca" in grpc_line, grpc_line
    https = f"https://127.0.0.1:{plain.http_port}/t"
    http_line = refused(patchsync("publish", "log.jellyp", https, *ca, cwd=folder))
    assert f"does not speak TLS; use http://127.0.0.1:{plain.http_port}/t" in http_line, http_line


def test_each_client_at_the_other_door_says_so(folder: Path, tmp_path: Path, plain: ServeProcess) -> None:
    at_http = f"grpc://127.0.0.1:{plain.http_port}/t"
    for command in (
        ["publish", "log.jellyp", at_http],
        ["tail", at_http, "--target", f"sqlite:///{tmp_path / 'r.db'}"],
    ):
        line = refused(patchsync(*command, cwd=folder))
        assert "does not speak gRPC" in line and f"http://127.0.0.1:{plain.http_port}/t" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the replica was never reached either
    at_grpc = f"http://127.0.0.1:{plain.port}/t"
    line = refused(patchsync("publish", "log.jellyp", at_grpc, cwd=folder))
    assert "does not speak HTTP/1.1" in line and f"grpc://127.0.0.1:{plain.port}/t" in line, line


def test_credential_errors_say_where_credentials_come_from(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("write w-token\n")
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", "t=t", "--tokens", "tokens"], tmp_path).start()
    try:
        log = str(folder / "log.jellyp")
        for url in (server.url("t"), f"http://127.0.0.1:{server.http_port}/t"):
            missing = refused(patchsync("publish", log, url, cwd=tmp_path))
            assert "a token is required" in missing and "--token-file FILE (or PATCHSYNC_TOKEN)" in missing, missing
            unknown = refused(patchsync("publish", log, url, cwd=tmp_path, env={"PATCHSYNC_TOKEN": "nope"}))
            assert "check the token" in unknown and "--token-file" in unknown, unknown
        for url in (server.url("t"), f"https://127.0.0.1:{server.http_port}/t"):
            no_ca = refused(patchsync("publish", log, url, "--tls-ca", "missing.pem", cwd=tmp_path))
            assert no_ca == "patchsync: missing.pem: cannot read the CA certificate (No such file or directory)"
            not_pem = refused(patchsync("publish", log, url, "--tls-ca", log, cwd=tmp_path))
            assert not_pem.startswith(f"patchsync: {log}: not a PEM certificate"), not_pem
    finally:
        server.close()


def test_a_token_file_flag_wins_over_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag given on the command line beats a variable left in the shell."""
    import argparse

    from patchsync.cli.common import use_client_flags
    from patchsync.remote.grpc_client import client_token

    (tmp_path / "token").write_text("from-the-flag\n")
    monkeypatch.setenv("PATCHSYNC_TOKEN", "from-the-shell")
    monkeypatch.setenv("PATCHSYNC_TOKEN_FILE", "")
    use_client_flags(argparse.Namespace(token_file=str(tmp_path / "token"), tls_ca=None))
    assert client_token() == "from-the-flag"


def test_a_token_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """As serve's tokens file is: one line naming the file, exit 2, before any connection."""
    (tmp_path / "token").write_bytes(b"\xff\xfe\n")
    for url in ("grpc://127.0.0.1:1/t", "http://127.0.0.1:1/t"):
        done = patchsync("tail", url, "--target", "sqlite:///r.db", "--once", "--token-file", "token", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert refused(done) == "patchsync: token: the token file is not UTF-8 text (byte 0)", done.stderr
