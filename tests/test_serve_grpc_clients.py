"""Clients of ``patchsync serve``'s gRPC door beyond tail and publish: bootstrapping a replica
from a served target's snapshot, a recorder committing to a topic, batched subscriptions,
TLS, a NATS stream served by two processes, metrics, and a large catch-up.

Protocol: the Jelly gRPC streaming protocol, https://w3id.org/jelly/1.0.0/specification/streaming
("Subscribing to a stream"); chain rules of RDF Patch logs,
https://afs.github.io/rdf-delta/rdf-patch-logs.html ("Identifying Patches").
"""

from __future__ import annotations

import shutil
import threading
import urllib.request
from contextlib import closing
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rdflib import Dataset, Literal, Namespace

from patchsync._proto import patch_service_pb2, patch_service_pb2_grpc
from patchsync.apply.snapshot_file import read_position
from patchsync.capture import record
from patchsync.errors import ChainError
from patchsync.logs.payloads import read_patches
from patchsync.remote.grpc_client import GrpcWriter
from patchsync.remote.interface import Appended, RemoteLog
from patchsync.remote.rules import lag
from patchsync.sources import resolve_source

from .grpc_helpers import ServeProcess, cli, patch_stub, publish, subscribe
from .process_helpers import wait_for_value
from .serve_helpers import chain_log, patch_id, payload, self_signed

EX = Namespace("http://example.org/")


def dump(target: str, cwd: Path) -> list[str]:
    return sorted(cli("dump", "--target", target, cwd=cwd).stdout.splitlines())


def test_a_replica_starts_from_a_served_snapshot_and_tails_on(tmp_path: Path) -> None:
    """``--base grpc://…/TARGET`` and ``snapshot --target grpc://…``: a new replica loads the
    served target's state at its position, then tails the log topic from the next patch;
    it ends equal to a replica that applied every patch."""
    first = chain_log(tmp_path / "first.jellyp", 40)
    everything = chain_log(tmp_path / "all.jellyp", 55)
    served = f"sqlite:///{tmp_path}/served.sqlite"
    cli("apply", str(first), "--target", served, cwd=tmp_path)
    server = ServeProcess(["--topic", "log=log", "--topic", f"db={served}"], tmp_path).start()
    try:
        cli("publish", str(everything), server.url("log"), cwd=tmp_path)
        # A snapshot file fetched from the server carries the served target's position.
        out = cli("snapshot", "--target", server.url("db"), "-o", "db.jelly", cwd=tmp_path).stdout
        assert f"at patch {patch_id(40)}" in out
        position = read_position(tmp_path / "db.jelly")
        assert position is not None and position.head == patch_id(40)

        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        done = cli("tail", server.url("log"), "--target", replica, "--base", server.url("db"), "--once", cwd=tmp_path)
        assert f"continuing after patch {patch_id(40)}" in done.stderr

        # apply --base grpc:// with a local copy of the log: it continues after the base's head.
        second = f"sqlite:///{tmp_path}/second.sqlite"
        cli("apply", str(everything), "--target", second, "--base", server.url("db"), cwd=tmp_path)

        local = f"sqlite:///{tmp_path}/local.sqlite"
        cli("apply", str(everything), "--target", local, cwd=tmp_path)
        expected = dump(local, tmp_path)
        assert dump(replica, tmp_path) == expected
        assert dump(second, tmp_path) == expected

        # A log topic has no snapshot; nothing is written.
        refused = cli("snapshot", "--target", server.url("log"), "-o", "x.jelly", cwd=tmp_path, check=False)
        assert refused.returncode != 0 and "has no snapshot" in refused.stderr
        assert not (tmp_path / "x.jelly").exists()

        # An output in a missing directory is the output's error, as the user named it.
        missing = cli("snapshot", "--target", server.url("db"), "-o", "nodir/x.jelly", cwd=tmp_path, check=False)
        assert missing.returncode != 0
        assert missing.stderr.strip().splitlines() == [
            "patchsync: nodir/x.jelly: cannot write: No such file or directory"
        ]
        assert not (tmp_path / "nodir").exists()
        # Every attempt above left nothing beside its output.
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    finally:
        server.close()


def test_a_base_whose_head_the_topic_lacks_is_refused(tmp_path: Path) -> None:
    served = f"sqlite:///{tmp_path}/served.sqlite"
    cli("apply", str(chain_log(tmp_path / "a.jellyp", 5)), "--target", served, cwd=tmp_path)
    server = ServeProcess(["--topic", "log=log", "--topic", f"db={served}"], tmp_path).start()
    try:
        publish(patch_stub(server.port), "log", [payload(100, None)])
        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        done = cli(
            "tail",
            server.url("log"),
            "--target",
            replica,
            "--base",
            server.url("db"),
            "--once",
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode != 0
        assert f"holds no patch {patch_id(5)}" in done.stderr and "Traceback" not in done.stderr
    finally:
        server.close()


def test_both_doors_give_one_checkpoint_after_a_patch(tmp_path: Path) -> None:
    """Where a replica of a served log stands after a patch is one rule whichever door it
    reads: the checkpoint just past a base's head holds the patch's version, a position past
    every event of that patch, its id, and the log's name as fingerprint (as the replica's
    own checkpoints do), and both clients find the patch at a version alike."""
    log = chain_log(tmp_path / "log.jellyp", 12)
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", "t=t"], tmp_path).start()
    try:
        cli("publish", str(log), server.url("t"), cwd=tmp_path)
        seen = []
        for url in (server.url("t"), f"http://127.0.0.1:{server.http_port}/t"):
            source = resolve_source(url)
            after = source.checkpoint_after()
            checkpoint = after(url, patch_id(7))
            assert checkpoint is not None and checkpoint.fingerprint == url
            seen.append((checkpoint.offset, checkpoint.frame, checkpoint.row, checkpoint.patches, checkpoint.last_id))
            assert after(url, "urn:test:elsewhere") is None
            with closing(source.connect()(source.address)) as client:
                assert [client.patch_id_at(v) for v in (1, 7, 12, 13)] == [patch_id(1), patch_id(7), patch_id(12), None]
        assert seen[0] == seen[1]
        assert seen[0][0] == 7 and seen[0][-1] == patch_id(7)
    finally:
        server.close()


def test_both_doors_answer_the_remote_log_interface_alike(tmp_path: Path) -> None:
    """Differential: the gRPC and HTTP clients of one served log answer each operation of the
    remote-log interface alike (patchsync.remote.interface.RemoteLog), and gRPC's own forms (its
    streamed pages, its lookup of a patch) agree with the defaults written over the four
    operations. Versions count the log's patches from 1 (docs/design.md, "Versions")."""
    log = chain_log(tmp_path / "log.jellyp", 30)
    last = list(read_patches(log))[-1].message()
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", "t=t"], tmp_path).start()
    try:
        cli("publish", str(log), server.url("t"), cwd=tmp_path)
        answers = []
        for url in (server.url("t"), f"http://127.0.0.1:{server.http_port}/t"):
            source = resolve_source(url)
            with closing(source.connect()(source.address)) as client:
                streamed = [m.seq for page in client.pages(0, 0.0) for m in page]
                assert streamed == [m.seq for page in RemoteLog.pages(client, 0, 0.0) for m in page]
                answers.append(
                    (
                        client.head(),
                        [(m.seq, m.payload) for m in client.read(10, 5, 0.0)],
                        streamed,
                        [client.patch_id_at(v) for v in (1, 17, 30, 31)],
                        [client.position_of(patch_id(n)) for n in (1, 17, 30)] + [client.position_of("urn:x")],
                        client.append(last),
                        lag(client, 20),
                    )
                )
                if url.startswith("grpc"):
                    assert RemoteLog.position_of(client, patch_id(17)) == 17
        assert answers[0] == answers[1]
        head, read, streamed, ids, positions, appended, behind = answers[0]
        assert (head.seq, head.patch_id) == (30, patch_id(30))
        assert [v for v, _ in read] == [11, 12, 13, 14, 15] and streamed == list(range(1, 31))
        assert ids == [patch_id(1), patch_id(17), patch_id(30), None]
        assert positions == [1, 17, 30, None]
        assert appended == Appended(30, duplicate=True)
        assert (behind.messages, behind.seconds) == (10, 0.0)
    finally:
        server.close()


def test_a_recorder_commits_to_a_served_topic(tmp_path: Path) -> None:
    """The ``writer`` role: each committed transaction is one patch appended to the topic,
    chained; a second recorder continues the chain; a forked one is refused whole."""
    server = ServeProcess(["--topic", "t=t"], tmp_path).start()
    try:
        url = server.url("t")
        ds = Dataset()
        with record(ds, url) as rec:
            with rec.transaction():
                for i in range(5):
                    rec.graph.add((EX[f"s{i}"], EX.p, Literal(i)))
            with rec.transaction():
                rec.graph.remove((EX.s1, None, None))
        with record(Dataset(), url) as rec, rec.transaction():
            rec.graph.add((EX.more, EX.p, Literal("second recorder")))
        stale = GrpcWriter(url)
        stale.head = None  # as if it had opened before the others appended
        stale.sink.header("id", stale.adapter.iri("urn:test:fork"))
        stale.sink.tx_start()
        stale.sink.tx_commit()
        stale.sink.end_patch()
        with pytest.raises(ChainError, match="urn:test:fork"):
            stale.commit("urn:test:fork")
        stale.close()
        code, _, err = server.stop()
        assert code == 0, err
        patches = list(read_patches(tmp_path / "t" / "patch-0000000001.jellyp"))
        assert len(patches) == 3
        assert [p.prev for p in patches] == [None, patches[0].patch_id, patches[1].patch_id]
        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        server.start()
        cli("tail", server.url("t"), "--target", replica, "--once", cwd=tmp_path)
        lines = dump(replica, tmp_path)
        assert len(lines) == 5 and any("second recorder" in line for line in lines)
        assert not any("/s1>" in line for line in lines)
    finally:
        server.close()


def test_batched_subscription_equals_one_patch_per_message(tmp_path: Path) -> None:
    """Differential: ``max_batch`` changes how patches are grouped into responses, not which."""
    log = chain_log(tmp_path / "log.jellyp", 120)
    server = ServeProcess(["--topic", "t=t"], tmp_path).start()
    try:
        cli("publish", str(log), server.url("t"), cwd=tmp_path)
        stub = patch_stub(server.port)

        def read(batch: int, after: int) -> tuple[list[tuple[int, str, bytes]], int]:
            request = patch_service_pb2.SubscribePatchRequest(
                topic="t",
                start=patch_service_pb2.PatchStart(after_version=after),
                stop_at_head=True,
                max_batch=batch,
            )
            got, responses = [], 0
            for response in stub.SubscribePatch(request, timeout=60):
                responses += 1
                for m in response.batch if batch > 1 else [response]:
                    got.append((m.version, m.patch_id, m.patch))
            return got, responses

        single, n_single = read(0, 7)
        batched, n_batched = read(50, 7)
        assert single == batched
        assert [v for v, _, _ in single] == list(range(8, 121))
        assert n_single == 113 and n_batched < 10
    finally:
        server.close()


def test_tls_end_to_end(tmp_path: Path) -> None:
    """``--tls-cert/--tls-key`` on the server, ``--tls-ca`` on the clients: publish, tail and
    a base over TLS; a client that does not trust the certificate, or speaks plaintext, gets nothing."""
    cert, key = self_signed(tmp_path)
    (tmp_path / "tokens").write_text("write w-token\n")
    (tmp_path / "token").write_text("w-token\n")
    log = chain_log(tmp_path / "log.jellyp", 20)
    server = ServeProcess(
        ["--topic", "t=t", "--tokens", "tokens", "--tls-cert", str(cert), "--tls-key", str(key)], tmp_path
    ).start()
    try:
        url = server.url("t")
        creds = ["--token-file", "token", "--tls-ca", str(cert)]
        cli("publish", str(log), url, *creds, cwd=tmp_path)
        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        cli("tail", url, "--target", replica, "--once", *creds, cwd=tmp_path)
        local = f"sqlite:///{tmp_path}/local.sqlite"
        cli("apply", str(log), "--target", local, cwd=tmp_path)
        assert dump(replica, tmp_path) == dump(local, tmp_path)

        def describe(channel: grpc.Channel) -> None:
            stub = patch_service_pb2_grpc.PatchServiceStub(channel)
            stub.Describe(patch_service_pb2.DescribeRequest(topic="t"), timeout=5)

        with pytest.raises(grpc.RpcError) as plaintext:
            describe(grpc.insecure_channel(server.address))
        assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE
        (tmp_path / "other").mkdir()
        other, _ = self_signed(tmp_path / "other")
        with pytest.raises(grpc.RpcError) as untrusted:
            describe(grpc.secure_channel(server.address, grpc.ssl_channel_credentials(other.read_bytes())))
        assert untrusted.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.close()


def _version(port: int) -> int:
    """Topic ``t``'s version through the server at ``port`` (-1 while it does not answer)."""
    try:
        return int(patch_stub(port).Describe(_describe("t"), timeout=5).version)
    except grpc.RpcError:
        return -1


def test_a_nats_stream_served_by_two_processes_is_never_forked(nats_stream: str, tmp_path: Path) -> None:
    """Two serve processes on one NATS stream: an append through one is seen through the
    other, and of two patches following the same head, published through different
    servers at once, exactly one is appended (the stream keeps the chain)."""
    one = ServeProcess(["--topic", f"t={nats_stream}"], tmp_path).start()
    two = ServeProcess(["--topic", f"t={nats_stream}"], tmp_path).start()
    try:
        publish(patch_stub(one.port), "t", [payload(1, None), payload(2, 1)])
        wait_for_value(lambda: _version(two.port), 2, "the head through server two")
        outcomes: list[str] = []

        def race(port: int, n: int) -> None:
            try:
                publish(patch_stub(port), "t", [payload(n, 2)])
                outcomes.append(f"appended {n}")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
                outcomes.append(f"refused {n}")

        threads = [threading.Thread(target=race, args=(port, n)) for port, n in ((one.port, 10), (two.port, 20))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(o.split()[0] for o in outcomes) == ["appended", "refused"], outcomes
        winner = int(next(o for o in outcomes if o.startswith("appended")).split()[1])
        # Both servers now serve the same three patches, in the same order.
        for server in (one, two):
            wait_for_value(lambda s=server: _version(s.port), 3, "the head")
            got = [(m.version, m.patch_id) for m in subscribe(patch_stub(server.port), "t")]
            assert got == [(1, patch_id(1)), (2, patch_id(2)), (3, patch_id(winner))]
        # A replica tailing either server gets the stream's state.
        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        cli("tail", two.url("t"), "--target", replica, "--once", cwd=tmp_path)
        assert len(dump(replica, tmp_path)) == 6
    finally:
        one.close()
        two.close()


def _describe(topic: str) -> patch_service_pb2.DescribeRequest:
    return patch_service_pb2.DescribeRequest(topic=topic)


def test_metrics_of_the_grpc_door(tmp_path: Path) -> None:
    """``--metrics``: the Prometheus text format parses, and counts what the door did."""
    server = ServeProcess(["--topic", "t=t", "--metrics", "127.0.0.1:0"], tmp_path).start()
    try:
        assert server.proc is not None and server.proc.stdout is not None
        line = server.proc.stdout.readline()
        assert line.startswith("serving metrics on "), line
        address = line.split(" on ", 1)[1].strip()
        stub = patch_stub(server.port)
        publish(stub, "t", [payload(1, None), payload(2, 1), payload(2, 1)])
        assert len(list(subscribe(stub, "t"))) == 2
        with pytest.raises(grpc.RpcError):
            publish(stub, "t", [payload(9, 7)])
        text = urllib.request.urlopen(f"http://{address}/metrics", timeout=10).read().decode()
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("patchsync_topic_head_version", (("topic", "t"),))] == 2
        assert samples[("patchsync_topic_appends_total", (("topic", "t"),))] == 2
        assert samples[("patchsync_topic_duplicates_total", (("topic", "t"),))] == 1
        assert samples[("patchsync_topic_refusals_total", (("reason", "chain"), ("topic", "t")))] == 1
        assert samples[("patchsync_topic_bytes_total", (("direction", "out"), ("topic", "t")))] > 0
        key = ("door", "grpc"), ("le", "+Inf"), ("method", "SubscribePatch"), ("topic", "t")
        assert samples[("patchsync_request_seconds_bucket", key)] == 1
    finally:
        server.close()


@pytest.mark.slow  # about 20 s: three processes apply or serve 10,000 patches
def test_a_10000_patch_catch_up_equals_a_local_apply(tmp_path: Path) -> None:
    """A served log of 10,000 small patches written by another writer (one stream, shared
    lookups: decoded and sent one patch per message), tailed through the gRPC door, gives
    the target a local ``apply`` of the same log gives."""
    log = chain_log(tmp_path / "log.jellyp", 10_000, rows=1)
    shutil.copy(log, tmp_path / "served.jellyp")
    server = ServeProcess(["--topic", "t=served.jellyp"], tmp_path).start()
    try:
        replica = f"sqlite:///{tmp_path}/replica.sqlite"
        cli("tail", server.url("t"), "--target", replica, "--once", cwd=tmp_path)
        local = f"sqlite:///{tmp_path}/local.sqlite"
        cli("apply", str(log), "--target", local, cwd=tmp_path)
        got = dump(replica, tmp_path)
        assert len(got) == 10_000
        assert got == dump(local, tmp_path)
    finally:
        server.close()
