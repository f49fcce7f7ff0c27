"""``patchsync serve``'s gRPC door end to end: a real server on loopback, real clients.

Protocol: the Jelly gRPC streaming protocol, https://w3id.org/jelly/1.0.0/specification/streaming
("Subscribing to a stream", "Stream options handling", "Publishing a stream"); chain rules
of RDF Patch logs, https://afs.github.io/rdf-delta/rdf-patch-logs.html ("Identifying Patches").
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from patchsync._proto import grpc_pb2, grpc_pb2_grpc, patch_service_pb2, rdf_pb2
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.events import RdfOptions
from patchsync.logs.payloads import NT_TERMS, read_patches, read_payload
from patchsync.remote.errors import StreamUnavailable
from patchsync.remote.grpc_client import GrpcLog

from .grpc_helpers import ROOT, ServeProcess, bearer, channel, cli, patch_stub, publish, subscribe
from .helpers import content
from .serve_helpers import chain_log, patch_id, payload

LIBRARY = ROOT / "examples" / "library.rdfp"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One server for the tests that share it: tokens, a log topic, a target topic."""
    folder = tmp_path_factory.mktemp("served")
    (folder / "tokens").write_text("read r-token\nwrite w-token\n")
    cli("apply", str(LIBRARY), "--target", f"sqlite:///{folder}/db.sqlite", cwd=folder)
    server = ServeProcess(
        [
            "--tokens",
            "tokens",
            "--topic",
            "log=log.jellyp",
            "--topic",
            "rdf=rdf.jellyp",
            "--topic",
            "cli=cli.jellyp",
            "--topic",
            f"db=sqlite:///{folder}/db.sqlite",
        ],
        folder,
    ).start()
    yield server
    server.close()


def code_of(call: object) -> grpc.StatusCode:
    return call.code()  # type: ignore[attr-defined,no-any-return]


def test_every_auth_case(served: ServeProcess) -> None:
    stub = patch_stub(served.port)
    for token, code in ((None, grpc.StatusCode.UNAUTHENTICATED), ("nope", grpc.StatusCode.UNAUTHENTICATED)):
        with pytest.raises(grpc.RpcError) as err:
            publish(stub, "log", [payload(1, None)], token)
        assert code_of(err.value) == code
        with pytest.raises(grpc.RpcError) as err:
            list(subscribe(stub, "log", token=token))
        assert code_of(err.value) == code
    # A read token reads, and may not publish: nothing appended.
    with pytest.raises(grpc.RpcError) as err:
        publish(stub, "log", [payload(1, None)], "r-token")
    assert code_of(err.value) == grpc.StatusCode.PERMISSION_DENIED
    assert "read only" in err.value.details()  # type: ignore[attr-defined]
    info = stub.Describe(patch_service_pb2.DescribeRequest(topic="log"), metadata=bearer("r-token"))
    assert (info.kind, info.version) == ("log", 0)
    # A target topic is read-only even for a write token.
    with pytest.raises(grpc.RpcError) as err:
        publish(stub, "db", [payload(1, None)], "w-token")
    assert code_of(err.value) == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as err:
        stub.Describe(patch_service_pb2.DescribeRequest(topic="nope"), metadata=bearer("r-token"))
    assert code_of(err.value) == grpc.StatusCode.NOT_FOUND


def test_publish_subscribe_chain_and_duplicates(served: ServeProcess) -> None:
    stub = patch_stub(served.port)
    topic = "log"
    start = stub.Describe(patch_service_pb2.DescribeRequest(topic=topic), metadata=bearer("r-token")).version
    assert start == 0
    answer = publish(stub, topic, [payload(n, n - 1 if n > 1 else None) for n in range(1, 6)], "w-token")
    assert (answer.version, answer.head, answer.appended, answer.duplicates) == (5, patch_id(5), 5, 0)
    # Sent again (a rerun): acknowledged, appended once.
    again = publish(stub, topic, [payload(4, 3), payload(5, 4)], "w-token")
    assert (again.version, again.appended, again.duplicates) == (5, 0, 2)
    # A fork: FAILED_PRECONDITION naming both ids, nothing appended.
    with pytest.raises(grpc.RpcError) as err:
        publish(stub, topic, [payload(9, 3)], "w-token")
    assert code_of(err.value) == grpc.StatusCode.FAILED_PRECONDITION
    assert patch_id(3) in err.value.details() and patch_id(5) in err.value.details()  # type: ignore[attr-defined]
    got = list(subscribe(stub, topic, token="r-token"))
    assert [(m.version, m.patch_id) for m in got] == [(n, patch_id(n)) for n in range(1, 6)]
    assert [content(read_payload(m.patch)) for m in got] == [
        content(read_payload(payload(n, n - 1 if n > 1 else None))) for n in range(1, 6)
    ]
    after = list(subscribe(stub, topic, token="r-token", after=3))
    assert [m.version for m in after] == [4, 5]
    # A malformed patch: INVALID_ARGUMENT naming the message, nothing appended.
    with pytest.raises(grpc.RpcError) as err:
        publish(stub, topic, [payload(6, 5)[:-2]], "w-token")
    assert code_of(err.value) == grpc.StatusCode.INVALID_ARGUMENT
    assert "message 1" in err.value.details()  # type: ignore[attr-defined]
    assert stub.Describe(patch_service_pb2.DescribeRequest(topic=topic), metadata=bearer("r-token")).version == 5


def test_two_live_subscribers_see_every_append(served: ServeProcess) -> None:
    stub = patch_stub(served.port)
    topic = "rdf"
    base = stub.Describe(patch_service_pb2.DescribeRequest(topic=topic), metadata=bearer("r-token")).version
    results: list[list[int]] = [[], []]

    def follow(out: list[int]) -> None:
        call = subscribe(stub, topic, token="r-token", after=base, follow=True)
        for message in call:
            out.append(message.version)
            if len(out) == 3:
                call.cancel()
                return

    threads = [threading.Thread(target=follow, args=(r,)) for r in results]
    for t in threads:
        t.start()
    frames = []
    for n in range(3):
        encoder: RdfEncoder[str] = RdfEncoder(RdfOptions(), NT_TERMS, delimited=False)
        encoder.statement(f"<http://ex.org/s{n}>", "<http://ex.org/p>", f'"{n}"', None)
        encoder.finish()
        frames.append(rdf_pb2.RdfStreamFrame.FromString(encoder.take()))
    # PublishRdf: each frame one RDF message, one patch; the topic is named in the metadata.
    rdf_stub = grpc_pb2_grpc.RdfStreamServiceStub(channel(served.port))
    for frame in frames:
        rdf_stub.PublishRdf(iter([frame]), metadata=(*bearer("w-token"), ("topic", topic)), timeout=30)
    for t in threads:
        t.join(30)
    assert results == [[base + 1, base + 2, base + 3]] * 2
    patches = list(read_patches(served.cwd / "rdf.jellyp"))
    assert [p.prev for p in patches[1:]] == [p.patch_id for p in patches[:-1]]


def test_publish_rdf_refusals(served: ServeProcess) -> None:
    rdf_stub = grpc_pb2_grpc.RdfStreamServiceStub(channel(served.port))
    options = rdf_pb2.RdfStreamOptions(physical_type=1, max_name_table_size=16, max_datatype_table_size=8, version=1)
    options_row = rdf_pb2.RdfStreamRow(options=options)
    bad = rdf_pb2.RdfStreamFrame(rows=[options_row, rdf_pb2.RdfStreamRow(triple=rdf_pb2.RdfTriple())])
    with pytest.raises(grpc.RpcError) as err:
        rdf_stub.PublishRdf(iter([bad]), metadata=(*bearer("w-token"), ("topic", "log")), timeout=30)
    assert code_of(err.value) == grpc.StatusCode.INVALID_ARGUMENT
    assert "frame 0" in err.value.details() and "row 1" in err.value.details()  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as err:
        rdf_stub.PublishRdf(iter([bad]), metadata=(*bearer("w-token"), ("topic", "db")), timeout=30)
    assert code_of(err.value) == grpc.StatusCode.PERMISSION_DENIED
    # SubscribeRdf on a log topic names the patch service.
    with pytest.raises(grpc.RpcError) as err:
        list(rdf_stub.SubscribeRdf(grpc_pb2.RdfStreamSubscribe(topic="log"), metadata=bearer("r-token"), timeout=30))
    assert code_of(err.value) == grpc.StatusCode.INVALID_ARGUMENT
    assert "PatchService/SubscribePatch" in err.value.details()  # type: ignore[attr-defined]


INDEPENDENT_CLIENT = """
import io, json, sys
import grpc
sys.path.insert(0, sys.argv[1])
import grpc_pb2, grpc_pb2_grpc, rdf_pb2
from pyjelly.integrations.generic import generic_sink as pj
from pyjelly.integrations.generic.parse import parse_jelly_flat

stub = grpc_pb2_grpc.RdfStreamServiceStub(grpc.insecure_channel(sys.argv[2]))
data = io.BytesIO()
# Version 1 (no namespace rows): pyjelly's generic reader does not take namespace rows yet.
request = grpc_pb2.RdfStreamSubscribe(topic="db", requested_options=rdf_pb2.RdfStreamOptions(physical_type=2, rdf_star=True, version=1))
for frame in stub.SubscribeRdf(request, metadata=(("authorization", "Bearer r-token"),)):
    raw = frame.SerializeToString()
    n = len(raw)
    while True:
        b = n & 0x7F
        n >>= 7
        data.write(bytes([b | (0x80 if n else 0)]))
        if not n:
            break
    data.write(raw)
data.seek(0)
out = []
for st in parse_jelly_flat(data):
    out.append([str(t) for t in (st.s, st.p, st.o)] + [str(getattr(st, "g", ""))])
print(json.dumps(out))
"""


def test_an_independent_client_reads_subscribe_rdf_with_pyjelly(served: ServeProcess, tmp_path: Path) -> None:
    """A client built from proto/grpc.proto alone, decoding with pyjelly, gets the target's quads."""
    pytest.importorskip("pyjelly")
    from grpc_tools import protoc

    out = tmp_path / "client"
    out.mkdir()
    proto = ROOT / "proto"
    args = ["protoc", f"-I{proto}", f"--python_out={out}", f"--grpc_python_out={out}"]
    assert protoc.main([*args, str(proto / "rdf.proto"), str(proto / "grpc.proto")]) == 0
    script = tmp_path / "client.py"
    script.write_text(INDEPENDENT_CLIENT)
    done = subprocess.run(
        [sys.executable, str(script), str(out), served.address], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    statements = json.loads(done.stdout)
    dumped = cli("dump", "--target", f"sqlite:///{served.cwd}/db.sqlite", cwd=served.cwd).stdout.splitlines()
    assert len(statements) == len([line for line in dumped if line.strip()]) > 0


def test_requested_options_honoured_or_refused_naming_the_option(served: ServeProcess) -> None:
    rdf_stub = grpc_pb2_grpc.RdfStreamServiceStub(channel(served.port))

    def frames(options: rdf_pb2.RdfStreamOptions) -> list[rdf_pb2.RdfStreamFrame]:
        request = grpc_pb2.RdfStreamSubscribe(topic="db", requested_options=options)
        return list(rdf_stub.SubscribeRdf(request, metadata=bearer("r-token"), timeout=30))

    got = frames(rdf_pb2.RdfStreamOptions(physical_type=2, rdf_star=True, max_name_table_size=64, version=1))
    first = got[0].rows[0].options
    assert first.physical_type == 2 and first.max_name_table_size == 64 and first.version == 1
    assert "patchsync.position" in got[0].metadata
    # The library's data has named graphs: a TRIPLES stream cannot carry it; and a quoted
    # triple, which a stream without rdf_star cannot carry.
    for refused, option in (({"physical_type": 1, "rdf_star": True}, "TRIPLES"), ({"physical_type": 2}, "rdf_star")):
        with pytest.raises(grpc.RpcError) as err:
            frames(rdf_pb2.RdfStreamOptions(version=1, **refused))
        assert code_of(err.value) == grpc.StatusCode.INVALID_ARGUMENT
        assert option in err.value.details()  # type: ignore[attr-defined]
    with pytest.raises(grpc.RpcError) as err:
        frames(rdf_pb2.RdfStreamOptions(physical_type=2, max_name_table_size=4))
    assert code_of(err.value) == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_name_table_size" in err.value.details()  # type: ignore[attr-defined]


def test_command_line_clients_take_a_token(served: ServeProcess, tmp_path: Path) -> None:
    log = chain_log(tmp_path / "source.jellyp", 5)
    (tmp_path / "w").write_text("w-token\n")
    (tmp_path / "r").write_text("r-token\n")
    url = served.url("cli")
    refused = cli("publish", str(log), url, cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "token is required" in refused.stderr
    refused = cli("publish", str(log), url, "--token-file", "r", cwd=tmp_path, check=False)
    assert refused.returncode != 0 and "read only" in refused.stderr
    assert "5 patches published" in cli("publish", str(log), url, "--token-file", "w", cwd=tmp_path).stdout
    replica = f"sqlite:///{tmp_path}/replica.sqlite"
    cli("tail", url, "--target", replica, "--once", cwd=tmp_path, env={"PATCHSYNC_TOKEN": "r-token"})
    status = cli("status", "--target", replica, cwd=tmp_path, env={"PATCHSYNC_TOKEN": "r-token"}).stdout
    assert "5 patches" in status and "0 messages" in status


def test_health(served: ServeProcess) -> None:
    stub = health_pb2_grpc.HealthStub(channel(served.port))
    answer = stub.Check(health_pb2.HealthCheckRequest(service="patchsync.v1.PatchService"), timeout=10)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_catch_up_equals_a_local_apply_and_survives_kill_9(tmp_path: Path) -> None:
    """Publish a log, kill -9 the server, publish again (nothing twice), tail, kill -9, tail on."""
    log = chain_log(tmp_path / "source.jellyp", 300)
    server = ServeProcess(["--topic", "t=served"], tmp_path).start()
    try:
        url = server.url("t")
        publisher = subprocess.Popen(
            [sys.executable, "-m", "patchsync", "publish", str(log), url], cwd=tmp_path, stderr=subprocess.PIPE
        )
        server_log = tmp_path / "served" / "patch-0000000001.jellyp"
        from .process_helpers import wait_for

        wait_for(lambda: server_log.exists() and server_log.stat().st_size > 1000, 300, "the first patches")
        server.kill()  # during the publish
        publisher.wait(120)
        server.start()
        url = server.url("t")
        cli("publish", str(log), url, cwd=tmp_path)
        ids = [p.patch_id for p in read_patches(server_log)]
        assert ids == [patch_id(n) for n in range(1, 301)]  # every patch once, in order

        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        cli("tail", url, "--target", replica, "--once", cwd=tmp_path)
        server.kill()
        server.start()
        extra = chain_log(tmp_path / "extra.jellyp", 310)
        cli("publish", str(extra), server.url("t"), cwd=tmp_path)
        cli("tail", server.url("t"), "--target", replica, "--once", cwd=tmp_path)
        local = f"sqlite:///{tmp_path}/local.sqlite"
        cli("apply", str(extra), "--target", local, cwd=tmp_path)
        dump = [cli("dump", "--target", t, cwd=tmp_path).stdout for t in (replica, local)]
        assert sorted(dump[0].splitlines()) == sorted(dump[1].splitlines())
        code, out, _ = server.stop()
        assert code == 0 and "stopped" in out
    finally:
        server.close()


def test_limits_and_listeners(tmp_path: Path) -> None:
    refused = cli("serve", "--listen", "0.0.0.0:0", "--topic", "t=t.jellyp", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "not a loopback address and no --tokens" in refused.stderr
    server = ServeProcess(["--topic", "t=t.jellyp", "--max-streams", "1", "--grace", "1"], tmp_path).start()
    try:
        stub = patch_stub(server.port)
        live = subscribe(stub, "t", follow=True)
        # Wait until the first stream is being served, then a second one is one too many.
        from .process_helpers import wait_for

        busy: list[grpc.RpcError] = []

        def refused_busy() -> bool:
            try:
                stub.Describe(patch_service_pb2.DescribeRequest(topic="t"), timeout=5)
            except grpc.RpcError as exc:
                busy.append(exc)
                return code_of(exc) == grpc.StatusCode.RESOURCE_EXHAUSTED
            return False

        wait_for(refused_busy, 120, "RESOURCE_EXHAUSTED for a second stream")
        # Busy is worth retrying (a tail backs off), unlike a message over the size limit.
        assert ("patchsync-retryable", "1") in tuple(busy[-1].trailing_metadata() or ())  # type: ignore[attr-defined]
        with GrpcLog(server.url("t")) as client:
            assert isinstance(client.error(busy[-1]), StreamUnavailable)
        # SIGTERM: the live subscription ends cleanly, the server exits 0.
        code, _, err = server.stop()
        assert code == 0, err
        assert list(live) == []
    finally:
        server.close()
