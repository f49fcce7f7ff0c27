"""The HTTP door of ``patchsync serve`` against real clients on loopback.

RDF Delta's patch log protocol as RDF Delta 1.1 speaks it (facts and sources in
docs/decisions/0002-rdf-delta-http.md; the API page is
<https://afs.github.io/rdf-delta/delta-server-api.html>), driven by the unmodified
``rdf-delta`` client from PyPI and by raw HTTP for every status and refusal. The chain
rules are those of RDF Patch logs (<https://afs.github.io/rdf-delta/rdf-patch-logs.html>,
"Identifying Patches"): a patch whose ``prev`` is not the head is refused, nothing of it
appended.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rdf_delta import DeltaClient

from patchsync.codec.framing import read_varint
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import PatchsyncError
from patchsync.logs.payloads import NT_TERMS, encode_patch, text_options
from patchsync.remote.http_client import HttpLog, split_records
from patchsync.serve.auth import Access, Tokens
from patchsync.serve.delta_protocol import datasource_id
from patchsync.serve.http_door import INLINE_BYTES
from patchsync.serve.http_door import patch_text as door_text

from .http_helpers import ServerThread, patch_text, serving, uuid_id
from .serve_helpers import chain_log, patch_id


def _rpc(url: str, op: str, arg: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
    return httpx.post(url + "/$/rpc", json={"operation": op, "opid": "1", "arg": arg or {}}, headers=headers)


def _create(url: str, name: str) -> str:
    r = _rpc(url, "create_datasource", {"name": name})
    assert r.status_code == 200, r.text
    return str(r.json()["id"])


def _head(server: ServerThread, name: str) -> int:
    return int(server.server.topics.log(name).version)


def test_the_pypi_rdf_delta_client_end_to_end(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        client = DeltaClient(server.url)
        ds_id = _create(server.url, "books")
        assert ds_id == datasource_id("books")
        assert client.list_datasource() == [ds_id]
        [described] = client.list_descriptions()
        assert (described.id, described.name) == (ds_id, "books")
        assert client.describe_datasource("books").id == ds_id
        empty = client.describe_log(ds_id)
        assert (empty.min_version, empty.max_version, empty.latest) == (0, 0, "")
        for n in range(1, 4):
            created = client.create_log(patch_text("b", n, n - 1 if n > 1 else None), "books")
            assert created.version == n and created.location.endswith(f"?version={n}")
        info = client.describe_log(ds_id)
        # describe_log takes the bare id the client strips from what the server sent.
        assert (info.min_version, info.max_version, info.latest) == (1, 3, uuid_id("b", 3))
        for n in range(1, 4):
            assert read_rdfp(client.get_log(n, "books"), NT_TERMS) == read_rdfp(
                patch_text("b", n, n - 1 if n > 1 else None), NT_TERMS
            )
        client.close()


def test_rpc_answers_have_rdf_delta_field_names_and_id_forms(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = server.url
        ds = _create(url, "d1")
        assert "value" in _rpc(url, "ping").json()
        assert _rpc(url, "list_datasource").json() == {"array": [ds]}
        dsd = {"id": f"id:{ds}", "name": "d1", "uri": ""}
        assert _rpc(url, "list_descriptions").json() == {"array": [dsd]}
        for arg in ({"datasource": ds}, {"datasource": f"id:{ds}"}, {"name": "d1"}):
            assert _rpc(url, "describe_datasource", arg).json() == dsd
        assert _rpc(url, "describe_datasource", {"name": "nope"}).json() == {}
        assert _rpc(url, "describe_log", {"datasource": ds}).json() == dsd | {
            "min_version": 0,
            "max_version": 0,
            "latest": "",
        }
        assert _rpc(url, "list_log_info").json()["array"][0]["max_version"] == 0
        r = _rpc(url, "create_datasource", {"name": "d1"})
        assert r.status_code == 400 and "already exists" in r.text
        # Appends and fetches address the log by name or by id (Java's client uses the id).
        assert httpx.post(f"{url}/{ds}", content=patch_text("i", 1, None)).json()["version"] == 1
        assert httpx.get(f"{url}/d1/{uuid_id('i', 1)}").status_code == 200
        assert _rpc(url, "remove_datasource", {"datasource": ds}).json() == {}
        assert _rpc(url, "list_datasource").json() == {"array": []}
        assert httpx.get(f"{url}/d1/1").status_code == 404
        assert (tmp_path / "logs" / ".removed").is_dir()  # moved aside, not deleted


def test_a_created_data_source_is_served_again_after_a_restart(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        _create(server.url, "keep")
        httpx.post(f"{server.url}/keep", content=patch_text("k", 1, None))
    with serving(tmp_path) as server:
        assert _rpc(server.url, "describe_log", {"datasource": datasource_id("keep")}).json()["max_version"] == 1


def test_a_removed_data_source_loses_its_lock(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        _create(server.url, "held")
        ds = {"datasource": datasource_id("held")}
        assert _rpc(server.url, "lock", ds).json()["lock-ref"] is not None
        assert _rpc(server.url, "remove_datasource", ds).json() == {}
        _create(server.url, "held")
        assert _rpc(server.url, "lock-read", ds).json() == {}
        assert _rpc(server.url, "lock", ds).json()["lock-ref"] is not None


REFUSALS: list[tuple[str, str, str, dict[str, str], int, str]] = [
    # (method, path, body, headers, status, words in the one-line answer)
    ("POST", "/$/rpc", "{not json", {}, 400, "Bad JSON request"),
    ("POST", "/$/rpc", '{"operation": "rename_datasource", "arg": {}}', {}, 400, "Unknown operation: rename"),
    ("POST", "/$/rpc", '{"operation": "lock", "arg": {}}', {}, 400, "lock: missing field: datasource"),
    ("POST", "/$/rpc", '{"operation": "lock-read", "arg": {"datasource": "id:nil"}}', {}, 404, "No such data source"),
    ("POST", "/$/rpc", '{"operation": "ping"}', {}, 400, "No argument"),
    ("POST", "/$/rpc", '{"arg": {}}', {}, 400, "No op name"),
    ("POST", "/$/rpc", '{"operation": "describe_log", "arg": {}}', {}, 400, "No field: 'datasource'"),
    ("POST", "/$/rpc", '{"operation": "describe_datasource", "arg": {}}', {}, 400, "nor 'uri'"),
    ("POST", "/$/rpc", '{"operation": "create_datasource", "arg": {"name": "../etc"}}', {}, 400, "topic name"),
    ("POST", "/$/rpc", '{"operation": "create_datasource", "arg": {"name": ".hidden"}}', {}, 400, "topic name"),
    ("POST", "/$/rpc", '{"operation": "create_datasource", "arg": {"name": "a/b"}}', {}, 400, "topic name"),
    ("POST", "/$/rpc", '{"operation": "create_datasource", "arg": {}}', {}, 400, "missing field: name"),
    ("POST", "/$/rpc", '{"operation": "remove_datasource", "arg": {"datasource": "id:nil"}}', {}, 404, "No such"),
    ("GET", "/$/rpc", "", {}, 405, "POST"),
    ("GET", "/$/elsewhere", "", {}, 404, "not found"),
    ("POST", "/nope", "", {}, 404, "No such datasource: 'nope'"),
    ("GET", "/..%2Fetc/1", "", {}, 400, "too many components"),
    ("GET", "/..%2Fetc", "", {}, 404, "No such datasource"),
    ("GET", "/log/1/2", "", {}, 400, "too many components"),
    ("GET", "/log/x1", "", {}, 400, "Bad patch reference"),
    ("GET", "/log", "", {}, 400, "Not a log fetch or append"),
    ("GET", "/log/9", "", {}, 404, "Patch not found: version=9"),
    ("GET", "/log/0", "", {}, 404, "Patch not found: version=0"),
    ("GET", f"/log/{uuid_id('none', 1)}", "", {}, 404, "Patch not found: id="),
    ("PUT", "/log", "", {}, 405, "not supported"),
    ("POST", "/log", "H id <uuid:x> .\nTX .\nA <s> .\n", {}, 400, "log"),
    ("POST", "/log", "", {}, 400, "'id' header"),
    ("POST", "/log", "TX .\nA <http://e/s> <http://e/p> <http://e/o> .\nTC .\n", {}, 400, "'id' header"),
    ("POST", "/log", "x", {"Content-Type": "application/rdf-patch+thrift"}, 415, "no published definition"),
    ("POST", "/log", "x", {"Content-Type": "image/png"}, 415, "Content-Type image/png"),
    ("POST", "/log", "\x00\x01\x02", {"Content-Type": "application/x-jelly-rdf-patch"}, 400, "log"),
    ("GET", "/log/changes?after=5", "", {}, 400, "beyond the head"),
    ("GET", "/log/changes?limit=0", "", {}, 400, "limit=0"),
    ("GET", "/log/changes?wait=999", "", {}, 400, "over 60"),
    ("GET", "/log/changes?after=-1", "", {}, 400, "negative"),
    ("GET", "/log/changes?since=1", "", {}, 400, "unknown parameter"),
    ("GET", "/log/init", "", {}, 404, "no bootstrap snapshot"),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "status", "words"), REFUSALS)
def test_every_refusal_is_one_line_and_appends_nothing(
    tmp_path: Path, method: str, path: str, body: str, headers: dict[str, str], status: int, words: str
) -> None:
    with serving(tmp_path) as server:
        _create(server.url, "log")
        httpx.post(f"{server.url}/log", content=patch_text("r", 1, None))
        r = httpx.request(method, server.url + path, content=body.encode(), headers=headers)
        assert r.status_code == status, r.text
        assert words in r.text and r.text.count("\n") == 1, r.text
        assert _head(server, "log") == 1


def test_a_patch_not_following_the_head_gets_rdf_delta_conflict_answer(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "c")
        assert httpx.post(f"{url}/c", content=patch_text("c", 1, None)).status_code == 200
        for text in (patch_text("c", 2, None), patch_text("x", 2, 1), patch_text("c", 3, 7)):
            r = httpx.post(f"{url}/c", content=text)
            # RDF Delta: 400, exactly application/json, {"error": "patch-conflict", "log_info": ...}.
            assert r.status_code == 400 and r.headers["content-type"] == "application/json"
            body = r.json()
            assert body["error"] == "patch-conflict"
            assert body["log_info"]["max_version"] == 1 and body["log_info"]["latest"] == f"id:{uuid_id('c', 1)}"
        # The same patch again is not appended twice: its version, nothing written.
        again = httpx.post(f"{url}/c", content=patch_text("c", 1, None))
        assert again.json()["version"] == 1 and again.headers["Patchsync-Duplicate"] == "true"
        assert _head(server, "c") == 1


def test_concurrent_appends_with_the_same_prev_exactly_one_wins(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "race")
        httpx.post(f"{url}/race", content=patch_text("race", 1, None))
        barrier = threading.Barrier(8)
        statuses: list[int] = []

        def contend(i: int) -> None:
            text = patch_text(f"w{i}", 2, None).replace("TX .", f"H prev <uuid:{uuid_id('race', 1)}> .\nTX .")
            barrier.wait()
            statuses.append(httpx.post(f"{url}/race", content=text).status_code)

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [200] + [400] * 7
        assert _head(server, "race") == 2


def test_jelly_patch_in_and_out_and_content_negotiation(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "j")
        events = read_rdfp(patch_text("j", 1, None), NT_TERMS)
        payload = encode_patch(events, text_options(events))
        r = httpx.post(f"{url}/j", content=payload, headers={"Content-Type": "application/x-jelly-rdf-patch"})
        assert r.json()["version"] == 1
        text = httpx.get(f"{url}/j/1")
        assert text.headers["content-type"] == "application/rdf-patch"
        assert read_rdfp(text.content, NT_TERMS) == events
        binary = httpx.get(f"{url}/j/1", headers={"Accept": "application/x-jelly-rdf-patch"})
        assert binary.headers["content-type"] == "application/x-jelly-rdf-patch"
        assert read_rdfp(door_text(binary.content), NT_TERMS) == events
        preferred = httpx.get(f"{url}/j/1", headers={"Accept": "application/x-jelly-rdf-patch;q=0.5, text/rdf-patch"})
        assert preferred.headers["content-type"] == "application/rdf-patch"
        assert httpx.get(f"{url}/j?version=1").content == text.content


def test_a_patch_appended_as_text_is_stored_as_the_same_patch_sent_as_jelly(tmp_path: Path) -> None:
    """Text is checked as parsed events, Jelly-Patch as decoded ones: both logs must hold the
    same patches, small bodies (parsed on the event loop) and large ones (in a thread) alike."""
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "t")
        _create(url, "j")
        for n, rows in enumerate((2, 900, 3), start=1):  # 900 rows: a body over INLINE_BYTES
            text = patch_text("tj", n, n - 1 or None, rows=rows)
            events = read_rdfp(text, NT_TERMS)
            assert httpx.post(f"{url}/t", content=text).json()["version"] == n
            jelly = encode_patch(events, text_options(events))
            r = httpx.post(f"{url}/j", content=jelly, headers={"Content-Type": "application/x-jelly-rdf-patch"})
            assert r.json()["version"] == n
        assert len(patch_text("tj", 2, 1, rows=900)) > INLINE_BYTES
        feeds = [httpx.get(f"{url}/{name}/changes", params={"after": 0}).json()["changes"] for name in "tj"]
        assert [(c["id"], read_rdfp(c["patch"], NT_TERMS)) for c in feeds[0]] == [
            (c["id"], read_rdfp(c["patch"], NT_TERMS)) for c in feeds[1]
        ]
        assert len(feeds[0]) == 3


def test_tokens_bearer_every_case(tmp_path: Path) -> None:
    tokens = Tokens(((b"r-token", Access.READ), (b"w-token", Access.WRITE)))
    with serving(tmp_path, tokens=tokens) as server:
        url = server.url
        w, r = {"Authorization": "Bearer w-token"}, {"Authorization": "Bearer r-token"}
        assert _rpc(url, "create_datasource", {"name": "s"}, **r).status_code == 403
        assert _rpc(url, "create_datasource", {"name": "s"}).status_code == 401
        assert _rpc(url, "create_datasource", {"name": "s"}, Authorization="Bearer bad").status_code == 401
        assert _rpc(url, "create_datasource", {"name": "s"}, **w).status_code == 200
        assert _rpc(url, "list_datasource").status_code == 401
        assert _rpc(url, "list_datasource", **r).status_code == 200
        text = patch_text("s", 1, None)
        for headers, status in (({}, 401), (r, 403), ({"Authorization": "Basic dzp3"}, 401), (w, 200)):
            answer = httpx.post(f"{url}/s", content=text, headers=headers)
            assert answer.status_code == status and answer.text.count("\n") <= 1
        assert httpx.get(f"{url}/s/1").status_code == 401
        assert httpx.get(f"{url}/s/1", headers=r).status_code == 200
        assert httpx.get(f"{url}/$/metrics").status_code == 401
        assert httpx.get(f"{url}/$/healthz").status_code == 200
        assert _head(server, "s") == 1


def test_a_body_over_the_limit_is_413_and_appends_nothing(tmp_path: Path) -> None:
    with serving(tmp_path, max_message_bytes=2000) as server:
        _create(server.url, "big")
        text = patch_text("big", 1, None, rows=100)
        assert len(text) > 2000
        r = httpx.post(f"{server.url}/big", content=text)
        assert r.status_code == 413 and r.text.count("\n") == 1
        chunked = httpx.post(f"{server.url}/big", content=iter([text.encode()]))  # no Content-Length
        assert chunked.status_code == 413 and chunked.text.count("\n") == 1
        assert _head(server, "big") == 0


def test_the_change_feed_under_concurrent_appends_is_ordered_whole_and_without_duplicates(tmp_path: Path) -> None:
    total = 150
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "feed")
        seen: dict[int, list[tuple[int, str]]] = {0: [], 1: []}

        def read(reader: int) -> None:
            after = 0
            with httpx.Client() as client:
                while after < total:
                    body = client.get(f"{url}/feed/changes", params={"after": after, "limit": 7, "wait": 5}).json()
                    for change in body["changes"]:
                        seen[reader].append((change["version"], change["id"]))
                    assert body["last_version"] == (body["changes"][-1]["version"] if body["changes"] else after)
                    after = body["last_version"]

        readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
        for t in readers:
            t.start()
        with httpx.Client() as client:
            for n in range(1, total + 1):
                assert client.post(f"{url}/feed", content=patch_text("f", n, n - 1 or None)).status_code == 200
        for t in readers:
            t.join(60)
        expected = [(n, f"uuid:{uuid_id('f', n)}") for n in range(1, total + 1)]
        assert seen[0] == expected and seen[1] == expected
        # A long poll with nothing new waits, then answers empty.
        empty = httpx.get(f"{url}/feed/changes", params={"after": total, "wait": 0.2}).json()
        assert empty == {"changes": [], "last_version": total, "head": total, "head_id": f"uuid:{uuid_id('f', total)}"}


def test_metrics_count_what_was_done(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        url = server.url
        _create(url, "m")
        for n in range(1, 6):
            httpx.post(f"{url}/m", content=patch_text("m", n, n - 1 or None))
        httpx.post(f"{url}/m", content=patch_text("m", 5, 4))  # duplicate
        httpx.post(f"{url}/m", content=patch_text("z", 9, None))  # conflict
        httpx.post(f"{url}/m", content="garbage")  # bad body
        httpx.get(f"{url}/m/2")
        r = httpx.get(f"{url}/$/metrics")
        assert r.status_code == 200
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(r.text)
            for s in f.samples
        }
        assert samples[("patchsync_topic_appends_total", (("topic", "m"),))] == 5
        assert samples[("patchsync_topic_head_version", (("topic", "m"),))] == 5
        assert samples[("patchsync_topic_duplicates_total", (("topic", "m"),))] == 1
        assert samples[("patchsync_topic_refusals_total", (("reason", "chain"), ("topic", "m")))] == 1
        assert samples[("patchsync_topic_refusals_total", (("reason", "decode"), ("topic", "m")))] == 1
        appends = (("door", "http"), ("method", "append"), ("topic", "m"))
        assert samples[("patchsync_request_seconds_count", appends)] == 8
        assert (
            samples[("patchsync_request_seconds_count", (("door", "http"), ("method", "fetch"), ("topic", "m")))] == 1
        )
        assert httpx.get(f"{url}/$/ready").text == "ready\n"


def test_rpc_json_of_describe_log_matches_java_client_fields(tmp_path: Path) -> None:
    # The field set Java's PatchLogInfo.fromJson reads: id, name, uri?, min_version, max_version, latest.
    with serving(tmp_path) as server:
        ds = _create(server.url, "fields")
        body = json.loads(_rpc(server.url, "describe_log", {"datasource": ds}).content)
        assert set(body) == {"id", "name", "uri", "min_version", "max_version", "latest"}


def _holds_first_patch(body: bytes, binary: bool) -> bool:
    if not binary:
        return f"<{patch_id(1)}>".encode() in body
    length = read_varint(body, 0, len(body)) if body else None
    return length is not None and len(body) >= length[1] + length[0]


@pytest.mark.parametrize("binary", [True, False])
def test_the_change_feed_sends_its_first_patch_before_the_rest_is_read(tmp_path: Path, binary: bool) -> None:
    # The log is read through a gate: after its first patch, it reads on only once the
    # client has the first patch in hand. A feed that gathers its batch first would wait
    # for the gate until the (generous) timeout, and the gate would say so.
    log = chain_log(tmp_path / "s.jellyp", 300)
    client_has_first = threading.Event()
    waited_in_vain: list[bool] = []
    with serving(tmp_path, topics=[f"s={log}"]) as server:
        topic = server.server.topics.log("s")
        entries = topic._entries  # type: ignore[attr-defined]

        def gated(first: int, last: int) -> Iterator[Any]:
            for number, entry in enumerate(entries(first, last)):
                if number == 1:
                    waited_in_vain.append(not client_has_first.wait(120))
                yield entry

        topic._entries = gated  # type: ignore[attr-defined]
        accept = {"Accept": "application/x-patchsync-changes"} if binary else {}
        with httpx.stream("GET", f"{server.url}/s/changes", params={"after": 0, "limit": 200}, headers=accept) as r:
            assert r.status_code == 200 and "content-length" not in r.headers
            body = b""
            stream = r.iter_raw()
            while not _holds_first_patch(body, binary):
                body += next(stream)
            client_has_first.set()
            body += b"".join(stream)
    assert waited_in_vain == [False]
    if binary:
        assert len(split_records(body)) == 200 and r.headers["patchsync-first-version"] == "1"
    else:
        changes = json.loads(body)["changes"]
        assert [c["version"] for c in changes] == list(range(1, 201))


def test_a_feed_that_fails_after_its_first_byte_ends_the_connection_without_error_text(tmp_path: Path) -> None:
    log = chain_log(tmp_path / "s.jellyp", 300)
    with serving(tmp_path, topics=[f"s={log}"]) as server:
        topic = server.server.topics.log("s")
        entries = topic._entries  # type: ignore[attr-defined]

        def failing(first: int, last: int) -> Iterator[Any]:
            for number, entry in enumerate(entries(first, last)):
                if number == 20:
                    raise RuntimeError("secret internal detail")
                yield entry

        topic._entries = failing  # type: ignore[attr-defined]
        body = b""
        url = f"{server.url}/s/changes"
        with pytest.raises(httpx.RemoteProtocolError), httpx.stream("GET", url, params={"after": 0, "limit": 200}) as r:
            assert r.status_code == 200
            for chunk in r.iter_raw():
                body += chunk
        assert b"urn:test:p1>" in body and b"secret" not in body
        # The client reads the log with its own reader: an incomplete answer is a failure, not a batch.
        with pytest.raises(PatchsyncError, match=r"/s\b.*(IncompleteRead|incomplete)"):
            HttpLog(f"{server.url}/s").feed(0, 200)
