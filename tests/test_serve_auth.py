"""Tokens and listener settings of ``patchsync serve``: the one check both front doors make."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchsync.errors import UsageError
from patchsync.serve.auth import Access, bearer, load_tokens
from patchsync.serve.errors import Forbidden, Unauthenticated, status_of
from patchsync.serve.settings import Address, ServeSettings, parse_address


def tokens_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tokens"
    path.write_text(text)
    return path


def test_write_implies_read_and_read_cannot_write(tmp_path: Path) -> None:
    tokens = load_tokens(tokens_file(tmp_path, "# grants\nread r-token\n\nwrite w-token\n"))
    tokens.check("r-token", Access.READ, "subscribe")
    tokens.check("w-token", Access.READ, "subscribe")
    tokens.check("w-token", Access.WRITE, "publish")
    with pytest.raises(Forbidden, match="publish: the token may read only"):
        tokens.check("r-token", Access.WRITE, "publish")
    with pytest.raises(Unauthenticated, match="token is required"):
        tokens.check(None, Access.READ, "subscribe")
    with pytest.raises(Unauthenticated, match="not known"):
        tokens.check("w-token2", Access.READ, "subscribe")
    assert status_of(Unauthenticated("x")).grpc == "UNAUTHENTICATED"
    assert status_of(Forbidden("x")).http == 403


def test_without_tokens_everything_is_allowed() -> None:
    tokens = load_tokens(None)
    assert not tokens.required
    tokens.check(None, Access.WRITE, "publish")


@pytest.mark.parametrize("text", ["admin x\n", "read\n", "read a b\n", "# nothing\n"])
def test_malformed_tokens_files_are_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(UsageError, match="tokens"):
        load_tokens(tokens_file(tmp_path, text))


def test_a_token_of_bytes_that_are_not_utf8_is_unknown_not_a_fault(tmp_path: Path) -> None:
    # aiohttp hands header bytes that are not UTF-8 on as lone surrogates (b"\xe9" -> "\udce9"):
    # such a token is one nobody was given, refused as unknown (401), never a server fault.
    tokens = load_tokens(tokens_file(tmp_path, "read r-\u00e9\n"))
    tokens.check("r-\u00e9", Access.READ, "subscribe")  # non-ASCII UTF-8 is a token like any other
    for presented in ("\udce9", "r-\udcc3\udca9", "\ud800x"):
        with pytest.raises(Unauthenticated, match="subscribe: the token is not known"):
            tokens.check(presented, Access.READ, "subscribe")


def test_bearer_header() -> None:
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None
    assert bearer(None) is None and bearer("Bearer ") is None


def test_addresses() -> None:
    assert parse_address("127.0.0.1:0") == Address("127.0.0.1", 0)
    assert parse_address("[::1]:50051") == Address("::1", 50051)
    assert parse_address("[::1]:50051").is_loopback and Address("localhost", 1).is_loopback
    assert not Address("0.0.0.0", 1).is_loopback and not Address("example.org", 1).is_loopback
    for bad in ("nohost", ":80", "h:port", "h:70000"):
        with pytest.raises(UsageError, match="HOST:PORT"):
            parse_address(bad)


def test_non_loopback_needs_tokens_or_allow_anonymous(tmp_path: Path) -> None:
    public = {"grpc": Address("0.0.0.0", 0)}
    with pytest.raises(UsageError, match="not a loopback address and no --tokens"):
        ServeSettings(public, ("t=x.jellyp",)).check()
    ServeSettings(public, ("t=x.jellyp",), allow_anonymous=True).check()
    tokens = load_tokens(tokens_file(tmp_path, "read a\n"))
    ServeSettings(public, ("t=x.jellyp",), tokens=tokens).check()
    ServeSettings({"grpc": Address("127.0.0.1", 0)}, ("t=x.jellyp",)).check()


def test_a_public_metrics_listener_needs_allow_anonymous_even_with_tokens(tmp_path: Path) -> None:
    # /metrics on its own listener checks no token, so tokens do not cover it.
    loop = {"grpc": Address("127.0.0.1", 0)}
    tokens = load_tokens(tokens_file(tmp_path, "read a\n"))
    with pytest.raises(UsageError, match=r"--metrics 0\.0\.0\.0:9465: not a loopback address"):
        ServeSettings(loop, ("t=x.jellyp",), tokens=tokens, metrics=Address("0.0.0.0", 9465)).check()
    ServeSettings(loop, ("t=x.jellyp",), tokens=tokens, metrics=Address("127.0.0.1", 9465)).check()
    ServeSettings(loop, ("t=x.jellyp",), tokens=tokens, metrics=Address("0.0.0.0", 9465), allow_anonymous=True).check()


def test_settings_that_cannot_work() -> None:
    loop = {"grpc": Address("127.0.0.1", 0)}
    with pytest.raises(UsageError, match="listener"):
        ServeSettings({}, ("t=x.jellyp",)).check()
    with pytest.raises(UsageError, match="--topic"):
        ServeSettings(loop, ()).check()
    with pytest.raises(UsageError, match="go together"):
        ServeSettings(loop, ("t=x.jellyp",), tls_cert=Path("c.pem")).check()
    with pytest.raises(UsageError, match="at least 1"):
        ServeSettings(loop, ("t=x.jellyp",), max_streams=0).check()
