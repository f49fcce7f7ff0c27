"""Stream addresses and one-patch messages: no server needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchsync.errors import DecodeError, UsageError
from patchsync.events import Add, Header, Options, PatchEnd
from patchsync.logs.patch_logs import read_events
from patchsync.logs.payloads import read_payload
from patchsync.nats import StreamMessage, StreamUnavailable, decode_message, log_patches, parse_stream_url
from patchsync.nats.headers import message_size
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import content, patches
from .nats_helpers import free_port, patch_events, patch_id, write_chain

# -- addresses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "port", "stream"),
    [
        ("nats://127.0.0.1:4222/patches", "127.0.0.1", 4222, "patches"),
        ("nats://example.org/lib-1", "example.org", 4222, "lib-1"),
        ("NATS://[::1]:5000/a_b", "::1", 5000, "a_b"),
    ],
)
def test_stream_addresses_parse(text: str, host: str, port: int, stream: str) -> None:
    url = parse_stream_url(text)
    assert (url.host, url.port, url.stream, url.subject) == (host, port, stream, f"patchsync.{stream}")


def test_credentials_reach_the_client_but_not_messages() -> None:
    url = parse_stream_url("nats://me:s%40cret@127.0.0.1:4222/p")
    assert url.server == "nats://me:s@cret@127.0.0.1:4222"
    assert "cret" not in str(url)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("http://127.0.0.1:4222/p", "not a stream address"),
        ("nats://127.0.0.1:4222", "names no stream"),
        ("nats://127.0.0.1:4222/", "names no stream"),
        ("nats://:4222/p", "names no host"),
        ("nats://127.0.0.1:99999/p", "port must be a number"),
        ("nats://127.0.0.1:x/p", "port must be a number"),
        ("nats://127.0.0.1:4222/a.b", "is not allowed"),
        ("nats://127.0.0.1:4222/a/b", "is not allowed"),
        ("nats://127.0.0.1:4222/p?x=1", "no query"),
    ],
)
def test_bad_stream_addresses_are_one_usage_line(text: str, rule: str) -> None:
    with pytest.raises(UsageError, match=rule) as info:
        parse_stream_url(text)
    assert "\n" not in str(info.value) and text in str(info.value)


def test_an_unreachable_server_is_stream_unavailable_not_a_client_error() -> None:
    from patchsync.nats import NatsLog

    pytest.importorskip("nats")
    with pytest.raises(StreamUnavailable, match="cannot connect"):
        NatsLog(f"nats://127.0.0.1:{free_port()}/p", connect_timeout=0.5, reconnect_attempts=1)


# -- one patch per message ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jellyp", ".rdfp"])
def test_each_message_decodes_alone_to_its_patch(tmp_path: Path, suffix: str) -> None:
    log = tmp_path / f"log{suffix}"
    ids = write_chain(log, "a", 5, size=3)
    messages = list(log_patches(log))
    assert [m.patch_id for m in messages] == ids
    assert [m.prev for m in messages] == [None, *ids[:-1]]
    assert [m.number for m in messages] == [1, 2, 3, 4, 5]
    original = patches(read_events(log, adapter=NTriplesTerms()))
    for message, expected in zip(messages, original, strict=True):
        events = read_payload(message.payload)
        assert type(events[0]) is Options  # each message starts with its own options row
        assert patches(events) == [expected]


def test_messages_use_fresh_lookups(tmp_path: Path) -> None:
    # The same IRIs in every patch: a message that relied on an earlier one's name table
    # would be smaller than the first one and would not decode alone.
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 3)
    sizes = {len(m.payload) - len(m.patch_id) - len(m.prev or "") for m in log_patches(log)}
    assert len(sizes) <= 2  # the first has no prev header, the rest are the same shape


def test_an_unfinished_last_patch_is_left_for_later(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 3)
    whole = log.read_bytes()
    last_start = len(whole) - len(whole.split(b"urn:patch:a:3")[-1]) - 40
    log.write_bytes(whole[: last_start + 20])  # cut inside the last patch's frame
    assert [m.patch_id for m in log_patches(log)] == [patch_id("a", 1), patch_id("a", 2)]


def test_a_text_log_ending_inside_a_patch_yields_only_whole_patches(tmp_path: Path) -> None:
    log = tmp_path / "log.rdfp"
    write_chain(log, "a", 2)
    text = log.read_text()
    log.write_text(text[: text.rindex("TC .")])
    assert [m.patch_id for m in log_patches(log)] == [patch_id("a", 1)]


def test_a_patch_without_id_cannot_be_published(tmp_path: Path) -> None:
    log = tmp_path / "log.rdfp"
    log.write_text("TX .\nA <http://x/s> <http://x/p> <http://x/o> .\nTC .\n")
    with pytest.raises(UsageError, match=r"log\.rdfp: patch 1 has no 'id' header"):
        list(log_patches(log))


def test_a_corrupt_log_is_a_decode_error_naming_the_file(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 2)
    data = bytearray(log.read_bytes())
    data[9] = 7  # the options row's stream type: no such type
    log.write_bytes(bytes(data))
    with pytest.raises(DecodeError, match=r"log\.jellyp"):
        list(log_patches(log))


def _message(payload: bytes, msg_id: str | None = None, seq: int = 7) -> StreamMessage:
    headers = {"Nats-Msg-Id": msg_id} if msg_id else {}
    return StreamMessage(seq, 0.0, headers, payload)


def test_decode_message_returns_the_patch_with_its_options(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 2)
    m = list(log_patches(log))[1]
    events = decode_message(_message(m.payload, m.patch_id), "nats://h:1/s", adapter=NTriplesTerms())
    assert type(events[0]) is Options and type(events[-1]) is PatchEnd
    assert content(events)[:2] == [Header("id", f"<{m.patch_id}>"), Header("prev", f"<{m.prev}>")]


@pytest.mark.parametrize(
    ("payload", "rule"),
    [
        (b"\x05garbage", "nats://h:1/s sequence 7"),
        (b"", "exactly one patch, this one holds 0"),
    ],
)
def test_a_malformed_message_is_one_line_naming_stream_and_sequence(payload: bytes, rule: str) -> None:
    with pytest.raises(DecodeError, match=rule) as info:
        decode_message(_message(payload), "nats://h:1/s")
    assert str(info.value).startswith("nats://h:1/s sequence 7") and "\n" not in str(info.value)


def test_a_message_with_two_patches_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 2)
    with pytest.raises(DecodeError, match="exactly one patch, this one holds 2"):
        decode_message(_message(log.read_bytes()), "nats://h:1/s")


def test_a_message_whose_patch_id_differs_from_its_message_id_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    write_chain(log, "a", 1)
    m = next(log_patches(log))
    with pytest.raises(DecodeError, match=r"sequence 7: the patch's id urn:patch:a:1 differs from the message id x"):
        decode_message(_message(m.payload, "x"), "nats://h:1/s")


def test_message_size_counts_headers() -> None:
    assert message_size(b"x" * 100, "urn:a", None, "s") > 100 + len("Nats-Msg-Id: urn:a")
    events = patch_events("a", 1, None)
    assert events[0] == Header("id", "<urn:patch:a:1>")


def test_text_patches_declare_only_the_features_they_use(tmp_path: Path) -> None:
    log = tmp_path / "log.rdfp"
    log.write_text(
        "H id <urn:p:1> .\nTX .\nA <http://x/s> <http://x/p> <http://x/o> .\nTC .\nZ .\n"
        "H id <urn:p:2> .\nH prev <urn:p:1> .\nTX .\n"
        'A << <http://x/s> <http://x/p> <http://x/o> >> <http://x/q> "1" .\nTC .\nZ .\n'
    )
    plain, star = (read_payload(m.payload) for m in log_patches(log))
    assert type(plain[0]) is Options and type(star[0]) is Options
    assert not plain[0].options.rdf_star and not plain[0].options.generalized_statements
    assert star[0].options.rdf_star and not star[0].options.generalized_statements


def test_a_messages_name_lookup_is_sized_for_its_patch(tmp_path: Path) -> None:
    small, big = tmp_path / "small.jellyp", tmp_path / "big.jellyp"
    write_chain(small, "a", 1)
    write_chain(big, "a", 1, size=1100)
    sizes = []
    for path in (small, big):
        options = read_payload(next(log_patches(path)).payload)[0]
        assert isinstance(options, Options)
        sizes.append(options.options.max_name_table_size)
    # Four names per event of the 5-event patch, rounded up to a power of two; never above
    # the log's own 4,000.
    assert sizes == [32, 4000]


def _without_lookup_entries(payload: bytes) -> bytes:
    """The message with its name and prefix entries left out: it relies on lookups it does not fill."""
    from patchsync._proto import patch_pb2
    from patchsync.codec.framing import encode_varint, read_varint

    found = read_varint(payload, 0, len(payload))
    assert found is not None
    size, pos = found
    frame = patch_pb2.RdfPatchFrame.FromString(payload[pos : pos + size])
    kept = [row for row in frame.rows if row.WhichOneof("row") not in ("name", "prefix")]
    body = patch_pb2.RdfPatchFrame(rows=kept).SerializeToString()
    return encode_varint(len(body)) + body


def test_one_decoder_for_many_messages_decodes_each_as_a_new_one_would(tmp_path: Path) -> None:
    # Lookup sizes and features change between messages; one message leans on the lookups
    # of the one before it, another holds two patches: each outcome, events or refusal,
    # must be the one a decoder of its own gives.
    from patchsync.logs.payloads import MessageDecoder

    small, big, two = tmp_path / "small.jellyp", tmp_path / "big.jellyp", tmp_path / "two.jellyp"
    write_chain(small, "a", 3)
    write_chain(big, "a", 2, start=4, prev=patch_id("a", 3), size=40)
    write_chain(two, "b", 2)
    star = tmp_path / "star.rdfp"
    star.write_text(
        "H id <urn:p:s> .\nTX .\nA << <http://x/s> <http://x/p> <http://x/o> >> <http://x/q> _:b1 .\nTC .\nZ .\n"
    )
    payloads = [(m.payload, m.patch_id) for m in log_patches(small)]
    payloads += [(m.payload, m.patch_id) for m in log_patches(big)]
    payloads.insert(2, (_without_lookup_entries(payloads[1][0]), payloads[1][1]))
    payloads.insert(4, (two.read_bytes(), None))
    payloads.insert(5, (b"\x05garbage", None))
    payloads += [(m.payload, m.patch_id) for m in log_patches(star)] + payloads[:2]
    shared = MessageDecoder("nats://h:1/s", adapter=NTriplesTerms())
    outcomes = []
    for seq, (payload, msg_id) in enumerate(payloads, 1):
        outcome = _decoded_as_alone(shared, _message(payload, msg_id, seq=seq))
        outcomes.append(type(outcome).__name__)
    assert outcomes == ["list", "list", "str", "list", "str", "str", "list", "list", "list", "list", "list"]
    with pytest.raises(DecodeError, match="used before it was defined"):
        shared.decode(_message(payloads[2][0], payloads[2][1], seq=3))


def _decoded_as_alone(shared: Any, message: StreamMessage) -> object:
    """What ``shared`` (a reused :class:`MessageDecoder`) makes of ``message``: its events, or
    its error's text; asserted equal to what a new decoder for this message alone makes."""
    outcomes: list[object] = []
    for decode in (
        lambda: decode_message(message, "nats://h:1/s", adapter=NTriplesTerms()),
        lambda: shared.decode(message),
    ):
        try:
            outcomes.append(decode())
        except DecodeError as exc:
            outcomes.append(str(exc))
    alone, reused = outcomes
    assert reused == alone, message.seq
    return reused


def _lookup_message(
    names: dict[int, str], prefixes: dict[int, str], statements: list[tuple[int, int]], *, max_names: int = 16
) -> bytes:
    """A one-patch message defining ``names`` and ``prefixes`` (id -> value), then one
    statement per ``(prefix id, name id)``, that IRI in all three places."""
    from patchsync._proto import patch_pb2, rdf_pb2
    from patchsync.codec.framing import encode_varint

    options = patch_pb2.RdfPatchOptions(
        statement_type=1, stream_type=3, max_name_table_size=max_names, max_prefix_table_size=8, version=1
    )
    rows = [patch_pb2.RdfPatchRow(options=options)]
    rows += [patch_pb2.RdfPatchRow(prefix=rdf_pb2.RdfPrefixEntry(id=i, value=v)) for i, v in prefixes.items()]
    rows += [patch_pb2.RdfPatchRow(name=rdf_pb2.RdfNameEntry(id=i, value=v)) for i, v in names.items()]
    rows.append(patch_pb2.RdfPatchRow(transaction_start=patch_pb2.RdfPatchTransactionStart()))
    for pid, nid in statements:
        iri = rdf_pb2.RdfIri(prefix_id=pid, name_id=nid)
        rows.append(patch_pb2.RdfPatchRow(statement_add=rdf_pb2.RdfQuad(s_iri=iri, p_iri=iri, o_iri=iri)))
    rows.append(patch_pb2.RdfPatchRow(transaction_commit=patch_pb2.RdfPatchTransactionCommit()))
    rows.append(patch_pb2.RdfPatchRow(punctuation=patch_pb2.RdfPatchPunctuation()))
    body = patch_pb2.RdfPatchFrame(rows=rows).SerializeToString()
    return encode_varint(len(body)) + body


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_lookup_entries_repeated_from_the_last_message_decode_as_a_new_decoder_would(pure: bool) -> None:
    # A decoder reused across messages keeps the last message's terms for entries that a new
    # message defines again with the same value (Jelly: every message is a stream of its
    # own, its lookups start empty): each message must still decode exactly as alone, an
    # entry it does not define stays undefined, and a changed entry changes the IRI.
    from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
    from patchsync.logs.payloads import MessageDecoder

    a, b = {1: "http://a/"}, {1: "http://b/"}
    names = {1: "s", 2: "p", 3: "o"}
    payloads = [
        _lookup_message(names, a, [(1, 1), (1, 2), (1, 3)]),
        _lookup_message(names, a, [(1, 1), (1, 2), (1, 3)]),  # the same entries again
        _lookup_message({1: "s", 3: "x"}, a, [(1, 1), (1, 3)]),  # another name at id 3
        _lookup_message(names, a, [(1, 1), (1, 3)]),
        _lookup_message({1: "s", 2: "p"}, a, [(1, 3)]),  # name 3 is the last message's only
        _lookup_message(names, b, [(1, 1), (0, 3)]),  # another prefix at the same id
        _lookup_message(names, {}, [(1, 1)]),  # prefix 1 is the last message's only
        _lookup_message({3: "o", 2: "p", 1: "s"}, {2: "http://a/"}, [(2, 1), (2, 3)]),  # moved ids
        _lookup_message(names, a, [(1, 1), (1, 3)], max_names=32),  # other lookup sizes
        _lookup_message(names, a, [(1, 1), (1, 2)]),
    ]
    shared = MessageDecoder("nats://h:1/s", adapter=NTriplesTerms())
    shared._decoder = (PurePatchDecoder if pure else PatchDecoder)(NTriplesTerms(), source="nats://h:1/s")
    subjects: list[object] = []
    for seq, payload in enumerate(payloads, 1):
        reused = _decoded_as_alone(shared, _message(payload, seq=seq))
        subjects.append([e[0] for e in reused if type(e) is Add] if isinstance(reused, list) else "refused")
    assert subjects == [
        ["<http://a/s>", "<http://a/p>", "<http://a/o>"],
        ["<http://a/s>", "<http://a/p>", "<http://a/o>"],
        ["<http://a/s>", "<http://a/x>"],
        ["<http://a/s>", "<http://a/o>"],
        "refused",
        ["<http://b/s>", "<http://b/o>"],
        "refused",
        ["<http://a/s>", "<http://a/o>"],
        ["<http://a/s>", "<http://a/o>"],
        ["<http://a/s>", "<http://a/p>"],
    ]
