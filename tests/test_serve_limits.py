"""``patchsync serve`` stays available when clients are slow, stalled or many, and keeps its
memory bounded: timeouts on every wait, stream slots only for complete requests, bounded
connections, answers a few megabytes at a time, and each publisher answered its own patch.

Real servers on loopback (in a thread, or a child process where the test needs its log or a
resource limit), driven by raw sockets, httpx and stock grpcio clients. Loops are bounded;
where a test waits for the server to act on a timeout, the timeout is short (1 s) and the
wait long (30 s), so a loaded machine only makes the test slower.

HTTP: RFC 9110 (https://www.rfc-editor.org/rfc/rfc9110) 15.5.9 (408 Request Timeout) and
15.6.4 (503 Service Unavailable); gRPC: the default 4 MiB receive limit of stock clients
(https://grpc.github.io/grpc/core/group__grpc__arg__keys.html, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH).
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from patchsync._proto import patch_service_pb2, patch_service_pb2_grpc
from patchsync.logs.payloads import read_payload
from patchsync.remote.grpc_client import RETRYABLE_KEY
from patchsync.remote.http_client import split_records
from patchsync.serve.grpc_door import RESUME_KEY
from patchsync.serve.settings import Address

from .grpc_helpers import ServeProcess, cli
from .http_helpers import ServerThread, settings
from .nats_helpers import patch_id, write_chain
from .serve_helpers import payload

#: How long a test waits for the server to act on a 1 s timeout (a loaded machine is slow).
PATIENCE = 30.0
FOUR_MIB = 4 << 20


@contextmanager
def served(tmp_path: Path, **kwargs: Any) -> Iterator[ServerThread]:
    """Both doors on free loopback ports, topic ``t`` (a segment directory) unless given."""
    base = settings(tmp_path, topics=kwargs.pop("topics", (f"t={tmp_path / 't'}",)))
    listeners = {"http": Address("127.0.0.1", 0), "grpc": Address("127.0.0.1", 0)}
    server = ServerThread(replace(base, listeners=listeners, **kwargs)).start()
    try:
        yield server
    finally:
        server.stop()


def _address(server: ServerThread, door: str) -> tuple[str, int]:
    host, _, port = server.server.addresses[door].rpartition(":")
    return host, int(port)


def connect(server: ServerThread, source: str = "127.0.0.1") -> socket.socket:
    """A connection to the HTTP door from loopback address ``source``."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(PATIENCE)
    sock.connect(_address(server, "http"))
    return sock


def closed_by_server(sock: socket.socket) -> bytes:
    """Read until the server closes the connection (within :data:`PATIENCE`); what it sent."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        except TimeoutError:
            raise AssertionError(f"the server kept the connection open for {PATIENCE:g} s: {data!r}") from None
        if not chunk:
            return data
        data += chunk


def test_slow_bodies_hold_no_stream_slot(tmp_path: Path) -> None:
    # Eight bodies trickling in against --max-streams 2: appends and gRPC calls still served.
    with served(tmp_path, max_streams=2) as server, ExitStack() as stack:
        for n in range(8):
            sock = stack.enter_context(connect(server, f"127.0.0.{n + 2}"))
            sock.sendall(b"POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nH id <urn")
        time.sleep(0.5)  # let the server read their headers
        answer = httpx.post(f"{server.url}/t", content=payload(1, None), headers={"Content-Type": _JELLY})
        assert answer.status_code == 200, answer.text
        host, port = _address(server, "grpc")
        with grpc.insecure_channel(f"{host}:{port}") as channel:
            stub = patch_service_pb2_grpc.PatchServiceStub(channel)
            assert stub.Describe(patch_service_pb2.DescribeRequest(topic="t"), timeout=30).version == 1


_JELLY = "application/x-jelly-rdf-patch"


def test_silent_half_sent_and_trickling_headers_and_idle_connections_are_closed(tmp_path: Path) -> None:
    with served(tmp_path, header_timeout=1.0, idle_timeout=1.0) as server:
        silent = connect(server, "127.0.0.2")
        half = connect(server, "127.0.0.3")
        half.sendall(b"GET /t/1 HTTP/1.1\r\nHo")
        trickle = connect(server, "127.0.0.4")
        trickle.sendall(b"GET /t/1 HTTP/1.1\r\nX-Slow: ")
        stop = threading.Event()

        def drip() -> None:
            # One byte of a header line every 0.2 s: progress, but never a whole header.
            while not stop.wait(0.2):
                try:
                    trickle.sendall(b"a")
                except OSError:
                    return

        dripper = threading.Thread(target=drip)
        dripper.start()
        idle = connect(server, "127.0.0.5")
        idle.sendall(b"GET /$/healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            for sock in (silent, half, trickle):
                assert closed_by_server(sock) == b""
            # A kept-alive connection is answered, then closed once idle.
            assert closed_by_server(idle).startswith(b"HTTP/1.1 200")
        finally:
            stop.set()
            dripper.join(10)
            for sock in (silent, half, trickle, idle):
                sock.close()


def test_a_body_below_the_minimum_rate_is_cut_off_with_408(tmp_path: Path) -> None:
    with served(tmp_path, body_timeout=1.0, min_body_rate=1000) as server:
        sock = connect(server)
        sock.sendall(b"POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(0.5):
                try:
                    sock.sendall(b"x" * 10)  # 20 bytes a second, far below 1000
                except OSError:
                    return

        dripper = threading.Thread(target=drip)
        dripper.start()
        try:
            answer = closed_by_server(sock)
        finally:
            stop.set()
            dripper.join(10)
            sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"the body came too slowly" in answer


def test_connections_are_bounded_per_client_address(tmp_path: Path) -> None:
    with served(tmp_path, max_client_connections=3) as server, ExitStack() as stack:
        held = [stack.enter_context(connect(server)) for _ in range(3)]
        refused = stack.enter_context(connect(server))
        answer = closed_by_server(refused)
        assert answer.startswith(b"HTTP/1.1 503") and b"127.0.0.1 holds 3 connections already" in answer
        # Another client is served meanwhile; and once one closes, the first is again.
        other = stack.enter_context(connect(server, "127.0.0.2"))
        other.sendall(b"GET /$/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert closed_by_server(other).startswith(b"HTTP/1.1 200")
        held[0].close()
        deadline = time.monotonic() + PATIENCE
        while True:
            again = stack.enter_context(connect(server))
            again.sendall(b"GET /$/healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = closed_by_server(again)
            if reply.startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                break
        assert reply.startswith(b"HTTP/1.1 200"), reply


def _low_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(128, soft), hard))


def test_running_out_of_descriptors_is_survived_without_a_traceback(tmp_path: Path) -> None:
    server = ServeProcess(
        ["--http", "127.0.0.1:0", "--topic", "t=t", "--header-timeout", "120"], tmp_path, preexec=_low_descriptor_limit
    ).start()
    try:
        host, _, port = server.http.rpartition(":")
        socks = []
        for n in range(150):  # more than the process may open
            sock = socket.socket()
            sock.bind((f"127.0.{n // 200}.{n % 200 + 2}", 0))
            sock.settimeout(PATIENCE)
            sock.connect((host, int(port)))
            sock.sendall(b"GET /t/1 HTTP/1.1\r\nHo")
            socks.append(sock)
        refused = 0
        for sock in socks:
            sock.settimeout(0.05)
            with suppress(TimeoutError, ConnectionResetError):
                refused += sock.recv(100).startswith(b"HTTP/1.1 503")
            sock.close()
        assert refused > 0  # the bound refused some at once instead of running out
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                status = httpx.get(f"http://{server.http}/$/healthz", timeout=5).status_code
            except httpx.HTTPError:
                status = 0
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err, err


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve patches of 1.5 MiB each (patch 13, small, after them)."""
    path = tmp_path_factory.mktemp("big") / "big.jellyp"
    write_chain(path, "big", 13, big=range(1, 13))
    return path


def test_the_change_feed_answers_a_few_megabytes_at_a_time(tmp_path: Path, big_log: Path) -> None:
    with served(tmp_path, topics=(f"b={big_log}",)) as server:
        url = f"{server.url}/b/changes"
        one = httpx.get(url, params={"after": 0, "limit": 60}, timeout=60)
        assert one.status_code == 200 and len(one.content) <= FOUR_MIB + (2 << 20)
        assert 1 <= len(one.json()["changes"]) < 4 and one.json()["last_version"] == len(one.json()["changes"])
        binary = httpx.get(url, params={"after": 0, "limit": 60}, headers={"Accept": "application/x-patchsync-changes"})
        assert len(binary.content) <= FOUR_MIB and len(split_records(binary.content)) == 2
        # Asked again after the last version, each form gives every patch, once, in order.
        for accept in ("application/json", "application/x-patchsync-changes"):
            versions: list[int] = []
            ids: list[str] = []
            after = 0
            for _ in range(30):
                r = httpx.get(url, params={"after": after, "limit": 1000}, headers={"Accept": accept}, timeout=60)
                if accept == "application/json":
                    body = r.json()
                    versions += [c["version"] for c in body["changes"]]
                    ids += [c["id"] for c in body["changes"]]
                    after = body["last_version"]
                else:
                    # The last version is the first one plus the records read, less one.
                    records = split_records(r.content)
                    first = int(r.headers["patchsync-first-version"])
                    last = first + len(records) - 1
                    versions += list(range(first, last + 1))
                    ids += [next(e.value for e in read_payload(p) if type(e).__name__ == "Header") for p in records]
                    after = last
                if after == 13:
                    break
            assert versions == list(range(1, 14))
            assert [i.strip("<>") for i in ids] == [patch_id("big", n) for n in range(1, 14)]
        # tail http:// reads the whole log through these short answers.
        db = tmp_path / "r.db"
        done = cli("tail", f"{server.url}/b", "--target", f"sqlite:///{db}", "--once", cwd=tmp_path)
        assert "patches=13" in done.stderr, done.stderr


def test_subscribe_patch_responses_fit_a_stock_clients_4_mib(tmp_path: Path, big_log: Path) -> None:
    with served(tmp_path, topics=(f"b={big_log}",)) as server:
        host, port = _address(server, "grpc")
        with grpc.insecure_channel(f"{host}:{port}") as channel:  # default limits: 4 MiB received
            stub = patch_service_pb2_grpc.PatchServiceStub(channel)
            request = patch_service_pb2.SubscribePatchRequest(topic="b", stop_at_head=True, max_batch=256)
            responses = list(stub.SubscribePatch(request, timeout=120))
        assert all(r.ByteSize() <= FOUR_MIB for r in responses)
        assert [m.version for r in responses for m in r.batch] == list(range(1, 14))


def _subscribers(server: ServerThread) -> float:
    text = httpx.get(f"{server.url}/$/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        if family.name == "patchsync_topic_subscribers"
        for s in family.samples
    )


def test_a_stalled_subscriber_is_dropped_and_told_where_to_resume(tmp_path: Path) -> None:
    log = tmp_path / "stall.jellyp"
    write_chain(log, "stall", 48, big=range(1, 49))  # 72 MiB: more than any flow-control window
    with served(tmp_path, topics=(f"s={log}",), send_timeout=1.0) as server:
        host, port = _address(server, "grpc")
        options = [("grpc.max_receive_message_length", 64 << 20)]
        with grpc.insecure_channel(f"{host}:{port}", options=options) as channel:
            stub = patch_service_pb2_grpc.PatchServiceStub(channel)
            call = stub.SubscribePatch(patch_service_pb2.SubscribePatchRequest(topic="s"), timeout=300)
            got = [next(call).version]
            deadline = time.monotonic() + PATIENCE
            while _subscribers(server) and time.monotonic() < deadline:
                time.sleep(0.2)  # the subscriber reads nothing meanwhile
            assert _subscribers(server) == 0  # dropped: it holds nothing on the server now
            with pytest.raises(grpc.RpcError) as dropped:
                for message in call:
                    got.append(message.version)
        error: Any = dropped.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "took nothing for 1 s" in error.details()
        trailing = dict(error.trailing_metadata())
        assert trailing[RETRYABLE_KEY] == "1"
        # What it got before the end is in order. The server names the last version whose
        # sending completed; the one it was sending when it gave up may have arrived too.
        assert got == list(range(1, len(got) + 1)) and got[-1] < 48
        assert got[-1] - 1 <= int(trailing[RESUME_KEY]) <= got[-1]


def test_each_publisher_is_answered_the_version_of_its_own_patch(tmp_path: Path) -> None:
    with served(tmp_path) as server:
        host, port = _address(server, "grpc")
        with grpc.insecure_channel(f"{host}:{port}") as channel:
            stub = patch_service_pb2_grpc.PatchServiceStub(channel)
            other_done = threading.Event()

            def slow() -> Iterator[Any]:
                yield patch_service_pb2.PublishPatchRequest(topic="t", patch=payload(1, None))
                other_done.wait(PATIENCE)  # the stream stays open while another appends

            first = stub.PublishPatch.future(slow(), timeout=120)
            describe = patch_service_pb2.DescribeRequest(topic="t")
            deadline = time.monotonic() + PATIENCE
            while stub.Describe(describe).version < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            second = stub.PublishPatch(
                iter([patch_service_pb2.PublishPatchRequest(topic="t", patch=payload(2, 1))]), timeout=60
            )
            other_done.set()
            answer = first.result()
        assert (second.version, second.patch_id, second.head, second.head_version) == (2, _id(2), _id(2), 2)
        # The first stream's patch is version 1, however far the log went meanwhile.
        assert (answer.version, answer.patch_id, answer.appended) == (1, _id(1), 1)
        assert (answer.head, answer.head_version) == (_id(1), 1)


def _id(n: int) -> str:
    from .serve_helpers import patch_id as serve_patch_id

    return serve_patch_id(n)


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", "serve", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_start_up_faults_are_one_line_and_exit_2(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    (tmp_path / "tokens").write_bytes(b"read \xff\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = [
            (["--listen", f"127.0.0.1:{port}"], f"--listen 127.0.0.1:{port}: cannot listen there"),
            (["--http", f"127.0.0.1:{port}"], f"--http 127.0.0.1:{port}:"),
            (["--listen", "127.0.0.1:0", "--tls-cert", str(key), "--tls-key", str(key)], f"--tls-cert {key}:"),
            (["--http", "127.0.0.1:0", "--tls-cert", str(key), "--tls-key", str(key)], f"--tls-cert {key}:"),
            (["--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", "nokey"], "--tls-key nokey: cannot"),
            (["--http", "127.0.0.1:0", "--tokens", "tokens"], "tokens: the tokens file is not UTF-8"),
        ]
        for args, expected in cases:
            done = _serve(*args, "--topic", "t=t.jellyp", cwd=tmp_path)
            assert done.returncode == 2, (args, done.stderr)
            assert expected in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)


def test_clients_that_go_away_midway_leave_no_traceback(tmp_path: Path) -> None:
    # A client closing its connection in the middle of a body, of a change-feed answer or of
    # a subscription is not a fault of the server: nothing to answer, nothing to log.
    log = tmp_path / "big.jellyp"
    write_chain(log, "gone", 8, big=range(1, 9))
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", f"b={log}", "--topic", "t=t"], tmp_path).start()
    try:
        host, _, port = server.http.rpartition(":")
        for request in (
            b"POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nH id <urn",
            b"GET /b/changes?limit=100 HTTP/1.1\r\nHost: x\r\n\r\n",
            b"GET /b/changes?limit=100 HTTP/1.1\r\nHost: x\r\nAccept: application/x-patchsync-changes\r\n\r\n",
        ):
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(request)
                time.sleep(0.3)
        with grpc.insecure_channel(server.address, options=[("grpc.max_receive_message_length", 64 << 20)]) as ch:
            call = patch_service_pb2_grpc.PatchServiceStub(ch).SubscribePatch(
                patch_service_pb2.SubscribePatchRequest(topic="b"), timeout=60
            )
            next(call)
            call.cancel()
        assert httpx.get(f"http://{server.http}/$/healthz").status_code == 200
    finally:
        code, _, err = server.stop()
    assert code == 0 and "Traceback" not in err and "internal error" not in err, err
