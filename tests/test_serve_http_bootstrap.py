"""Bootstrapping from a served log, its kept description, and writing through the HTTP door.

- RDF Delta's bootstrap (``GET /{name}/init``, and its ``/init-data?datasource=X`` form,
  docs/decisions/0002-rdf-delta-http.md; <https://afs.github.io/rdf-delta/delta-server-api.html>)
  for a log topic: the snapshot ``patchsync snapshot`` wrote beside the log, served with its
  position, so a new replica loads it and continues the change feed after its version;
- the ``uri`` given to ``create_datasource`` survives a restart (RDF Delta keeps it with the
  data source);
- the ``http://`` kind's ``writer`` role: ``ingest -o http://…`` and ``Recorder(graph,
  "http://…")`` append through the server, chained on its head (RDF Patch logs,
  <https://afs.github.io/rdf-delta/rdf-patch-logs.html>, "Identifying Patches").
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import rdflib

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.snapshot_file import read_position
from patchsync.apply.targets.sql import SqlTarget
from patchsync.capture import Recorder
from patchsync.serve.datasource_files import init_path
from patchsync.serve.file_topic import FileLogTopic
from patchsync.sources import resolve_source

from .apply_helpers import state
from .http_helpers import serving
from .nats_helpers import write_chain

RUN = [sys.executable, "-m", "patchsync"]
DATA = Path(__file__).parent / "data" / "messages"


def _rpc(url: str, op: str, arg: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + "/$/rpc", json={"operation": op, "opid": "", "arg": arg})


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*RUN, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def _quads(db: Path) -> Any:
    target = SqlTarget(f"sqlite:///{db}")
    try:
        return state(target)
    finally:
        target.close()


def test_a_new_replica_starts_from_the_served_snapshot_and_continues_the_feed(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jellyp", tmp_path / "b.jellyp"
    ids = write_chain(first, "boot", 20, size=3)
    write_chain(second, "boot", 10, start=21, prev=ids[-1], size=3)
    replica, fresh = tmp_path / "replica.db", tmp_path / "fresh.db"
    with serving(tmp_path) as server:
        url = f"{server.url}/boot"
        assert _rpc(server.url, "create_datasource", {"name": "boot"}).status_code == 200
        publish = resolve_source(url).publish()
        publish([first], url)
        assert httpx.get(f"{url}/init").status_code == 404  # no snapshot yet
        _run("tail", url, "--target", f"sqlite:///{replica}", "--once")
        snapshot = tmp_path / "logs" / "boot" / "init.jelly"
        _run("snapshot", "--target", f"sqlite:///{replica}", "-o", str(snapshot))
        publish([first, second], url)  # the log moves on past the snapshot

        jelly = httpx.get(f"{url}/init")
        assert jelly.status_code == 200 and jelly.headers["content-type"] == "application/x-jelly-rdf"
        assert jelly.headers["patchsync-version"] == "20" and jelly.headers["patchsync-head"] == ids[-1]
        assert httpx.get(server.url + "/init-data", params={"datasource": "boot"}).content == jelly.content
        served = tmp_path / "served.jelly"
        served.write_bytes(jelly.content)
        position = read_position(served)
        assert position is not None and position.head == ids[-1]
        [(address, checkpoint)] = position.sources.items()
        assert address == url and (checkpoint.offset, checkpoint.last_id) == (20, ids[-1])
        nquads = httpx.get(f"{url}/init", headers={"Accept": "application/n-quads"})
        assert nquads.headers["content-type"] == "application/n-quads"
        graph = rdflib.Dataset()
        graph.parse(data=nquads.text, format="nquads")
        assert len(graph) == len(_quads(replica)[0])

        # A base taken elsewhere continues this log after the version holding its head.
        after = resolve_source(url).checkpoint_after()
        assert (after(url, ids[-1]).offset, after(url, ids[-1]).last_id) == (20, ids[-1])
        assert after(url, "urn:patch:elsewhere:1") is None
        # A fresh target: the snapshot, then the feed from version 21 (not from 1).
        done = _run("tail", url, "--target", f"sqlite:///{fresh}", "--base", f"{url}/init", "--once")
        assert f"continuing after patch {ids[-1]}" in done.stderr
        assert "from_version=21" in done.stderr and "patches=10 " in done.stderr
    reference = MemoryTarget()
    apply_file(first, reference)
    apply_file(second, reference)
    assert _quads(fresh) == state(reference)
    target = SqlTarget(f"sqlite:///{fresh}")
    try:
        assert target.checkpoint(url).offset == 30  # type: ignore[union-attr]
        assert target.checkpoint(f"base:{url}/init") is not None
    finally:
        target.close()


def test_a_snapshot_of_another_log_is_refused_and_the_file_convention(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "other", 3)
    db = tmp_path / "r.db"
    _run("apply", str(log), "--target", f"sqlite:///{db}")
    _run("snapshot", "--target", f"sqlite:///{db}", "-o", str(tmp_path / "snap.jelly"))
    # A file log's snapshot sits beside it: LOG.init.jelly.
    shutil.copy(tmp_path / "snap.jelly", tmp_path / "a.init.jelly")
    (tmp_path / "logs" / "x").mkdir(parents=True)
    shutil.copy(tmp_path / "snap.jelly", tmp_path / "logs" / "x" / "init.jelly")
    assert init_path(FileLogTopic("a", str(log), log)) == tmp_path / "a.init.jelly"
    with serving(tmp_path, topics=[f"a={log}"]) as server:
        answer = httpx.get(f"{server.url}/a/init")
        assert answer.status_code == 200 and answer.headers["patchsync-version"] == "3"
        assert answer.headers["patchsync-head"] == ids[-1]
        wrong = httpx.get(f"{server.url}/x/init")  # x's log holds none of those patches
        assert wrong.status_code == 400 and "not in the log" in wrong.text and wrong.text.count("\n") == 1
        missing = httpx.get(server.url + "/init-data", params={"datasource": "nope"})
        assert missing.status_code == 404 and "No such datasource" in missing.text
    # A base address whose kind has no bootstrap is one line, before any target is made.
    no_base = subprocess.run(
        [*RUN, "apply", str(log), "--target", f"sqlite:///{tmp_path / 'n.db'}", "--base", "nats://127.0.0.1:1/S"],
        capture_output=True,
        text=True,
    )
    assert no_base.returncode != 0 and "has no snapshot" in no_base.stderr and "Traceback" not in no_base.stderr
    assert not (tmp_path / "n.db").exists()


def test_the_uri_of_a_created_data_source_survives_a_restart(tmp_path: Path) -> None:
    uri = "http://example.org/datasets/kept"
    with serving(tmp_path) as server:
        assert _rpc(server.url, "create_datasource", {"name": "kept", "uri": uri}).status_code == 200
        assert _rpc(server.url, "create_datasource", {"name": "plain"}).status_code == 200
    assert json.loads((tmp_path / "logs" / "kept" / "datasource.json").read_text())["uri"] == uri
    with serving(tmp_path) as server:
        found = _rpc(server.url, "describe_datasource", {"uri": uri}).json()
        assert found["name"] == "kept" and found["uri"] == uri
        by_name = {d["name"]: d["uri"] for d in _rpc(server.url, "list_descriptions", {}).json()["array"]}
        assert by_name == {"kept": uri, "plain": ""}


def test_ingest_and_a_recorder_append_through_the_server(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = f"{server.url}/ing"
        assert _rpc(server.url, "create_datasource", {"name": "ing"}).status_code == 200
        messages = str(DATA / "draft-log.ttl")
        done = _run("ingest", messages, "--messages", "-o", url)
        assert "4 patches appended" in done.stdout
        again = _run("ingest", messages, "--messages", "-o", url)
        assert "0 patches appended" in again.stdout  # a rerun continues after the server's head
        local = tmp_path / "local.jellyp"
        _run("ingest", messages, "--messages", "-o", str(local))

        graph = rdflib.Graph()
        recorder = Recorder(graph, url)
        with recorder.transaction() as recorded:
            recorded.add((rdflib.URIRef("http://e/s"), rdflib.URIRef("http://e/p"), rdflib.Literal("recorded")))
        recorder.close()
        feed = httpx.get(f"{url}/changes", params={"after": 0, "limit": 100}).json()
        assert feed["head"] == 5 and "recorded" in feed["changes"][-1]["patch"]
        assert f"H prev <{feed['changes'][3]['id']}>" in feed["changes"][-1]["patch"]
        db = tmp_path / "r.db"
        _run("tail", url, "--target", f"sqlite:///{db}", "--once")
    reference = MemoryTarget()
    apply_file(local, reference)
    served = _quads(db)[0]
    assert set(reference.quads()) < served and len(served) == len(set(reference.quads())) + 1


@pytest.mark.parametrize("accept", ["application/n-quads;q=0.5, application/x-jelly-rdf", "*/*"])
def test_jelly_rdf_is_the_default_bootstrap_form(accept: str) -> None:
    from patchsync.serve.delta_protocol import accepts_nquads

    assert not accepts_nquads(accept)
    assert accepts_nquads("application/n-quads")


def _raw(url: str, request: str) -> bytes:
    """Everything the server sends for ``request`` on a connection it then closes."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as conn:
        conn.sendall(f"{request} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_head_of_a_streamed_answer_sends_its_headers_and_no_content(tmp_path: Path) -> None:
    # RFC 9110 §9.3.2 (https://www.rfc-editor.org/rfc/rfc9110#section-9.3.2): "The server
    # SHOULD send the same header fields in response to a HEAD request as it would have
    # sent if the request method had been GET", and a HEAD answer has no content.
    log = tmp_path / "a.jellyp"
    write_chain(log, "head", 3)
    db = tmp_path / "r.db"
    _run("apply", str(log), "--target", f"sqlite:///{db}")
    _run("snapshot", "--target", f"sqlite:///{db}", "-o", str(tmp_path / "a.init.jelly"))
    with serving(tmp_path, topics=[f"a={log}"]) as server:
        for path, content_type in (("/a/changes?after=0", "application/json"), ("/a/init", "application/x-jelly-rdf")):
            got = _raw(server.url, f"GET {path}")
            head = _raw(server.url, f"HEAD {path}")
            assert got.startswith(b"HTTP/1.1 200") and head.startswith(b"HTTP/1.1 200"), (got[:80], head[:80])
            assert f"content-type: {content_type}".encode() in head.lower()
            assert len(got.partition(b"\r\n\r\n")[2]) > 0
            assert head.partition(b"\r\n\r\n")[2] == b""
