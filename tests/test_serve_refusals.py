"""A refusal goes out through the server's status table and comes back through the same rows.

The server answers an error with the row ``patchsync.serve.errors.status_of`` picks (a gRPC
code and an HTTP status); the clients map what they receive back through
``patchsync.remote.statuses.refusal``. For every class the server refuses with, both
doors' answers must come back as the error a client should raise: retryable ones as
``StreamUnavailable`` (the tail daemon retries them), a chain conflict as ``ChainError``,
anything else as a ``UsageError`` line; and the gRPC client and the HTTP client must agree.
gRPC status codes: https://grpc.github.io/grpc/core/md_doc_statuscodes.html; HTTP statuses:
RFC 9110, section 15.
"""

from __future__ import annotations

import pytest

from patchsync.errors import ChainError, PatchsyncError, UsageError
from patchsync.remote import statuses as refusals
from patchsync.remote.errors import StreamUnavailable
from patchsync.serve.errors import STATUSES, TooSlow, is_retryable, status_of


def _server_error(cls: type[BaseException]) -> BaseException:
    return TooSlow("slow", resume_after=3) if cls is TooSlow else cls("refused")


@pytest.mark.parametrize("cls", [cls for cls, _ in STATUSES] + [RuntimeError], ids=lambda c: c.__name__)
def test_every_refusal_comes_back_through_the_same_row(cls: type[BaseException]) -> None:
    exc = _server_error(cls)
    status = status_of(exc)
    assert status in refusals.STATUSES  # the server answers only with rows the clients know
    over_grpc = refusals.refusal("grpc://h/t: refused", status.grpc, retryable=is_retryable(exc))
    over_http = refusals.refusal("http://h/t: HTTP: refused", status.http)
    if status.retryable:
        expected: type[PatchsyncError] = StreamUnavailable
    elif isinstance(exc, ChainError):
        expected = ChainError
    else:
        expected = UsageError
    assert type(over_grpc) is expected, (cls, status)
    # HTTP says a conflict with 400 and RDF Delta's JSON body (read where the client appends);
    # every other refusal is the same error over both doors.
    assert type(over_http) is (UsageError if expected is ChainError else expected), (cls, status)
    assert str(over_grpc).startswith("grpc://h/t: refused")


def test_a_client_tells_a_missing_token_what_to_do() -> None:
    for code in (refusals.UNAUTHENTICATED.grpc, refusals.UNAUTHENTICATED.http):
        assert "give a token with --token-file" in str(refusals.refusal("x", code, token_sent=False))
        assert "check the token" in str(refusals.refusal("x", code, token_sent=True))


def test_codes_no_server_row_has() -> None:
    # A gRPC call the client library gave up on, and a gateway's 502/504, are the server out
    # of reach for now; an unknown 4xx or gRPC code is one line, not retried.
    for code in ("DEADLINE_EXCEEDED", "CANCELLED", 502, 504):
        assert type(refusals.refusal("x", code)) is StreamUnavailable
    for code in ("UNKNOWN", "DATA_LOSS", 418):
        assert type(refusals.refusal("x", code)) is UsageError


def test_a_grpc_code_shared_by_retryable_and_final_rows_needs_the_servers_word() -> None:
    # RESOURCE_EXHAUSTED is "too many streams now" (retry) or "this message is too large" (not).
    code = refusals.BUSY.grpc
    assert refusals.OVER_LIMIT.grpc == code
    assert type(refusals.refusal("x", code)) is UsageError
    assert type(refusals.refusal("x", code, retryable=True)) is StreamUnavailable
