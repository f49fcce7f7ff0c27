"""``patchsync serve`` against careless and hostile clients, through both doors at once.

A server on a network is a security boundary: it authenticates before it reads a body or
tells anything about a path, answers a client's fault with a 4xx / ``INVALID_ARGUMENT``
line and never a 5xx, ``UNKNOWN`` or ``INTERNAL``, and never sends a client exception text
or writes a traceback to its log for a client's fault. One server process serves every
test here (tokens, a segment-directory log topic, a file log topic with a bootstrap
snapshot, a target topic), and the last test reads its whole log.

HTTP status semantics: RFC 9110 (https://www.rfc-editor.org/rfc/rfc9110), sections 15.5
(4xx: the client's fault) and 15.6 (5xx: the server's); gRPC status codes:
https://grpc.github.io/grpc/core/md_doc_statuscodes.html.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from patchsync._proto import grpc_pb2, grpc_pb2_grpc, patch_pb2, patch_service_pb2, rdf_pb2

from .grpc_helpers import ServeProcess, bearer, cli, patch_stub
from .http_helpers import patch_text, uuid_id
from .nats_helpers import write_chain
from .serve_helpers import payload

READ, WRITE = "r-token", "w-token"
#: How an exception's text would show in a message (``ValueError``, ``RecursionError``...).
EXCEPTION_TEXT = re.compile(r"\b\w+(Error|Exception)\b|Traceback")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "tokens").write_text(f"read {READ}\nwrite {WRITE}\n")
    write_chain(folder / "f.jellyp", "boot", 3)
    cli("apply", "f.jellyp", "--target", f"sqlite:///{folder}/db.sqlite", cwd=folder)
    cli("snapshot", "--target", f"sqlite:///{folder}/db.sqlite", "-o", "f.init.jelly", cwd=folder)
    server = ServeProcess(
        [
            *("--http", "127.0.0.1:0", "--tokens", "tokens", "--log-root", "logs"),
            *("--topic", "t=t", "--topic", "f=f.jellyp", "--topic", f"state=sqlite:///{folder}/db.sqlite"),
        ],
        folder,
    ).start()
    yield server
    server.close()


def raw(address: str, request: bytes, timeout: float = 30.0) -> tuple[int, bytes]:
    """Send ``request`` as it is on a fresh connection; the status and body of the answer
    (0 when the server closed without one)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            if sep and length and len(body) >= int(length.group(1)):
                break
    if not data.startswith(b"HTTP/1."):
        return 0, data
    return int(data[9:12]), data.partition(b"\r\n\r\n")[2]


def _headers_only(method: str, path: str, length: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {length}\r\n\r\n".encode()


def test_without_a_token_every_path_is_401_and_tells_nothing(served: ServeProcess) -> None:
    url = f"http://{served.http}"
    answers = {}
    for method, path in [
        ("GET", "/t/1"),
        ("GET", "/nope/1"),
        ("POST", "/state"),
        ("POST", "/nope"),
        ("GET", "/"),
        ("GET", "/$/nothing"),
        ("GET", "/$/metrics"),
        ("POST", "/$/rpc"),
        ("GET", "/$/rpc"),
        ("DELETE", "/t"),
        ("GET", "/a/b/c/d"),
    ]:
        r = httpx.request(method, url + path, content=b"x" if method == "POST" else None)
        answers[method, path] = r.text.replace(path, "PATH")
        assert r.status_code == 401, (method, path, r.status_code, r.text)
    # A topic that exists and one that does not get the same answer.
    assert answers["GET", "/t/1"] == answers["GET", "/nope/1"]
    assert answers["POST", "/state"] == answers["POST", "/nope"]
    # A token whose bytes are not UTF-8 is a token nobody was given: 401, not a server fault.
    status, body = raw(served.http, b"GET /t/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xe9\xff\r\n\r\n")
    assert status == 401 and b"the token is not known" in body, (status, body)
    assert httpx.get(url + "/$/healthz").status_code == 200  # liveness needs no token


def test_a_body_is_not_read_before_the_token_and_the_route_allow_it(served: ServeProcess) -> None:
    # Headers of a 15 MiB body, and no body: the answer comes at once, nothing is read.
    big = 15 << 20
    status, body = raw(served.http, _headers_only("POST", "/$/rpc", big))
    assert status == 401, body
    status, body = raw(served.http, _headers_only("POST", "/$/rpc", big, READ))
    assert status == 413 and b"65536 byte limit" in body, body
    status, body = raw(served.http, _headers_only("POST", "/t", 64 << 20, WRITE))
    assert status == 413, body
    status, body = raw(served.http, _headers_only("POST", "/t", 100, READ))
    assert status == 403 and b"read only" in body, body


def _http_cases(url: str) -> list[tuple[str, httpx.Response]]:
    """Every class of malformed request to the HTTP door, with a write token."""
    auth = {"Authorization": f"Bearer {WRITE}"}

    def rpc(body: bytes | str) -> httpx.Response:
        return httpx.post(url + "/$/rpc", content=body, headers=auth)

    def op(name: str, arg: Any) -> httpx.Response:
        return rpc(json.dumps({"operation": name, "opid": "", "arg": arg}))

    cases = [
        ("a version of 5000 digits", httpx.get(f"{url}/t/{'9' * 5000}", headers=auth)),
        ("a negative version", httpx.get(f"{url}/t", params={"version": "-1"}, headers=auth)),
        ("a NUL patch reference", httpx.get(f"{url}/t/%00", headers=auth)),
        ("an unknown patch id", httpx.get(f"{url}/t/id:0a9b0f36-7bd4-4a7c-a4ac-1b8f6b4a1f01", headers=auth)),
        ("feed after=abc", httpx.get(f"{url}/t/changes?after=abc", headers=auth)),
        ("feed after=9...9", httpx.get(f"{url}/t/changes?after={'9' * 5000}", headers=auth)),
        ("feed limit=0", httpx.get(f"{url}/t/changes?limit=0", headers=auth)),
        ("feed wait=nan", httpx.get(f"{url}/t/changes?wait=nan", headers=auth)),
        ("feed wait=inf", httpx.get(f"{url}/t/changes?wait=inf", headers=auth)),
        ("feed bogus=1", httpx.get(f"{url}/t/changes?bogus=1", headers=auth)),
        ("feed beyond the head", httpx.get(f"{url}/t/changes?after=999999", headers=auth)),
        ("feed of a target topic", httpx.get(f"{url}/state/changes", headers=auth)),
        ("rpc [ x 60000", rpc("[" * 60_000)),
        ("rpc [ x 100000", rpc("[" * 100_000)),
        ("rpc not JSON", rpc("{x")),
        ("rpc not UTF-8", rpc(b'{"operation": "\xff"}')),
        ("rpc a list", rpc("[]")),
        ("rpc no arg", rpc('{"operation": "ping"}')),
        ("rpc unknown op", op("copy_datasource", {})),
        ("create a 300 character name", op("create_datasource", {"name": "a" * 300})),
        ("create ../x", op("create_datasource", {"name": "../x"})),
        ("create a number", op("create_datasource", {"name": 5})),
        ("lock an unknown data source", op("lock", {"datasource": "nope"})),
        ("lock-refresh of numbers", op("lock-refresh", {"array": [1, 2]})),
        ("describe_log of a number", op("describe_log", {"datasource": 123})),
        ("remove an unknown data source", op("remove_datasource", {"datasource": "id:" + "0" * 32})),
        ("append Jelly garbage", httpx.post(f"{url}/t", content=b"\x05garbage", headers=auth | _jelly())),
        ("append text garbage", httpx.post(f"{url}/t", content=b"H id <x", headers=auth)),
        ("append without an id", httpx.post(f"{url}/t", content=b"TX .\nA <a:s> <a:p> <a:o> .\nTC .\n", headers=auth)),
        ("append JSON", httpx.post(f"{url}/t", content=b"{}", headers=auth | {"Content-Type": "application/json"})),
        ("append a fork", httpx.post(f"{url}/f", content=patch_text("fork", 1, None), headers=auth)),
        ("append to a target", httpx.post(f"{url}/state", content=patch_text("x", 1, None), headers=auth)),
        ("init of a topic without one", httpx.get(f"{url}/t/init", headers=auth)),
    ]
    raw_cases = [
        ("Host [::1 on init", b"GET /f/init HTTP/1.1\r\nHost: [::1\r\nAuthorization: Bearer " + WRITE.encode()),
        ("Host empty on init", b"GET /f/init HTTP/1.1\r\nHost: \r\nAuthorization: Bearer " + WRITE.encode()),
        ("a header without a colon", b"GET /t/1 HTTP/1.1\r\nHost: x\r\nBad Header"),
        ("a request line of 10 kB", b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x"),
        ("a TLS hello on a plain port", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40),
        ("an HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM"),
        (
            "a broken chunk",
            b"POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nAuthorization: Bearer w-token",
        ),
    ]
    out = list(cases)
    for name, head in raw_cases:
        request = head + b"\r\n\r\n" + (b"zz\r\nnot hex\r\n" if b"chunked" in head else b"")
        status, body = raw(url.removeprefix("http://"), request)
        out.append((name, httpx.Response(status or 400, content=body)))
    return out


def _jelly() -> dict[str, str]:
    return {"Content-Type": "application/x-jelly-rdf-patch"}


def _grpc_cases(port: int) -> list[tuple[str, grpc.RpcError | None]]:
    """Every class of malformed call to the gRPC door, with a write token."""
    stub = patch_stub(port)
    rdf = grpc_pb2_grpc.RdfStreamServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    md = bearer(WRITE)

    def subscribe(**fields: Any) -> Any:
        request = patch_service_pb2.SubscribePatchRequest(stop_at_head=True, **fields)
        return list(stub.SubscribePatch(request, metadata=md, timeout=30))

    def publish(*requests: Any) -> Any:
        return stub.PublishPatch(iter(requests), metadata=md, timeout=30)

    def frame(*rows: Any) -> Any:
        return rdf_pb2.RdfStreamFrame(rows=list(rows))

    opts = patch_pb2.RdfPatchOptions
    calls = [
        ("statement_type 99", lambda: subscribe(topic="t", requested_options=opts(statement_type=99))),
        ("a name table of 3", lambda: subscribe(topic="t", requested_options=opts(max_name_table_size=3))),
        ("an unknown topic", lambda: subscribe(topic="nope")),
        ("patches of a target", lambda: subscribe(topic="state")),
        ("after an unknown id", lambda: subscribe(topic="f", start=patch_service_pb2.PatchStart(after_id="urn:no"))),
        ("after the head", lambda: subscribe(topic="f", start=patch_service_pb2.PatchStart(after_version=1 << 62))),
        ("publish garbage", lambda: publish(patch_service_pb2.PublishPatchRequest(topic="t", patch=b"\x05garbage"))),
        ("publish to a target", lambda: publish(patch_service_pb2.PublishPatchRequest(topic="state", patch=b"x"))),
        (
            "publish naming two topics",
            lambda: publish(
                patch_service_pb2.PublishPatchRequest(topic="t", patch=payload(1, None)),
                patch_service_pb2.PublishPatchRequest(topic="f", patch=payload(2, 1)),
            ),
        ),
        ("publish to no topic", lambda: publish(patch_service_pb2.PublishPatchRequest(patch=payload(1, None)))),
        (
            "rdf frame with an unknown name id",
            lambda: rdf.PublishRdf(
                iter([frame(rdf_pb2.RdfStreamRow(triple=rdf_pb2.RdfTriple(s_iri=rdf_pb2.RdfIri(name_id=77))))]),
                metadata=(*md, ("topic", "t")),
                timeout=30,
            ),
        ),
        (
            "rdf of a log topic",
            lambda: list(rdf.SubscribeRdf(grpc_pb2.RdfStreamSubscribe(topic="t"), metadata=md, timeout=30)),
        ),
        (
            "rdf options physical 99",
            lambda: list(
                rdf.SubscribeRdf(
                    grpc_pb2.RdfStreamSubscribe(
                        topic="state", requested_options=rdf_pb2.RdfStreamOptions(physical_type=99)
                    ),
                    metadata=md,
                    timeout=30,
                )
            ),
        ),
        ("describe nothing", lambda: stub.Describe(patch_service_pb2.DescribeRequest(topic=""), metadata=md)),
    ]
    out: list[tuple[str, grpc.RpcError | None]] = []
    for name, call in calls:
        try:
            call()
        except grpc.RpcError as exc:
            out.append((name, exc))
        else:
            out.append((name, None))
    return out


def test_malformed_input_through_both_doors_is_never_a_5xx_nor_a_traceback(
    served: ServeProcess, tmp_path: Path
) -> None:
    for name, response in _http_cases(f"http://{served.http}"):
        assert 400 <= response.status_code < 500, (name, response.status_code, response.text)
        assert not EXCEPTION_TEXT.search(response.text), (name, response.text)
        assert response.text.count("\n") <= 1, (name, response.text)
    for name, error in _grpc_cases(served.port):
        assert error is not None, name
        code = error.code()  # type: ignore[attr-defined]
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (name, code, error.details())  # type: ignore[attr-defined]
        assert code != grpc.StatusCode.OK, name
        assert not EXCEPTION_TEXT.search(error.details() or ""), (name, error.details())  # type: ignore[attr-defined]
    # A gRPC client on the HTTP port: refused, and at most a line in the server's log.
    with grpc.insecure_channel(served.http) as wrong, pytest.raises(grpc.RpcError):
        patch_service_pb2_grpc_stub(wrong).Describe(patch_service_pb2.DescribeRequest(topic="t"), timeout=10)
    # The server still serves, and its log holds no traceback of any of it.
    assert httpx.get(f"http://{served.http}/f/1", headers={"Authorization": f"Bearer {READ}"}).status_code == 200
    code, _, err = served.stop()
    assert code == 0
    assert "Traceback" not in err and not EXCEPTION_TEXT.search(err), err


def patch_service_pb2_grpc_stub(channel: grpc.Channel) -> Any:
    from patchsync._proto import patch_service_pb2_grpc

    return patch_service_pb2_grpc.PatchServiceStub(channel)


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[ServeProcess]:
    """A server of its own (the shared one is stopped by the test above)."""
    (tmp_path / "tokens").write_text(f"read {READ}\nwrite {WRITE}\n")
    write_chain(tmp_path / "f.jellyp", "boot", 3)
    cli("apply", "f.jellyp", "--target", f"sqlite:///{tmp_path}/db.sqlite", cwd=tmp_path)
    server = ServeProcess(
        [
            *("--http", "127.0.0.1:0", "--tokens", "tokens"),
            *("--topic", "t=t", "--topic", "f=f.jellyp", "--topic", f"state=sqlite:///{tmp_path}/db.sqlite"),
        ],
        tmp_path,
    ).start()
    yield server
    server.close()


def test_a_write_to_a_target_topic_is_one_refusal_on_both_doors(fresh: ServeProcess) -> None:
    auth = {"Authorization": f"Bearer {WRITE}"}
    http = httpx.post(f"http://{fresh.http}/state", content=patch_text("x", 1, None), headers=auth)
    with pytest.raises(grpc.RpcError) as grpc_refusal:
        patch_stub(fresh.port).PublishPatch(
            iter([patch_service_pb2.PublishPatchRequest(topic="state", patch=payload(1, None))]),
            metadata=bearer(WRITE),
            timeout=30,
        )
    with pytest.raises(grpc.RpcError) as rdf_refusal:
        grpc_pb2_grpc.RdfStreamServiceStub(grpc.insecure_channel(f"127.0.0.1:{fresh.port}")).PublishRdf(
            iter([rdf_pb2.RdfStreamFrame()]), metadata=(*bearer(WRITE), ("topic", "state")), timeout=30
        )
    assert http.status_code == 403
    for refused in (grpc_refusal.value, rdf_refusal.value):
        assert refused.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
        assert "topic state is a target topic, read-only" in refused.details()  # type: ignore[attr-defined]
    assert "topic state is a target topic, read-only" in http.text


def test_publishing_to_a_target_topic_is_one_line_through_either_door(fresh: ServeProcess, tmp_path: Path) -> None:
    # A writer asks before writing (gRPC Describe, HTTP OPTIONS /NAME); over HTTP it read the
    # head first and stopped at the change feed's 400 ("the change feed needs a log topic").
    log = tmp_path / "p.jellyp"
    write_chain(log, "pub", 2)
    token = {"PATCHSYNC_TOKEN": WRITE}
    lines = []
    for url in (f"grpc://{fresh.address}/state", f"http://{fresh.http}/state"):
        done = cli("publish", str(log), url, cwd=tmp_path, env=token, check=False)
        assert done.returncode == 2, done.stderr
        lines.append(done.stderr.strip().replace(url, "URL"))
    assert lines[0] == lines[1] == "patchsync: URL: a target topic is read-only; write to a log topic", lines
    # What the HTTP answer says, by the catalog's rule; a log topic still takes the patches.
    auth = {"Authorization": f"Bearer {READ}"}
    allowed = {n: httpx.options(f"http://{fresh.http}/{n}", headers=auth) for n in ("state", "t")}
    assert [(a.status_code, a.headers["Patchsync-Kind"]) for a in allowed.values()] == [(204, "target"), (204, "log")]
    assert "POST" not in allowed["state"].headers["Allow"] and "POST" in allowed["t"].headers["Allow"]
    cli("publish", str(log), f"http://{fresh.http}/t", cwd=tmp_path, env=token)


def test_refusals_reach_the_metrics_by_reason_without_the_names_asked_for(fresh: ServeProcess) -> None:
    url = f"http://{fresh.http}"
    auth = {"Authorization": f"Bearer {READ}"}
    assert httpx.get(f"{url}/probe-name/1", headers=auth).status_code == 404
    assert httpx.get(f"{url}/f/99", headers=auth).status_code == 404
    assert httpx.get(f"{url}/f/1").status_code == 401
    text = httpx.get(f"{url}/$/metrics", headers=auth).text
    refusals = {
        (s.labels["topic"], s.labels["reason"]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "patchsync_topic_refusals"
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert refusals.get(("", "topic")) == 1.0  # the name asked for is not a label
    assert refusals.get(("f", "missing")) == 1.0  # a patch not found is not an unknown topic
    assert refusals.get(("", "auth")) == 1.0
    assert "probe-name" not in text


def test_the_http_conflict_names_the_refused_patch_and_the_head(fresh: ServeProcess) -> None:
    url = f"http://{fresh.http}/t"
    auth = {"Authorization": f"Bearer {WRITE}"}
    assert httpx.post(url, content=patch_text("c", 1, None), headers=auth).status_code == 200
    fork = httpx.post(url, content=patch_text("c", 2, None), headers=auth)
    assert fork.status_code == 400 and fork.json()["error"] == "patch-conflict"
    message = fork.json()["message"]
    assert uuid_id("c", 2) in message and uuid_id("c", 1) in message and "nothing was appended" in message
