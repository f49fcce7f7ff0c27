"""A decoder's resumable state: export it between patches, restore it into a fresh decoder.

Decoding half a log, moving the state to a new decoder and decoding the rest must give the
very events (positions included) one uninterrupted decoder gives, at every point where the
state can be taken, with lookups filled and replaced mid-stream and repeated terms carried
across patches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from rdflib import Literal, URIRef

from patchsync.codec.decoder_state import DecoderState, LookupState
from patchsync.codec.framing import read_varint, whole_frames
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.term_decoder import RuleViolation
from patchsync.errors import DecodeError
from patchsync.events import Add, Delete, Event, Header, PatchEnd, PrefixAdd, TxCommit, TxStart
from patchsync.options import PatchOptions, StatementType, StreamType

from .helpers import decode, encode

EX = "http://example.org/"


def _patches(stream_type: StreamType, quads: bool) -> list[Event]:
    """Forty patches over more names, prefixes and datatypes than the lookups hold."""
    events: list[Event] = []
    for n in range(40):
        # Subject and graph change every other patch, so a patch often starts with the
        # previous patch's subject and graph: repeated terms across a patch boundary.
        g = URIRef(f"http://g{n // 2 % 3}.example/") if quads else None
        s = URIRef(f"http://s{n // 2 % 5}.example/x{n // 2 % 7}")
        events.append(Header("id", URIRef(f"urn:uuid:{n:08d}")))
        tx = n % 4 == 0
        if tx:
            events.append(TxStart())
        if n % 9 == 0:
            events.append(PrefixAdd(f"p{n}", URIRef(f"http://ns{n}.example/"), g))
        for i in range(5):
            o = Literal(str(n * 10 + i), datatype=URIRef(f"http://dt.example/t{(n + i) % 4}"), normalize=False)
            events.append(Add(s, URIRef(f"{EX}p{(n + i) % 6}"), o, g))
        if n % 3 == 0:
            events.append(Delete(s, URIRef(f"{EX}p{n % 6}"), Literal("gone", lang="en"), g))
        if tx:
            events.append(TxCommit())
        events.append(PatchEnd())
    return events


def _options(stream_type: StreamType, statement_type: StatementType) -> PatchOptions:
    return PatchOptions(
        stream_type=stream_type,
        statement_type=statement_type,
        max_name_table_size=8,
        max_prefix_table_size=4,
        max_datatype_table_size=2,
    )


def _frames(data: bytes) -> Iterator[bytes]:
    """The log's frames one by one (a reader seeing them appended)."""
    pos = 0
    while pos < len(data):
        header = read_varint(data, pos, len(data))
        assert header is not None
        end = header[1] + header[0]
        yield data[pos:end]
        pos = end


def _resumed_runs(data: bytes) -> Iterator[tuple[list[Event], DecoderState[Any], bytes]]:
    """At every resumable frame boundary: events so far, the exported state, the rest of the log."""
    decoder: PatchDecoder[Any] = PatchDecoder(source="log")
    seen: list[Event] = []
    pos = 0
    for frame in _frames(data):
        decoder.feed(frame)
        pos += len(frame)
        seen.extend(decoder)
        if decoder.resumable:
            yield list(seen), decoder.export_state(), data[pos:]


def _decode_rest(state: DecoderState[Any], rest: bytes) -> list[Event]:
    decoder: PatchDecoder[Any] = PatchDecoder.from_state(state, source="log")
    decoder.feed(rest)
    decoder.close()
    return list(decoder)


CASES = [
    (StreamType.PUNCTUATED, StatementType.QUADS),
    (StreamType.PUNCTUATED, StatementType.TRIPLES),
    (StreamType.FRAME, StatementType.QUADS),
    (StreamType.FRAME, StatementType.TRIPLES),
]


@pytest.mark.parametrize(("stream_type", "statement_type"), CASES, ids=lambda v: v.name)
def test_export_restore_at_every_boundary_gives_the_uninterrupted_events(
    stream_type: StreamType, statement_type: StatementType
) -> None:
    quads = statement_type is StatementType.QUADS
    data = encode(_patches(stream_type, quads), _options(stream_type, statement_type), max_frame_rows=4)
    whole = decode(data, source="log")
    cuts = 0
    repeated = replaced = 0
    for before, state, rest in _resumed_runs(data):
        assert before + _decode_rest(state, rest) == whole
        cuts += 1
        assert state.terms is not None
        repeated += state.terms.last_s is not None
        # Lookups full (so entries are being replaced mid-stream) at the cut.
        replaced += len(state.terms.names.values) == state.terms.names.size
    assert cuts >= 20 and repeated >= 20 and replaced >= 10


def test_the_restored_state_is_what_decodes_the_rest() -> None:
    """Dropping the repeated terms or a lookup entry from the state breaks the rest: the test can fail."""
    data = encode(
        _patches(StreamType.PUNCTUATED, True), _options(StreamType.PUNCTUATED, StatementType.QUADS), max_frame_rows=4
    )
    whole = decode(data, source="log")
    broken_terms = broken_names = 0
    for before, state, rest in _resumed_runs(data):
        assert state.terms is not None
        if not rest:
            continue
        no_repeats = dataclasses.replace(state, terms=dataclasses.replace(state.terms, last_s=None, last_g=None))
        no_names = dataclasses.replace(
            state, terms=dataclasses.replace(state.terms, names=LookupState(state.terms.names.size, 0, (), ()))
        )
        for variant, counter in ((no_repeats, "terms"), (no_names, "names")):
            try:
                differs = before + _decode_rest(variant, rest) != whole
            except DecodeError:
                differs = True
            if differs and counter == "terms":
                broken_terms += 1
            elif differs:
                broken_names += 1
    assert broken_terms >= 5, broken_terms
    assert broken_names >= 5, broken_names


def test_whole_frames_splits_at_the_last_whole_frame_and_flags_bad_prefixes() -> None:
    data = encode(
        _patches(StreamType.PUNCTUATED, False), _options(StreamType.PUNCTUATED, StatementType.TRIPLES), max_frame_rows=4
    )
    ends = []
    pos = 0
    for frame in _frames(data):
        pos += len(frame)
        ends.append(pos)
    assert whole_frames(data, 1 << 30) == (len(data), False)
    assert whole_frames(data[: ends[3] + 2], 1 << 30) == (ends[3], False)  # a frame still being written
    assert whole_frames(data[: ends[0]] + b"\xff" * 11, 1 << 30) == (ends[0], True)  # varint too long
    assert whole_frames(data, 3) == (0, True)  # the first frame is over the limit


def test_a_state_is_only_exported_between_patches() -> None:
    options = _options(StreamType.PUNCTUATED, StatementType.QUADS)
    data = encode(_patches(StreamType.PUNCTUATED, True), options, max_frame_rows=4)
    decoder: PatchDecoder[Any] = PatchDecoder(source="log")
    refused = 0
    for frame in _frames(data):
        decoder.feed(frame)
        list(decoder)
        if not decoder.resumable:
            refused += 1
            with pytest.raises(ValueError, match="frame boundary between patches"):
                decoder.export_state()
    assert refused >= 10
    decoder.feed(data[:3])  # a partial frame held back: not resumable either
    assert not decoder.resumable


def test_restoring_validates_the_state() -> None:
    options = _options(StreamType.PUNCTUATED, StatementType.QUADS)
    data = encode(_patches(StreamType.PUNCTUATED, True), options, max_frame_rows=4)
    _, state, rest = next(r for r in _resumed_runs(data) if r[2])
    assert state.terms is not None
    names = state.terms.names
    bad = [
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((names.size, 2),), ("x", "y"))),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((0, 1),), ("x",))),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((True, 1),), ("x",))),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((1, 0),), ())),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((1, 1),), (5,))),  # type: ignore[arg-type]
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((1, 2),), ("x",))),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((1, 1),), ("x", "y"))),
        dataclasses.replace(state.terms, names=LookupState(names.size, 0, ((3, 1), (2, 1)), ("x", "y"))),
        dataclasses.replace(state.terms, names=LookupState(names.size + 1, 0, (), ())),
        dataclasses.replace(state.terms, names=LookupState(names.size, -1, (), ())),
        dataclasses.replace(state.terms, last_name=names.size + 1),
    ]
    for terms in bad:
        with pytest.raises(RuleViolation):
            PatchDecoder.from_state(dataclasses.replace(state, terms=terms))
    with pytest.raises(ValueError):
        PatchDecoder.from_state(dataclasses.replace(state, options=b"\xff\xff"))
    with pytest.raises(ValueError):
        PatchDecoder.from_state(dataclasses.replace(state, terms=None))
    with pytest.raises(ValueError):
        PatchDecoder.from_state(dataclasses.replace(state, offset=-1))
    used: PatchDecoder[Any] = PatchDecoder()
    used.feed(data[:5])
    with pytest.raises(ValueError, match="not fed"):
        used.restore_state(state)
    # And the unmodified state still works.
    assert _decode_rest(state, rest)
