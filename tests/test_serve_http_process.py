"""The HTTP door as processes use it: ``kill -9`` of the server during appends, TLS, the
``http://`` source kind (``tail`` and ``publish``), and two servers on one NATS stream.

Exactly-once over a crash is the rule of RDF Patch logs (<https://afs.github.io/rdf-delta/rdf-patch-logs.html>,
"Identifying Patches"): every patch the server acknowledged is in the log after a restart,
and one sent again (its id in the log) is not appended twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.targets.sql import SqlTarget
from patchsync.serve.delta_protocol import datasource_id
from patchsync.sources import resolve_source

from .apply_helpers import state
from .http_helpers import patch_text, serving, start_serve, uuid_id
from .nats_helpers import write_chain


def _feed_ids(url: str) -> list[str]:
    body = httpx.get(f"{url}/changes", params={"after": 0, "limit": 10000}).json()
    return [c["id"] for c in body["changes"]]


def test_kill_9_during_appends_keeps_every_acknowledged_patch_once(
    tmp_path: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    args = ["--http", "127.0.0.1:0", "--topic", f"k={tmp_path / 'k'}"]
    proc, address = start_serve(args)
    daemons.append(proc)
    url = f"http://{address}/k"
    acknowledged: list[int] = []
    stop = threading.Event()

    def append() -> None:
        with httpx.Client() as client:
            n = 1
            while not stop.is_set():
                try:
                    r = client.post(url, content=patch_text("k", n, n - 1 or None))
                except httpx.HTTPError:
                    return
                assert r.status_code == 200, r.text
                acknowledged.append(n)
                n += 1

    writer = threading.Thread(target=append)
    writer.start()
    while len(acknowledged) < 40:
        threading.Event().wait(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stop.set()
    writer.join(30)
    proc, address = start_serve(args)
    daemons.append(proc)
    url = f"http://{address}/k"
    ids = _feed_ids(url)
    expected = [f"uuid:{uuid_id('k', n)}" for n in acknowledged]
    assert ids[: len(expected)] == expected  # every acknowledged patch, in order
    assert len(ids) - len(expected) <= 1  # at most the one in flight when killed
    assert len(set(ids)) == len(ids)
    # The writer's rerun sends its last patches again: acknowledged, not appended twice.
    last = len(ids)
    for n in range(max(1, last - 2), last + 3):
        assert httpx.post(url, content=patch_text("k", n, n - 1 or None)).status_code == 200
    ids = _feed_ids(url)
    assert ids == [f"uuid:{uuid_id('k', n)}" for n in range(1, last + 3)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0


def test_tls_and_the_https_source_kind(tmp_path: Path, daemons: list[subprocess.Popen[str]]) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    tokens = tmp_path / "tokens"
    tokens.write_text("write secret\n")
    args = ["--http", "127.0.0.1:0", "--topic", f"s={tmp_path / 's'}", "--tls-cert", str(cert), "--tls-key", str(key)]
    proc, address = start_serve([*args, "--tokens", str(tokens)])
    daemons.append(proc)
    url = f"https://{address}/s"
    log = tmp_path / "a.jellyp"
    write_chain(log, "tls", 20, size=2)
    env = os.environ | {"PATCHSYNC_TLS_CA": str(cert), "PATCHSYNC_TOKEN": "secret"}
    run = [sys.executable, "-m", "patchsync"]
    # Without the CA the certificate is not trusted; without the token the server refuses.
    untrusted = subprocess.run([*run, "publish", str(log), url], capture_output=True, text=True)
    assert untrusted.returncode != 0 and "Traceback" not in untrusted.stderr
    assert "certificate is not trusted" in untrusted.stderr and untrusted.stderr.count("\n") == 1
    # A tail stops at once instead of retrying an untrusted server as if it were down.
    untrusted_tail = subprocess.run(
        [*run, "tail", url, "--target", f"sqlite:///{tmp_path / 'u.db'}", "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"PATCHSYNC_TOKEN": "secret"},
    )
    assert untrusted_tail.returncode != 0 and "--tls-ca" in untrusted_tail.stderr, untrusted_tail.stderr
    no_token = subprocess.run(
        [*run, "publish", str(log), url], capture_output=True, text=True, env=env | {"PATCHSYNC_TOKEN": ""}
    )
    assert no_token.returncode != 0 and "401" in no_token.stderr and no_token.stderr.count("\n") == 1
    published = subprocess.run([*run, "publish", str(log), url], capture_output=True, text=True, env=env)
    assert published.returncode == 0, published.stderr
    db = tmp_path / "r.db"
    tailed = subprocess.run(
        [*run, "tail", url, "--target", f"sqlite:///{db}", "--once"], capture_output=True, text=True, env=env
    )
    assert tailed.returncode == 0, tailed.stderr
    reference = MemoryTarget()
    apply_file(log, reference)
    target = SqlTarget(f"sqlite:///{db}")
    try:
        assert state(target) == state(reference)
    finally:
        target.close()


def test_tail_of_a_served_log_resumes_from_its_checkpoint_and_equals_apply(
    tmp_path: Path, daemons: list[subprocess.Popen[str]]
) -> None:
    first, second = tmp_path / "a.jellyp", tmp_path / "b.jellyp"
    ids = write_chain(first, "t", 30, size=3)
    write_chain(second, "t", 30, start=31, prev=ids[-1], size=3)
    db = tmp_path / "r.db"
    with serving(tmp_path) as server:
        url = f"{server.url}/t"
        httpx.post(server.url + "/$/rpc", json={"operation": "create_datasource", "arg": {"name": "t"}})
        publish = resolve_source(url).publish()
        assert publish([first], url).published == 30
        tail = [sys.executable, "-m", "patchsync", "tail", url, "--target", f"sqlite:///{db}"]
        assert subprocess.run([*tail, "--once"], capture_output=True).returncode == 0
        assert publish([first, second], url).published == 30  # continues the head
        # The daemon follows live: killed with -9 mid-way, it resumes from its checkpoint.
        proc = subprocess.Popen([*tail, "--poll-interval", "0.2"], stderr=subprocess.PIPE, text=True)
        daemons.append(proc)
        threading.Event().wait(1.0)
        proc.kill()
        proc.wait()
        done = subprocess.run([*tail, "--once"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    reference = MemoryTarget()
    apply_file(first, reference)
    apply_file(second, reference)
    target = SqlTarget(f"sqlite:///{db}")
    try:
        assert state(target) == state(reference)
        assert target.checkpoint(url).offset == 60  # type: ignore[union-attr]
    finally:
        target.close()


def test_two_servers_on_one_nats_stream_both_append_and_never_fork(tmp_path: Path, nats_stream: str) -> None:
    topic = f"n={nats_stream}"
    with serving(tmp_path / "a", topics=[topic]) as one, serving(tmp_path / "b", topics=[topic]) as two:
        urls = [f"{one.url}/n", f"{two.url}/n"]
        wins = {0: 0, 1: 0}

        def write(w: int) -> None:
            # Each writer chains its patches on the head it last saw; a conflict (the other
            # server appended meanwhile) makes it read the head again and retry.
            with httpx.Client() as client:
                for k in range(15):
                    while True:
                        head = client.get(f"{urls[w]}/changes", params={"after": 0, "limit": 1}).json()["head_id"]
                        prev = f"H prev <{head}> .\n" if head else ""
                        text = f'H id <uuid:{uuid_id(f"w{w}", k)}> .\n{prev}TX .\nA <http://e/{w}> <http://e/p> "{k}" .\nTC .\n'
                        r = client.post(urls[w], content=text)
                        if r.status_code == 200:
                            wins[w] += 1
                            break
                        assert r.status_code == 400 and r.json()["error"] == "patch-conflict", r.text

        writers = [threading.Thread(target=write, args=(w,)) for w in (0, 1)]
        for t in writers:
            t.start()
        for t in writers:
            t.join(120)
        assert wins == {0: 15, 1: 15}
        for url in urls:
            changes = httpx.get(f"{url}/changes", params={"after": 0, "limit": 100, "wait": 5}).json()["changes"]
            assert len(changes) == 30
            prev = None
            for change in changes:
                text = change["patch"]
                assert (f"H prev <{prev}> ." in text) if prev else ("H prev" not in text)  # one chain, no fork
                prev = change["id"]


def test_a_nats_topics_init_points_to_what_can_start_a_replica(tmp_path: Path, nats_stream: str) -> None:
    """GET /NAME/init of a NATS topic: no snapshot file is kept for a stream here, and
    ``patchsync snapshot`` cannot make one, so the 404 names what can (#46)."""
    with serving(tmp_path, topics=[f"n={nats_stream}"]) as server:
        answer = httpx.get(f"{server.url}/n/init")
    assert answer.status_code == 404, answer.text
    assert "a NATS stream has no directory here" in answer.text, answer.text
    assert "--base http://HOST:PORT/TARGET/init" in answer.text and "--base FILE" in answer.text, answer.text
    assert "patchsync snapshot" not in answer.text, answer.text


def test_rdf_delta_lock_operations_over_http_with_tokens(tmp_path: Path, daemons: list[subprocess.Popen[str]]) -> None:
    """RDF Delta's patch log lock through a real ``patchsync serve --http``, as Java's
    ``DeltaLinkHTTP`` sends it (<https://github.com/afs/rdf-delta>, rdf-delta-client
    ``DeltaLinkHTTP``; the server side ``S_DRPC`` and ``PatchLogIndexBase``): lock operations
    need a write token; appends do not need the lock (RDF Delta's lock is advisory)."""
    tokens = tmp_path / "tokens"
    tokens.write_text("write w-secret\nread r-secret\n")
    proc, address = start_serve(["--http", "127.0.0.1:0", "--topic", f"t={tmp_path / 't'}", "--tokens", str(tokens)])
    daemons.append(proc)
    write = {"Authorization": "Bearer w-secret"}
    ds = datasource_id("t")

    def rpc(op: str, arg: dict[str, object], headers: dict[str, str] = write) -> httpx.Response:
        body = json.dumps({"operation": op, "opid": "1", "arg": arg})
        return httpx.post(f"http://{address}/$/rpc", content=body, headers=headers)

    assert rpc("lock", {"datasource": ds}, {}).status_code == 401
    assert rpc("lock", {"datasource": ds}, {"Authorization": "Bearer r-secret"}).status_code == 403
    assert rpc("lock-read", {"datasource": ds}, {"Authorization": "Bearer r-secret"}).status_code == 403
    first = rpc("lock", {"datasource": ds})
    assert first.status_code == 200 and first.headers["Content-Type"] == "application/json"
    session = first.json()["lock-ref"]
    assert rpc("lock", {"datasource": f"id:{ds}"}).json() == {"lock-ref": None}
    assert rpc("lock-read", {"datasource": ds}).json() == {"lock-ref": session, "lock-ticks": 1}
    refresh = {"array": [{"datasource": ds, "lock-ref": session}]}
    assert rpc("lock-refresh", refresh).json() == {"array": []}
    assert rpc("lock-read", {"datasource": ds}).json()["lock-ticks"] == 2
    appended = httpx.post(f"http://{address}/{ds}", content=patch_text("lk", 1, None), headers=write)
    assert appended.status_code == 200, appended.text  # without holding the lock
    other = str(uuid.uuid4())
    assert rpc("lock-grab", {"datasource": ds, "lock-ref": other}).json() == {"lock-ref": None}
    grabbed = rpc("lock-grab", {"datasource": ds, "lock-ref": session}).json()["lock-ref"]
    assert grabbed not in (None, session)
    assert rpc("lock-refresh", refresh).json() == refresh  # the old session no longer holds it
    assert rpc("unlock", {"datasource": ds, "lock-ref": grabbed}).json() == {}
    assert rpc("lock-read", {"datasource": ds}).json() == {}
    missing = rpc("lock", {"datasource": other})
    assert missing.status_code == 404 and missing.headers["Content-Type"].startswith("text/plain")
    assert rpc("lock-grab", {"datasource": ds}).status_code == 400
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0
