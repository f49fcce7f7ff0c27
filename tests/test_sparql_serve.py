"""A SPARQL store served as a target topic of ``patchsync serve`` (docs/serving.md "Topics"):
the real Oxigraph server behind it, the real clients in front (``snapshot`` and ``tail --base``
over gRPC, ``GET /NAME/init`` over HTTP, ``Describe``), compared with the store's own ``dump``.

Jelly gRPC ``RdfStreamService/SubscribeRdf``: https://w3id.org/jelly/dev/specification/streaming/
(the snapshot as Jelly-RDF frames); RDF Delta's ``init-data``:
https://afs.github.io/rdf-delta/delta-server-api.html (the HTTP door's bootstrap).
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest

from patchsync._proto import patch_service_pb2

from .grpc_helpers import ServeProcess, cli, patch_stub, publish
from .serve_helpers import chain_log, patch_id, payload


def sorted_lines(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.strip())


@pytest.fixture
def served_store(oxigraph_server: Any, tmp_path: Path) -> Any:
    """The Oxigraph server holding a chained log of 30 patches, served as topic ``state`` beside
    a log topic ``log`` holding the same patches; yields (server, spec, serve process)."""
    spec = f"sparql+http://127.0.0.1:{oxigraph_server.http_port}?layout=oxigraph"
    log = chain_log(tmp_path / "log.jellyp", 30)
    cli("apply", str(log), "--target", spec, "--no-progress", cwd=tmp_path)
    server = ServeProcess(["--http", "127.0.0.1:0", "--topic", f"state={spec}", "--topic", "log=served"], tmp_path)
    server.start()
    try:
        cli("publish", str(log), server.url("log"), cwd=tmp_path)
        yield oxigraph_server, spec, server
    finally:
        server.close()


def test_a_sparql_store_is_a_target_topic(served_store: Any, tmp_path: Path) -> None:
    _, spec, server = served_store
    none = tmp_path / "none.rdfp"  # apply needs a log: --base alone loads the snapshot
    none.write_text("")
    dumped = sorted_lines(cli("dump", "--target", spec, cwd=tmp_path).stdout)
    assert len(dumped) == 60
    # Describe: a target topic at the store's last patch.
    stub = patch_stub(server.port)
    info = stub.Describe(patch_service_pb2.DescribeRequest(topic="state"), timeout=30)
    assert (info.kind, info.head) == ("target", patch_id(30))
    # snapshot over gRPC (SubscribeRdf): the store's state with its position.
    snap = tmp_path / "snap.jelly"
    cli("snapshot", "--target", server.url("state"), "-o", str(snap), cwd=tmp_path)
    cli("apply", "--base", str(snap), "--target", f"sqlite:///{tmp_path}/a.db", str(none), cwd=tmp_path)
    assert sorted_lines(cli("dump", "--target", f"sqlite:///{tmp_path}/a.db", cwd=tmp_path).stdout) == dumped
    # A new replica from the served snapshot, continuing the served log after its last patch.
    replica = f"sqlite:///{tmp_path}/b.db"
    cli("tail", "--base", server.url("state"), server.url("log"), "--target", replica, "--once", cwd=tmp_path)
    assert sorted_lines(cli("dump", "--target", replica, cwd=tmp_path).stdout) == dumped
    status = cli("status", "--target", replica, cwd=tmp_path).stdout
    assert f"last id {patch_id(30)};" in status
    # The HTTP door's bootstrap (GET /state/init): the same snapshot, loaded by --base.
    with urllib.request.urlopen(f"http://{server.http}/state/init", timeout=60) as answer:
        assert answer.headers["Content-Type"] == "application/x-jelly-rdf"
        (tmp_path / "init.jelly").write_bytes(answer.read())
    cli(
        "apply",
        "--base",
        str(tmp_path / "init.jelly"),
        "--target",
        f"sqlite:///{tmp_path}/c.db",
        str(none),
        cwd=tmp_path,
    )
    assert sorted_lines(cli("dump", "--target", f"sqlite:///{tmp_path}/c.db", cwd=tmp_path).stdout) == dumped
    # N-Quads on Accept: application/n-quads (docs/serving.md), as a log topic's bootstrap.
    asked = urllib.request.Request(f"http://{server.http}/state/init", headers={"Accept": "application/n-quads"})
    with urllib.request.urlopen(asked, timeout=60) as answer:
        assert answer.headers["Content-Type"] == "application/n-quads"
        assert sorted_lines(answer.read().decode()) == dumped
    # Read-only, as every target topic.
    with pytest.raises(grpc.RpcError) as refused:
        publish(stub, "state", [payload(31, 30)])
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]


def test_a_served_store_that_is_down_is_refused_in_one_line(served_store: Any, tmp_path: Path) -> None:
    store, _, server = served_store
    store.stop()
    done = cli("snapshot", "--target", server.url("state"), "-o", str(tmp_path / "s.jelly"), cwd=tmp_path, check=False)
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "does not answer" in done.stderr, done.stderr
    assert not (tmp_path / "s.jelly").exists()
    # Back up: served again, with nothing to restart on the serve side.
    store.start()
    cli("snapshot", "--target", server.url("state"), "-o", str(tmp_path / "s.jelly"), cwd=tmp_path)
