"""RDF Delta's protocol pieces, as functions (docs/decisions/0002-rdf-delta-http.md; the
server API page <https://afs.github.io/rdf-delta/delta-server-api.html>)."""

from __future__ import annotations

import json

import pytest

from patchsync.serve import delta_protocol as dp
from patchsync.serve import feed
from patchsync.serve.errors import UnsupportedMedia, status_of
from patchsync.serve.topics import TopicInfo

U = "0a9b0f36-7bd4-4a7c-a4ac-1b8f6b4a1f01"


def test_ids_are_stable_and_read_in_every_form() -> None:
    assert dp.datasource_id("x") == dp.datasource_id("x") != dp.datasource_id("y")
    for form in (U, f"id:{U}", f"uuid:{U}", f"urn:uuid:{U}"):
        assert dp.bare_id(form) == U
    assert dp.delta_patch_id(f"uuid:{U}") == f"id:{U}"
    assert dp.delta_patch_id("urn:patch:1") == "urn:patch:1"
    assert dp.delta_patch_id(None) == ""
    assert f"uuid:{U}" in dp.patch_id_candidates(U)
    assert dp.by_id(f"id:{dp.datasource_id('b')}", ["a", "b"]) == "b"
    assert dp.resolve_ref("a", ["a"]) == "a" and dp.resolve_ref(dp.datasource_id("a"), ["a"]) == "a"
    assert dp.resolve_ref("../a", ["a"]) is None


def test_descriptions_have_rdf_delta_fields() -> None:
    info = TopicInfo("d", "log", f"uuid:{U}", 3, "spec")
    assert dp.describe_log(info) == {
        "id": f"id:{dp.datasource_id('d')}",
        "name": "d",
        "uri": "",
        "min_version": 1,
        "max_version": 3,
        "latest": f"id:{U}",
    }
    empty = dp.describe_log(TopicInfo("d", "log", None, 0, "spec"))
    assert (empty["min_version"], empty["max_version"], empty["latest"]) == (0, 0, "")
    assert dp.conflict_body(info)["error"] == "patch-conflict"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"[", "Bad JSON request"),
        (b"[]", "not a JSON object"),
        (b'{"arg": {}}', "No op name"),
        (b'{"operation": "ping", "arg": 1}', "No argument"),
        (b'{"operation": "copy_datasource", "arg": {}}', "Unknown operation: copy_datasource"),
    ],
)
def test_rpc_refusals(body: bytes, words: str) -> None:
    with pytest.raises(dp.BadRequest, match=words):
        dp.parse_rpc(body)


def test_rpc_fields() -> None:
    call = dp.parse_rpc(b'{"operation": "describe_datasource", "opid": "", "arg": {"name": 3}}')
    with pytest.raises(dp.BadRequest, match="bad field 'name'"):
        call.string("name")
    call = dp.parse_rpc(b'{"operation": "describe_datasource", "arg": {"uri": "http://x"}}')
    assert dp.find_datasource(call, ["a", "b"], {"b": "http://x"}) == "b"


def test_patch_refs() -> None:
    assert dp.parse_patch_ref("12") == dp.PatchRef("version", version=12)
    assert dp.parse_patch_ref(U) == dp.PatchRef("id", patch_id=U)
    assert dp.parse_patch_ref("init").kind == "init"
    for bad in ("", "-1", "+1", "1.5", "٣"):
        with pytest.raises(dp.BadRequest):
            dp.parse_patch_ref(bad)


def test_media_types() -> None:
    assert dp.body_format(None) == "rdfp"  # Java's client sends no Content-Type
    assert dp.body_format("application/rdf-patch; charset=utf-8") == "rdfp"
    assert dp.body_format("text/rdf-patch") == "rdfp"
    assert dp.body_format("Application/X-Jelly-RDF-Patch") == "jellyp"
    with pytest.raises(UnsupportedMedia) as refused:
        dp.body_format("application/rdf-patch+thrift")
    assert status_of(refused.value).http == 415
    assert dp.accepts_jelly("application/x-jelly-rdf-patch")
    assert not dp.accepts_jelly(None) and not dp.accepts_jelly("*/*")
    assert not dp.accepts_jelly("application/x-jelly-rdf-patch;q=0.1, application/rdf-patch")
    assert dp.accepts_jelly("application/rdf-patch;q=0.1, application/x-jelly-rdf-patch")


def test_feed_query() -> None:
    assert dp.feed_query({}) == dp.FeedQuery(0, dp.FEED_LIMIT, 0.0)
    assert dp.feed_query({"after": "5", "limit": "10", "wait": "1.5"}) == dp.FeedQuery(5, 10, 1.5)
    for bad in ({"after": "x"}, {"limit": "0"}, {"limit": "100001"}, {"wait": "61"}, {"wait": "nan"}, {"x": "1"}):
        with pytest.raises(dp.BadRequest):
            dp.feed_query(bad)


def test_the_json_feed_is_framed_as_one_json_document() -> None:
    body = feed.json_start() + feed.json_change(5, "urn:a", "H id <urn:a> .\n", first=True)
    body += feed.json_change(6, "urn:b", "", first=False) + feed.json_end(6, 9, "urn:z")
    assert json.loads(body) == {
        "changes": [
            {"version": 5, "id": "urn:a", "patch": "H id <urn:a> .\n"},
            {"version": 6, "id": "urn:b", "patch": ""},
        ],
        "last_version": 6,
        "head": 9,
        "head_id": "urn:z",
    }
    assert json.loads(feed.json_start() + feed.json_end(4, 9, None))["last_version"] == 4
    assert feed.record(b"x" * 300)[:2] == b"\xac\x02"
    # The first change always goes; then only while the answer stays within its bytes.
    assert feed.fits(0, feed.FEED_BYTES * 2, first=True)
    assert not feed.fits(10, feed.FEED_BYTES, first=False) and feed.fits(10, feed.FEED_BYTES - 10, first=False)
