"""The server's rules as functions and small objects, without sockets: routes, batches,
connection bounds, option negotiation, the error table, TLS files, topic kinds.

Each rule here is also exercised through a real door in ``test_serve_hostile.py`` and
``test_serve_limits.py``; these tests pin the rule itself, each case by name.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from patchsync._proto import patch_pb2
from patchsync.errors import ChainError, UsageError
from patchsync.serve import delta_protocol as dp
from patchsync.serve import http_routes as routes
from patchsync.serve.auth import Access, load_tokens
from patchsync.serve.catalog import build_topic
from patchsync.serve.connections import ConnectionTable, body_deadline, connection_budget
from patchsync.serve.errors import (
    INTERNAL_MESSAGE,
    NotAllowed,
    NotFound,
    ReadOnlyTopic,
    TooSlow,
    UnknownTopic,
    client_message,
    is_retryable,
    reason_of,
    status_of,
)
from patchsync.serve.file_topic import FileLogTopic
from patchsync.serve.patch_options import negotiate_patch
from patchsync.serve.tls import load_tls
from patchsync.serve.topics import Batch, Entry, Start, check_name, entry_cost

from .serve_helpers import big_payload, run

NAMES = ["books", "state"]
MAX = 16 << 20


def test_every_path_but_three_needs_a_token() -> None:
    # Without a token nothing may tell whether a topic exists: 401 comes before routing.
    assert not any(routes.needs_token(p) for p in ("/$/healthz", "/$/ready", "/$/ping"))
    for path in ("/books/1", "/nope/1", "/$/rpc", "/$/metrics", "/", "/$/other", "/a/b/c", "/state"):
        assert routes.needs_token(path), path


def test_routes_name_topic_access_and_body_limit() -> None:
    def r(method: str, path: str, **query: str) -> routes.Route:
        return routes.route(method, path, query, NAMES, MAX)

    assert r("POST", "/$/rpc") == routes.Route(routes.RPC, service="rpc", body_limit=routes.RPC_MAX_BYTES)
    assert r("POST", "/books") == routes.Route(routes.APPEND, "books", access=Access.WRITE, body_limit=MAX)
    assert r("GET", "/books/7").ref == dp.PatchRef("version", version=7)
    assert r("GET", "/books/changes").kind == routes.CHANGES and r("GET", "/books/", patch="x").kind == routes.FETCH
    assert r("GET", "/init-data", datasource="state") == routes.Route(routes.INIT, "state")
    assert r("GET", f"/{dp.datasource_id('books')}/1").topic == "books"
    assert r("GET", "/$/metrics") == routes.Route(routes.SERVICE, service="metrics")
    assert r("GET", "/books", version="3").body_limit == 0  # reads take no body
    assert r("OPTIONS", "/books") == routes.Route(routes.ALLOW, "books")  # read access: what it takes
    with pytest.raises(NotAllowed):
        r("GET", "/$/rpc")
    with pytest.raises(NotAllowed):
        r("DELETE", "/books")
    with pytest.raises(UnknownTopic, match="No such datasource: 'nope'"):
        r("GET", "/nope/1")
    with pytest.raises(NotFound) as missing:
        r("GET", "/$/other")
    assert not isinstance(missing.value, UnknownTopic)
    with pytest.raises(dp.BadRequest, match="too many components"):
        r("GET", "/a/b/c")
    # A version longer than any 64-bit count is the client's fault, not a conversion error.
    with pytest.raises(dp.BadRequest, match="5000 digits"):
        r("GET", "/books/" + "9" * 5000)
    with pytest.raises(dp.BadRequest, match="at most 19 digits"):
        dp.feed_query({"after": "9" * 5000})


def test_rpc_bodies_the_json_module_cannot_take_are_400() -> None:
    with pytest.raises(dp.BadRequest, match="nested too deeply"):
        dp.parse_rpc(b"[" * 100_000)
    with pytest.raises(dp.BadRequest, match="not UTF-8 at byte 1"):
        dp.parse_rpc(b'{\xff"')
    with pytest.raises(dp.BadRequest, match="line 1 column 2"):
        dp.parse_rpc(b"{x")


def test_topic_names_are_bounded_in_length() -> None:
    # A name is a directory under --log-root (and .removed/NAME-xxxx once removed).
    assert check_name("a" * 200)
    with pytest.raises(UsageError, match="at most 200 characters"):
        check_name("a" * 256)


def test_a_batch_never_exceeds_its_bytes_caught_up_or_live(tmp_path: Path) -> None:
    # A response of SubscribePatch or the change feed is one batch: a stock gRPC client
    # takes 4 MiB, so a batch must stay within its bytes (a larger patch alone), not
    # overshoot by one patch.
    sizes = [300, 700, 200, 900, 2_500, 100, 800, 600, 650, 30]  # kilobytes
    limit = 1 << 20
    log = tmp_path / "big.jellyp"

    def check(batches: list[list[Entry]]) -> list[int]:
        for batch in batches:
            assert len(batch) == 1 or sum(len(e.payload) for e in batch) <= limit, [len(e.payload) for e in batch]
        return [e.version for batch in batches for e in batch]

    async def go() -> None:
        t = FileLogTopic("t", str(log), log)
        await t.open()
        await t.append_many([(big_payload(n, n - 1 or None, k << 10), "") for n, k in enumerate(sizes[:5], 1)])
        caught_up = [b async for b in t.read_batches(Start.beginning(), follow=False, max_bytes=limit)]
        assert check(caught_up) == [1, 2, 3, 4, 5]

        live: list[list[Entry]] = []

        async def follow() -> None:
            async for batch in t.read_batches(Start.after_version(5), max_bytes=limit):
                live.append(batch)
                if batch[-1].version == len(sizes):
                    return

        reader = asyncio.create_task(follow())
        await asyncio.sleep(0.05)
        await t.append_many([(big_payload(n, n - 1, k << 10), "") for n, k in enumerate(sizes[5:], 6)])
        await asyncio.wait_for(reader, 30)
        assert check(live) == list(range(6, len(sizes) + 1))
        await t.close()

    run(go())


def test_the_batch_rule() -> None:
    entry = Entry(1, "urn:x", b"x" * 100)
    batch = Batch(limit=3, max_bytes=2 * entry_cost(entry))
    assert batch.fits(Entry(1, "urn:huge", b"x" * 10_000))  # the first always fits
    assert not batch.add(entry) and batch.fits(entry)
    assert batch.add(entry)  # full by bytes
    assert not batch.fits(entry) and batch.flush() == [entry, entry] and not batch


def test_a_stalled_subscribers_queue_is_bounded_in_bytes(tmp_path: Path) -> None:
    # A subscriber that stops reading holds at most its queue's bytes of patches, then
    # reads from the log again when it resumes: nothing is lost.
    log = tmp_path / "q.jellyp"

    async def go() -> None:
        t = FileLogTopic("t", str(log), log, subscriber_buffer=1000, subscriber_bytes=200_000)
        await t.open()
        reader = t.read(Start.beginning())
        first = asyncio.create_task(anext(reader))
        await asyncio.sleep(0.05)
        await t.append(big_payload(1, None, 1_000))
        assert (await first).version == 1
        [sub] = t.hub._subscribers
        for n in range(2, 12):
            await t.append(big_payload(n, n - 1, 50_000))
        assert sub.overflowed and sub.bytes <= 200_000
        got = [(await anext(reader)).version for _ in range(10)]
        assert got == list(range(2, 12))
        await reader.aclose()
        await t.close()

    run(go())


def test_connection_bounds() -> None:
    table = ConnectionTable(per_client=2, total=3)
    assert table.admit("10.0.0.1") is None and table.admit("10.0.0.1") is None
    assert "10.0.0.1 holds 2 connections already" in (table.admit("10.0.0.1") or "")
    assert table.admit("10.0.0.2") is None
    assert "holds 3 connections already" in (table.admit("10.0.0.3") or "")
    table.release("10.0.0.1")
    assert table.admit("10.0.0.3") is None and len(table) == 3 and table.of("10.0.0.1") == 1
    # Room is kept for the logs, the gRPC door and a request's own descriptors.
    assert connection_budget(1024) == 896 and connection_budget(128) == 64 and connection_budget(20) == 4


def test_a_body_must_keep_a_minimum_rate_after_its_timeout() -> None:
    # 10 s, then 1 s more for each 1000 bytes received.
    assert body_deadline(100.0, 0, 10.0, 1000) == 110.0
    assert body_deadline(100.0, 5000, 10.0, 1000) == 115.0


def test_requested_patch_options_are_met_or_refused_naming_the_option() -> None:
    assert negotiate_patch(None) is None and negotiate_patch(patch_pb2.RdfPatchOptions()) is None
    met = negotiate_patch(patch_pb2.RdfPatchOptions(statement_type=1, max_name_table_size=16))
    assert met is not None and met.statement_type == 1 and met.max_name_table_size == 16
    with pytest.raises(UsageError, match="statement_type 99: not a statement type"):
        negotiate_patch(patch_pb2.RdfPatchOptions(statement_type=99))
    with pytest.raises(UsageError, match="max_name_table_size 3"):
        negotiate_patch(patch_pb2.RdfPatchOptions(max_name_table_size=3))


def test_one_error_table_for_both_doors_and_the_metrics() -> None:
    read_only = status_of(ReadOnlyTopic("x"))
    assert (read_only.grpc, read_only.http, read_only.reason) == ("PERMISSION_DENIED", 403, "kind")
    assert reason_of(UnknownTopic("x")) == "topic" and reason_of(NotFound("x")) == "missing"
    assert status_of(NotFound("x")).http == 404 and reason_of(ChainError("x")) == "chain"
    assert status_of(TooSlow("x")).grpc == "RESOURCE_EXHAUSTED" and is_retryable(TooSlow("x"))
    # Nothing but a patchsync error's own line reaches a client.
    assert client_message(KeyError("/secret/path")) == INTERNAL_MESSAGE
    assert client_message(UsageError("one\n  line")) == "one line"
    assert status_of(KeyError("x")).http == 500


def test_a_tokens_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_bytes(b"read abc\nwrite \xff\xfe\n")
    with pytest.raises(UsageError, match=r"tokens: the tokens file is not UTF-8 text \(byte 15\)"):
        load_tokens(path)


def _pem(tmp_path: Path, name: str) -> tuple[Path, Path]:
    cert, key = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_tls_files_are_checked_naming_the_file_and_the_fault(tmp_path: Path) -> None:
    cert, key = _pem(tmp_path, "a")
    other_cert, other_key = _pem(tmp_path, "b")
    assert load_tls(cert, key).cert_pem == cert.read_bytes()
    broken = tmp_path / "broken.crt"
    lines = cert.read_text().splitlines()
    broken.write_text("\n".join([lines[0], "not base64 !!", lines[-1]]) + "\n")
    encrypted = tmp_path / "enc.key"
    subprocess.run(
        ["openssl", "rsa", "-in", str(key), "-aes256", "-passout", "pass:x", "-out", str(encrypted)],
        check=True,
        capture_output=True,
    )
    cases = [
        (tmp_path / "none.crt", key, f"--tls-cert {tmp_path / 'none.crt'}: cannot read it"),
        (key, key, f"--tls-cert {key}: not a PEM certificate"),
        (broken, key, f"--tls-cert {broken}: a certificate in it cannot be read"),
        (cert, cert, f"--tls-key {cert}: not a PEM private key"),
        (cert, other_key, f"--tls-key {other_key}: not the private key of the certificate in --tls-cert {cert}"),
        (cert, encrypted, f"--tls-key {encrypted}: the key is encrypted"),
    ]
    for c, k, expected in cases:
        with pytest.raises(UsageError) as refused:
            load_tls(c, k)
        assert str(refused.value).startswith(expected), (c, k, str(refused.value))
    assert other_cert.exists()


def test_a_source_kind_that_cannot_be_a_topic_is_refused_naming_those_that_can(tmp_path: Path) -> None:
    # Each kind says whether it can be served: a served log cannot be served again here.
    for spec in ("grpc://127.0.0.1:1/t", "http://127.0.0.1:1/t", "https://127.0.0.1:1/t"):
        with pytest.raises(UsageError) as refused:
            build_topic(f"x={spec}")
        scheme = spec.partition(":")[0]
        assert f"a {scheme} source cannot be served as a topic" in str(refused.value)
        assert "file, directory, nats://" in str(refused.value)
    assert build_topic(f"l={tmp_path}/l.jellyp").kind == "log"
    assert type(build_topic("n=nats://127.0.0.1:4222/S")).__name__ == "NatsTopic"


def test_running_out_of_descriptors_while_accepting_is_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    import errno

    from patchsync.serve.http_listener import Listener

    async def go() -> None:
        loop = asyncio.get_running_loop()
        listener = Listener(None, ConnectionTable(1, 1), header_timeout=1.0, on_refused=lambda why: None)  # type: ignore[arg-type]
        context = {"message": "socket.accept() out of system resource", "exception": OSError(errno.EMFILE, "x")}
        listener._loop_error(loop, context)

    with caplog.at_level("ERROR", logger="patchsync.serve"):
        run(go())
    [record] = caplog.records
    assert record.exc_info is None and "out of file descriptors (EMFILE)" in record.getMessage()


def test_subscribe_responses_written_directly_are_protobufs_own_bytes() -> None:
    # The door sends these bytes as they are: they must be what the schema's serializer
    # gives (https://protobuf.dev/programming-guides/encoding/), for every field's edge.
    from patchsync._proto import patch_service_pb2
    from patchsync.serve.patch_wire import batch_message, patch_message

    entries = [
        Entry(1, "urn:x:1", b"\x0a\x02ab"),
        Entry(300, "urn:é:ü", b"p" * 200),
        Entry(1 << 40, "", b""),
        Entry(0, "x", b"y" * 70_000),
    ]
    message = patch_service_pb2.PatchMessage
    for e in entries:
        assert patch_message(e) == message(version=e.version, patch_id=e.patch_id, patch=e.payload).SerializeToString()
    expected = message(batch=[message(version=e.version, patch_id=e.patch_id, patch=e.payload) for e in entries])
    assert batch_message(entries) == expected.SerializeToString()
    assert len(batch_message(entries)) <= sum(entry_cost(e) for e in entries)  # the batch rule's bound holds
