"""The server's pure core, without aiohttp or gRPC: routes, the RPC table, the change feed's
framing, option negotiation, publish groups and what each kind of topic offers.

Each rule is driven here as a function of a parsed request to an answer, the way h11 is
tested apart from any socket; the doors' own tests (test_serve_http.py, test_serve_grpc.py)
check that the adapters only move those answers. RDF Delta's HTTP protocol:
https://afs.github.io/rdf-delta/delta-server-protocol.html (docs/decisions/0002).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from patchsync._proto import patch_pb2, patch_service_pb2, rdf_pb2
from patchsync.codec.rdfp import write_rdfp
from patchsync.errors import ChainError, UsageError
from patchsync.events import Add, Delete, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS, encode_patch, read_payload
from patchsync.options import MIN_NAME_TABLE, PatchOptions
from patchsync.remote.http_client import split_records
from patchsync.remote.statuses import RETRYABLE_KEY
from patchsync.serve import delta_protocol as dp
from patchsync.serve import feed, rpc
from patchsync.serve import http_routes as routes
from patchsync.serve.answers import (
    appended_answer,
    conflict_answer,
    line_answer,
    patch_answer,
    ready_answer,
    service_answer,
)
from patchsync.serve.auth import Access
from patchsync.serve.catalog import OFFERS, Topics, Use
from patchsync.serve.delta_locks import LockTable
from patchsync.serve.errors import (
    NotAllowed,
    NotFound,
    OverLimit,
    ReadOnlyTopic,
    TooSlow,
    UnknownTopic,
    WrongKind,
    status_of,
)
from patchsync.serve.patch_calls import (
    END,
    GROUP,
    MAX_BATCH,
    MAX_BATCH_BYTES,
    RESUME_KEY,
    PublishTally,
    batch_bounds,
    refusal_of,
    start_of,
    take_group,
)
from patchsync.serve.patch_options import negotiate_patch
from patchsync.serve.rdf_frames import negotiate
from patchsync.serve.topics import LOG, TARGET, Appended, Entry, LogTopic, StartKind, TargetTopic, TopicInfo

from .workloads.rdf_data import generate_quads

NAMES = ["books", "films"]


def _payload(n: int, size: int = 0) -> bytes:
    events: list[Any] = [Header("id", f"<urn:x:{n}>")]
    if n > 1:
        events.append(Header("prev", f"<urn:x:{n - 1}>"))
    value = NT_TERMS.literal('é"\n' * size if size else f"v{n}")
    events += [TxStart(), Add(f"<http://ex.org/{n}>", "<http://ex.org/p>", value, None), TxCommit(), PatchEnd()]
    return encode_patch(events, PatchOptions())


# -- routes -------------------------------------------------------------------------------

ROUTES: list[tuple[str, str, dict[str, str], str, str, Any]] = [
    # method, path, query -> kind, topic, what (ref kind / service / access)
    ("POST", "/$/rpc", {}, routes.RPC, "", "rpc"),
    ("GET", "/$/ping", {}, routes.SERVICE, "", "ping"),
    ("GET", "/$/metrics", {}, routes.SERVICE, "", "metrics"),
    ("POST", "/books", {}, routes.APPEND, "books", Access.WRITE),
    ("PATCH", "/books/", {}, routes.APPEND, "books", Access.WRITE),
    ("GET", "/books/7", {}, routes.FETCH, "books", "version"),
    ("GET", "/books", {"version": "7"}, routes.FETCH, "books", "version"),
    ("GET", "/books", {"patch": "id:6f1a0f52-0000-0000-0000-000000000000"}, routes.FETCH, "books", "id"),
    ("GET", "/books/6f1a0f52-0000-0000-0000-000000000000", {}, routes.FETCH, "books", "id"),
    ("GET", "/books/changes", {"after": "3"}, routes.CHANGES, "books", None),
    ("GET", "/books/init", {}, routes.INIT, "books", None),
    ("HEAD", "/init-data", {"datasource": "films"}, routes.INIT, "films", None),
    ("GET", "/init-data", {"datasource": "id:" + dp.datasource_id("films")}, routes.INIT, "films", None),
    ("GET", f"/{dp.datasource_id('books')}/changes", {}, routes.CHANGES, "books", None),
]


@pytest.mark.parametrize(("method", "path", "query", "kind", "topic", "what"), ROUTES)
def test_each_rdf_delta_url_routes_to_its_answer(
    method: str, path: str, query: dict[str, str], kind: str, topic: str, what: Any
) -> None:
    route = routes.route(method, path, query, NAMES, 1000)
    assert (route.kind, route.topic) == (kind, topic)
    if kind == routes.SERVICE or kind == routes.RPC:
        assert route.service == what
    if kind == routes.FETCH:
        assert route.ref is not None and route.ref.kind == what
    if kind == routes.APPEND:
        assert route.access is what and route.body_limit == 1000
    if kind in (routes.FETCH, routes.CHANGES, routes.INIT):
        assert route.access is Access.READ and route.body_limit == 0


@pytest.mark.parametrize(
    ("method", "path", "query", "refusal", "status"),
    [
        ("GET", "/$/rpc", {}, NotAllowed, 405),
        ("GET", "/$/nothing", {}, NotFound, 404),
        ("GET", "/nobody/1", {}, UnknownTopic, 404),
        ("GET", "/init-data", {"datasource": "nobody"}, UnknownTopic, 404),
        ("DELETE", "/books", {}, NotAllowed, 405),
        ("GET", "/books/1/2", {}, dp.BadRequest, 400),
        ("GET", "/books", {}, dp.BadRequest, 400),
        ("GET", "/books/x1", {}, dp.BadRequest, 400),
    ],
)
def test_a_url_that_asks_for_nothing_served_is_refused_by_its_rule(
    method: str, path: str, query: dict[str, str], refusal: type[Exception], status: int
) -> None:
    with pytest.raises(refusal) as info:
        routes.route(method, path, query, NAMES, 1000)
    assert status_of(info.value).http == status


def test_the_services_answer_without_a_socket() -> None:
    assert service_answer("healthz", False, {}, tokens_required=True).body == b"ok\n"
    assert json.loads(service_answer("ping", False, {}, tokens_required=True).body)["value"].endswith("Z")
    assert ready_answer(False, {}, tokens_required=False).status == 200
    assert ready_answer(True, {}, tokens_required=False).body == b"the server is stopping\n"
    down = {"films": "NATS out of reach"}
    assert ready_answer(False, down, tokens_required=False).body == b"topic films: NATS out of reach\n"
    # With tokens, no topic name goes to whoever asks.
    assert ready_answer(False, down, tokens_required=True).body == b"a topic is unavailable\n"
    assert line_answer(400, "two\n lines").body == b"two lines\n"


def test_append_and_fetch_answers() -> None:
    done = appended_answer("/books", 4, duplicate=False)
    assert (done.status, done.headers["Location"], json.loads(done.body)) == (
        200,
        "/books?version=4",
        {"version": 4, "location": "/books?version=4"},
    )
    assert "Patchsync-Duplicate" not in done.headers
    assert appended_answer("/books", 2, duplicate=True).headers["Patchsync-Duplicate"] == "true"
    # RDF Delta's conflict: 400, typed exactly application/json, the log's description.
    conflict = conflict_answer(TopicInfo("books", LOG, "urn:h", 3, ""), "", "does not follow")
    assert (conflict.status, conflict.headers["Content-Type"]) == (400, "application/json")
    body = json.loads(conflict.body)
    assert (body["error"], body["log_info"]["max_version"], body["message"]) == ("patch-conflict", 3, "does not follow")
    text = patch_answer(5, b"H id <urn:x> .\n", jelly=False)
    assert (text.headers["Content-Type"], text.headers["Patchsync-Version"]) == (dp.PATCH_TEXT, "5")
    assert patch_answer(5, b"\x01", jelly=True).headers["Content-Type"] == dp.JELLY_PATCH


# -- the RPC table ------------------------------------------------------------------------


def _sources(**uris: str) -> rpc.Datasources:
    infos = {
        n: TopicInfo(n, LOG, f"urn:head:{n}" if n == "films" else None, 3 if n == "films" else 0, "") for n in NAMES
    }
    return rpc.Datasources(infos, uris, LockTable())


def _call(op: str, **arg: Any) -> dp.RpcCall:
    return dp.parse_rpc(json.dumps({"operation": op, "arg": arg}).encode())


def test_the_rpc_table_has_one_entry_per_operation_and_writes_are_rdf_deltas() -> None:
    assert set(rpc.OPERATIONS) == set(dp.OPERATIONS)
    for op in dp.OPERATIONS:
        assert rpc.needs_write(dp.RpcCall(op, {})) is (op in dp.WRITE_OPERATIONS)


def test_rpc_answers_describe_the_data_sources() -> None:
    ds = _sources(films="http://example.org/films")
    assert rpc.step(_call("list_datasource"), ds) == {"array": [dp.datasource_id(n) for n in NAMES]}
    logs = rpc.step(_call("list_log_info"), ds)
    assert isinstance(logs, dict)
    films = logs["array"][1]
    assert (films["name"], films["max_version"], films["min_version"], films["uri"]) == (
        "films",
        3,
        1,
        "http://example.org/films",
    )
    assert rpc.step(_call("describe_datasource", uri="http://example.org/films"), ds) == dp.describe_datasource(
        ds.infos["films"], "http://example.org/films"
    )
    assert rpc.step(_call("describe_log", datasource="id:" + dp.datasource_id("books")), ds) == dp.describe_log(
        ds.infos["books"]
    )
    assert rpc.step(_call("describe_log", datasource="id:" + dp.datasource_id("nobody")), ds) == {}


def test_rpc_catalog_changes_are_left_to_the_door() -> None:
    ds = _sources()
    assert rpc.step(_call("create_datasource", name="new", uri="http://u"), ds) == rpc.Create("new", "http://u")
    assert rpc.created("new") == {"id": dp.datasource_id("new")}
    assert rpc.step(_call("remove_datasource", datasource=dp.datasource_id("films")), ds) == rpc.Remove("films")
    with pytest.raises(UnknownTopic, match="No such datasource"):
        rpc.step(_call("remove_datasource", datasource=dp.datasource_id("nobody")), ds)
    with pytest.raises(dp.BadRequest, match="missing field: name"):
        rpc.step(_call("create_datasource"), ds)


def test_rpc_lock_operations_go_through_the_same_table() -> None:
    ds = _sources()
    held = rpc.step(_call("lock", datasource=dp.datasource_id("books")), ds)
    assert isinstance(held, dict) and held["lock-ref"]
    seen = rpc.step(_call("lock-read", datasource=dp.datasource_id("books")), ds)
    assert isinstance(seen, dict) and held["lock-ref"] in json.dumps(seen)


# -- the change feed's framing ------------------------------------------------------------


def test_a_json_change_in_pieces_is_the_change_whole() -> None:
    # A text longer than several pieces, with characters JSON escapes and non-ASCII ones.
    text = ('é"\\\n\t🎉' * feed.JSON_PIECE)[: 3 * feed.JSON_PIECE + 5]
    for first in (True, False):
        pieces = feed.json_change_pieces(4, "urn:x:4", text, first=first)
        assert len(pieces) == 6
        assert b"".join(pieces) == feed.json_change(4, "urn:x:4", text, first=first)


def test_the_json_feed_is_the_patches_as_text_within_its_bytes() -> None:
    entries = [Entry(n, f"<urn:x:{n}>", _payload(n)) for n in range(4, 8)]
    body = json.loads(b"".join(feed.json_chunks(entries, 3, (9, "urn:x:9"))))
    assert [c["version"] for c in body["changes"]] == [4, 5, 6, 7]
    assert body["changes"][0]["patch"] == feed.patch_text(entries[0].payload)
    assert (body["last_version"], body["head"], body["head_id"]) == (7, 9, "urn:x:9")
    # A patch whose text is over the answer's bytes goes alone; the next answer has the rest.
    big = [Entry(1, "a", _payload(1, size=feed.FEED_BYTES // 3)), Entry(2, "b", _payload(2))]
    alone = json.loads(b"".join(feed.json_chunks(big, 0, (2, "b"))))
    assert [c["version"] for c in alone["changes"]] == [1] and alone["last_version"] == 1
    assert json.loads(b"".join(feed.json_chunks([], 5, (5, None)))) == {
        "changes": [],
        "last_version": 5,
        "head": 5,
        "head_id": None,
    }


def test_the_binary_feed_reads_back_with_the_clients_reader() -> None:
    entries = [Entry(n, f"<urn:x:{n}>", _payload(n, size=n * 50)) for n in range(1, 5)]
    answer = feed.FeedAnswer(0, 10, binary=True)
    data = answer.start() + b"".join(answer.take(entries[:1]) + answer.take(entries[1:])) + answer.end((9, None))
    headers = feed.binary_headers(0, 9)
    assert (headers["Patchsync-First-Version"], headers["Patchsync-Head"]) == ("1", "9")
    assert split_records(data) == [e.payload for e in entries] and not answer.done


def test_small_parts_of_an_answer_are_joined_and_large_ones_stay_whole() -> None:
    parts = [b"a" * 3, b"b" * 4, b"c" * 20, b"d", b"e" * 2]
    joined = feed.coalesce(parts, size=8)
    assert joined == [b"aaabbbb", b"c" * 20, b"dee"]
    assert b"".join(joined) == b"".join(parts) and feed.coalesce([]) == []
    assert joined[1] is parts[2]  # a large part is not copied


@pytest.mark.parametrize("binary", [True, False])
def test_a_streamed_feed_answer_keeps_the_batch_bounds(binary: bool) -> None:
    entries = [Entry(n, f"<urn:x:{n}>", _payload(n)) for n in range(1, 9)]
    answer = feed.FeedAnswer(0, 3, binary=binary)
    taken = answer.take(entries[:2]) + answer.take(entries[2:])
    assert answer.done and answer.take(entries[3:]) == []
    body = answer.start() + b"".join(taken) + answer.end((8, None))
    got = split_records(body) if binary else [feed.record(c["patch"].encode()) for c in json.loads(body)["changes"]]
    assert len(got) == 3
    # The bytes bound: a patch that does not fit after others ends the answer before it.
    big = [Entry(1, "a", _payload(1)), Entry(2, "b", _payload(2, size=feed.FEED_BYTES // 2))]
    answer = feed.FeedAnswer(0, 10, binary=binary)
    assert answer.take(big) and answer.done
    assert feed.FeedAnswer(0, 10, binary=binary).take(big[1:])  # alone, it goes


def test_patch_text_written_as_decoded_is_the_text_of_formatted_terms() -> None:
    # canonical=True skips parsing the decoder's terms again: it must write the same text.
    quads = list(generate_quads(400, quads=True))
    events: list[Any] = [Header("id", "<urn:x:1>"), TxStart()]
    events += [(Add if i % 3 else Delete)(s, p, o, g) for i, (s, p, o, g) in enumerate(quads)]
    events += [TxCommit(), PatchEnd()]
    payload = encode_patch(events, PatchOptions())
    decoded = list(read_payload(payload))
    assert feed.patch_text(payload) == write_rdfp(
        [e for e in decoded if type(e).__name__ != "Options"], NT_TERMS, segments=False
    )


# -- option negotiation -------------------------------------------------------------------


@pytest.mark.parametrize("names", [MIN_NAME_TABLE - 1, MIN_NAME_TABLE, 64])
def test_the_name_table_minimum_is_one_rule_for_options_and_both_negotiations(names: int) -> None:
    # Jelly-Patch specification, "Patch stream options": max_name_table_size MUST be >= 8.
    outcomes = []
    for attempt in (
        lambda: PatchOptions(max_name_table_size=names),
        lambda: negotiate_patch(patch_pb2.RdfPatchOptions(max_name_table_size=names)),
        lambda: negotiate(rdf_pb2.RdfStreamOptions(physical_type=2, max_name_table_size=names, version=1)),
    ):
        try:
            attempt()
            outcomes.append("met")
        except UsageError as exc:
            assert f"max_name_table_size {names}" in str(exc)
            outcomes.append("refused")
    assert outcomes == ["refused" if names < MIN_NAME_TABLE else "met"] * 3


def test_subscription_starts_and_bounds() -> None:
    start = patch_service_pb2.PatchStart
    assert start_of(None).kind is StartKind.BEGINNING
    assert start_of(start(after_version=5)).version == 5
    assert start_of(start(after_id="urn:x")).patch_id == "urn:x"
    assert start_of(start(now=True)).kind is StartKind.NOW
    assert batch_bounds(0, 64 << 20) == (1, MAX_BATCH_BYTES)
    assert batch_bounds(10**6, 1 << 20) == (MAX_BATCH, 1 << 19)


def test_a_grpc_refusal_says_its_status_line_and_what_to_do_next() -> None:
    dropped = refusal_of(TooSlow("SubscribePatch t: took nothing", resume_after=41), "SubscribePatch", "t")
    assert dropped.code == "RESOURCE_EXHAUSTED"
    assert dict(dropped.trailing) == {RETRYABLE_KEY: "1", RESUME_KEY: "41"}
    too_large = refusal_of(OverLimit("a message of 20 MiB"), "PublishPatch", "t")
    assert (too_large.code, too_large.trailing) == ("RESOURCE_EXHAUSTED", ())
    bug = refusal_of(RuntimeError("/secret/path: boom"), "Describe", "t")
    assert bug.code == "INTERNAL" and "secret" not in bug.line and bug.line.startswith("Describe t: internal error")


# -- publish groups -----------------------------------------------------------------------


def test_a_publish_group_is_what_arrived_up_to_the_end_or_the_error() -> None:
    queued = iter([2, 3, END])
    group = take_group(1, lambda: next(queued, None))
    assert (group.requests, group.ended, group.error) == ([1, 2, 3], True, None)
    broken = ValueError("reset")
    queued = iter([broken])
    group = take_group(1, lambda: next(queued, None))
    assert group.error is broken and group.requests == [1]
    many = iter(range(2, 1000))
    assert len(take_group(1, lambda: next(many, None)).requests) == GROUP


def test_a_publish_tally_counts_and_names_the_head() -> None:
    request = patch_service_pb2.PublishPatchRequest
    tally = PublishTally("t")
    checked: list[str] = []
    payloads = tally.payloads([request(topic="t", patch=b"a"), request(patch=b"b")], checked.append)
    assert payloads == [(b"a", "PublishPatch t message 1"), (b"b", "PublishPatch t message 2")] and len(checked) == 2
    with pytest.raises(UsageError, match="message 3: names topic u; one stream, one topic"):
        tally.payloads([request(topic="u", patch=b"c")], checked.append)
    info = TopicInfo("t", LOG, "urn:h", 9, "")
    assert tally.count([Appended(8, "urn:a"), Appended(2, "urn:old", duplicate=True)], info) == 1
    # The group ended on a patch the log held already: the head is the log's.
    assert tally.answer(info) == {
        "version": 2,
        "patch_id": "urn:old",
        "head": "urn:h",
        "head_version": 9,
        "appended": 1,
        "duplicates": 1,
    }
    assert PublishTally("t").answer(info)["head"] == "urn:h"


# -- what a topic kind offers -------------------------------------------------------------


def test_each_kind_of_topic_offers_its_uses_and_refuses_the_rest_by_one_rule() -> None:
    topics = Topics([LogTopic("log", "x.jellyp"), TargetTopic("state", "sqlite:///x")])
    assert OFFERS[LOG] == {Use.PATCHES, Use.APPEND} and OFFERS[TARGET] == {Use.STATE}
    assert topics.log("log").name == "log" and topics.writable("log", "POST /log").name == "log"
    assert topics.target("state").name == "state"
    assert [t.name for t in topics.logs()] == ["log"]
    refusals = [
        (lambda: topics.writable("state", "PublishPatch state"), ReadOnlyTopic, 403),
        (lambda: topics.log("state", "the change feed"), WrongKind, 400),
        (lambda: topics.target("log", "SubscribeRdf log"), WrongKind, 400),
        (lambda: topics.log("nobody"), UnknownTopic, 404),
    ]
    for call, refusal, status in refusals:
        with pytest.raises(refusal) as info:
            call()
        assert status_of(info.value).http == status
    with pytest.raises(ReadOnlyTopic, match="PublishPatch state: topic state is a target topic, read-only"):
        topics.writable("state", "PublishPatch state")


def test_a_chain_refusal_is_its_own_status() -> None:
    assert status_of(ChainError("x")).grpc == "FAILED_PRECONDITION"


# -- the core imports no door -------------------------------------------------------------

PURE_CORE = [
    "patchsync.serve.answers",
    "patchsync.serve.catalog",
    "patchsync.serve.delta_locks",
    "patchsync.serve.delta_protocol",
    "patchsync.serve.errors",
    "patchsync.serve.feed",
    "patchsync.serve.http_routes",
    "patchsync.serve.patch_calls",
    "patchsync.serve.patch_options",
    "patchsync.serve.rpc",
    "patchsync.remote.statuses",
]
DOOR_LIBRARIES = ("aiohttp", "grpc", "grpc_health")


def _imports(module: str) -> set[str]:
    """The modules ``module``'s source imports (any import statement, at any depth)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _is_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # ``from patchsync.errors import UsageError``: a name, not a module
        return False


def test_the_pure_core_imports_neither_aiohttp_nor_grpc() -> None:
    seen: set[str] = set()
    todo = list(PURE_CORE)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in _imports(module):
            assert name.split(".")[0] not in DOOR_LIBRARIES, f"{module} imports {name}"
            if name.startswith("patchsync.") and _is_module(name):
                parts = name.split(".")
                # The packages on the way are imported too.
                todo += [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    assert "patchsync.serve.topics" in seen  # the walk follows the core's imports
