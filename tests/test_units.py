"""The transaction rules (patchsync.units): the table, the tracker, and every side agreeing.

The expected table is written out here independently of ``TRANSITIONS``, so a change to
the rules shows up as a failing pair. Then each illegal pair is played through every
reader, writer and the applier, which must all refuse it naming the same rule.
"""

from __future__ import annotations

import pytest

from patchsync import DecodeError, EncodeError
from patchsync._proto import patch_pb2
from patchsync.apply import MemoryTarget
from patchsync.apply.applier import Applier
from patchsync.codec.framing import encode_varint
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import RdfPatchTextWriter, read_rdfp
from patchsync.errors import ApplyError, PatchsyncError
from patchsync.events import Add, Event, Header, Options, PatchEnd, TxAbort, TxCommit, TxStart
from patchsync.options import PatchOptions, StreamType
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import (
    KIND_OF,
    QUIET,
    RULES,
    TRANSITIONS,
    Boundary,
    EndOfPatch,
    Kind,
    Rule,
    State,
    Step,
    TransactionError,
    UnitTracker,
    read_units,
)

B, H, I, T, U = (  # noqa: E741 (the states' initials)
    State.BETWEEN_PATCHES,
    State.IN_HEADERS,
    State.IMPLICIT_UNIT,
    State.IN_TX,
    State.BETWEEN_UNITS,
)
NONE, COMMIT, ABORT, END, START = (
    Boundary.NONE,
    Boundary.COMMIT,
    Boundary.ABORT,
    Boundary.IMPLICIT_END,
    Boundary.IMPLICIT_START,
)

#: (state, kind) -> (next state, boundary) or the name of the broken rule.
EXPECTED: dict[tuple[State, Kind], tuple[State, Boundary] | str] = {
    (B, Kind.HEADER): (H, NONE),
    (B, Kind.TX): (T, NONE),
    (B, Kind.TC): "tx-not-open",
    (B, Kind.TA): "tx-not-open",
    (B, Kind.CHANGE): (I, START),
    (B, Kind.PATCH_END): (B, NONE),
    (B, Kind.STREAM_END): (B, NONE),
    (H, Kind.HEADER): (H, NONE),
    (H, Kind.TX): (T, NONE),
    (H, Kind.TC): "tx-not-open",
    (H, Kind.TA): "tx-not-open",
    (H, Kind.CHANGE): (I, START),
    (H, Kind.PATCH_END): (B, NONE),
    (H, Kind.STREAM_END): (B, NONE),
    (I, Kind.HEADER): (I, NONE),
    (I, Kind.TX): (T, END),
    (I, Kind.TC): "tx-not-open",
    (I, Kind.TA): "tx-not-open",
    (I, Kind.CHANGE): (I, NONE),
    (I, Kind.PATCH_END): (B, END),
    (I, Kind.STREAM_END): (B, END),
    (T, Kind.HEADER): (T, NONE),
    (T, Kind.TX): "tx-nested",
    (T, Kind.TC): (U, COMMIT),
    (T, Kind.TA): (U, ABORT),
    (T, Kind.CHANGE): (T, NONE),
    (T, Kind.PATCH_END): "patch-end-in-tx",
    (T, Kind.STREAM_END): "stream-end-in-tx",
    (U, Kind.HEADER): (U, NONE),
    (U, Kind.TX): (T, NONE),
    (U, Kind.TC): "tx-not-open",
    (U, Kind.TA): "tx-not-open",
    (U, Kind.CHANGE): (I, START),
    (U, Kind.PATCH_END): (B, NONE),
    (U, Kind.STREAM_END): (B, NONE),
}
LEGAL = sorted(((s, k) for (s, k), v in EXPECTED.items() if isinstance(v, tuple)), key=str)
ILLEGAL = sorted(((s, k) for (s, k), v in EXPECTED.items() if isinstance(v, str)), key=str)


def test_the_expectations_cover_every_pair() -> None:
    assert set(EXPECTED) == {(s, k) for s in State for k in Kind}
    assert set(TRANSITIONS) == set(State)
    assert all(set(row) == set(Kind) for row in TRANSITIONS.values())


@pytest.mark.parametrize(("state", "kind"), LEGAL, ids=[f"{s.name}-{k.name}" for s, k in LEGAL])
def test_legal_pair(state: State, kind: Kind) -> None:
    tracker = UnitTracker(state)
    step = tracker.send(kind)
    assert (step.state, step.boundary) == EXPECTED[state, kind]
    assert tracker.state is step.state
    assert TRANSITIONS[state][kind] == Step(step.state, step.boundary)


@pytest.mark.parametrize(("state", "kind"), ILLEGAL, ids=[f"{s.name}-{k.name}" for s, k in ILLEGAL])
def test_illegal_pair_names_its_rule_and_keeps_the_state(state: State, kind: Kind) -> None:
    tracker = UnitTracker(state)
    with pytest.raises(TransactionError) as info:
        tracker.send(kind)
    err = info.value
    assert err.rule.name == EXPECTED[state, kind]
    assert (err.kind, err.state) == (kind, state)
    assert isinstance(err, PatchsyncError)
    assert err.rule.why in str(err) and "\n" not in str(err)
    assert tracker.state is state  # a refused row changes nothing
    with pytest.raises(TransactionError):
        tracker.check(kind)
    assert tracker.step_for(kind) == RULES[err.rule.name]


def test_rule_texts_name_the_row_each_format_spells() -> None:
    err = TransactionError(RULES["tx-not-open"], Kind.TC, B)
    assert str(err) == "TC without an open transaction (the previous transaction operation MUST be a transaction start)"
    assert err.text("Z (end of patch)").startswith("Z (end of patch) without")
    assert (
        TransactionError(RULES["patch-end-in-tx"], Kind.PATCH_END, T)
        .text("punctuation")
        .startswith("punctuation inside a transaction (")
    )
    assert all(isinstance(r, Rule) and r.name == name for name, r in RULES.items())


def test_tracker_properties_follow_the_state() -> None:
    props = {
        B: (False, False, False, True),
        H: (False, False, True, True),
        I: (False, True, True, False),
        T: (True, True, True, False),
        U: (False, False, True, False),
    }
    for state, expected in props.items():
        tracker = UnitTracker(state)
        assert (tracker.in_transaction, tracker.in_unit, tracker.patch_open, tracker.in_headers) == expected, state
    tracker = UnitTracker(T)
    tracker.reset()
    assert tracker.state is B and tracker.send(Kind.HEADER).state is H


def test_quiet_states_are_the_self_loops_of_the_table() -> None:
    assert QUIET[Kind.CHANGE] == {I, T}
    assert QUIET[Kind.HEADER] == {H, I, T, U}
    assert QUIET[Kind.TC] == frozenset()
    for kind, states in QUIET.items():
        for state in states:
            assert UnitTracker(state).send(kind) == Step(state, NONE)


def test_events_map_to_kinds_and_options_are_outside_patches() -> None:
    tracker = UnitTracker()
    assert tracker.send_event(Options(PatchOptions())) is None and tracker.state is B
    assert tracker.send_event(TxStart()) == Step(T, NONE)
    assert tracker.send_event(TxAbort()) == Step(U, ABORT)
    assert tracker.send_event(PatchEnd()) == Step(B, NONE)
    assert set(KIND_OF.values()) == set(Kind) - {Kind.STREAM_END}


# -- every side agrees ----------------------------------------------------------------------

NT = NTriplesTerms()  # the memory target's terms, so one event list serves every side
SPO = (NT.iri("http://x/s"), NT.iri("http://x/p"), NT.iri("http://x/o"))
#: Events that bring a fresh stream to each state.
REACH: dict[State, list[Event]] = {
    B: [],
    H: [Header("k", NT.bnode("b"))],
    I: [Add(*SPO)],
    T: [TxStart()],
    U: [TxStart(), TxCommit()],
}
EVENT: dict[Kind, Event] = {
    Kind.HEADER: Header("k", NT.bnode("b")),
    Kind.TX: TxStart(),
    Kind.TC: TxCommit(),
    Kind.TA: TxAbort(),
    Kind.CHANGE: Add(*SPO),
    Kind.PATCH_END: PatchEnd(),
}
TEXT: dict[type, str] = {
    Header: "H k _:b .",
    TxStart: "TX .",
    TxCommit: "TC .",
    TxAbort: "TA .",
    Add: "A <http://x/s> <http://x/p> <http://x/o> .",
    PatchEnd: "Z .",
}
_ROW = patch_pb2.RdfPatchRow
JELLY: dict[type, patch_pb2.RdfPatchRow] = {
    Header: _ROW(header=patch_pb2.RdfPatchHeader(key="k", h_bnode="b")),
    TxStart: _ROW(transaction_start=patch_pb2.RdfPatchTransactionStart()),
    TxCommit: _ROW(transaction_commit=patch_pb2.RdfPatchTransactionCommit()),
    TxAbort: _ROW(transaction_abort=patch_pb2.RdfPatchTransactionAbort()),
    Add: _ROW(namespace_delete=patch_pb2.RdfPatchNamespace(name="ex")),  # a change row without terms
    PatchEnd: _ROW(punctuation=patch_pb2.RdfPatchPunctuation()),
}
OPTIONS = _ROW(options=patch_pb2.RdfPatchOptions(statement_type=1, stream_type=3, max_name_table_size=8, version=1))


def _play(state: State, kind: Kind) -> list[Event]:
    return [*REACH[state], *([] if kind is Kind.STREAM_END else [EVENT[kind]])]


def _jelly(events: list[Event]) -> bytes:
    data = patch_pb2.RdfPatchFrame(rows=[OPTIONS, *(JELLY[type(e)] for e in events)]).SerializeToString()
    return encode_varint(len(data)) + data


@pytest.mark.parametrize(("state", "kind"), ILLEGAL, ids=[f"{s.name}-{k.name}" for s, k in ILLEGAL])
def test_every_side_refuses_an_illegal_pair_naming_the_rule(state: State, kind: Kind) -> None:
    rule = RULES[str(EXPECTED[state, kind])]
    events = _play(state, kind)

    # The Jelly-Patch decoder and the RDF Patch text reader: DecodeError with a position.
    decoder = PatchDecoder(NT, source="t.jellyp")
    decoder.feed(_jelly(events))
    decoder.close()
    with pytest.raises(DecodeError, match=rule.why) as info:
        list(decoder)
    assert info.value.offset is not None
    text = "".join(TEXT[type(e)] + "\n" for e in events)
    with pytest.raises(DecodeError, match=rule.why) as info:
        read_rdfp(text, NT, source="t.rdfp")
    assert info.value.line is not None

    # The writers: EncodeError.
    encoder: PatchEncoder[object] = PatchEncoder(PatchOptions(stream_type=StreamType.PUNCTUATED), NT)
    with pytest.raises(EncodeError, match=rule.why):
        for event in events:
            encoder.send(event)
        encoder.finish()
    if kind is not Kind.STREAM_END:  # the text writer has no stream end
        writer: RdfPatchTextWriter[object] = RdfPatchTextWriter(NT)
        with pytest.raises(EncodeError, match=rule.why):
            for event in events:
                writer.send(event)

    # The applier: ApplyError; at the end of the events it names the open unit.
    applier = Applier(MemoryTarget(), source="t", chain="ignore")
    expected = "end inside a unit" if kind is Kind.STREAM_END else rule.why
    with pytest.raises(ApplyError, match=expected):
        applier.apply(events)

    # The unit reader every consumer reads through: DecodeError, the same way.
    with pytest.raises(DecodeError, match=expected):
        list(read_units(events, NT))


@pytest.mark.parametrize(("state", "kind"), LEGAL, ids=[f"{s.name}-{k.name}" for s, k in LEGAL])
def test_every_side_accepts_a_legal_pair(state: State, kind: Kind) -> None:
    events = _play(state, kind)
    after = UnitTracker(state).send(kind).state
    # Closed off (a commit if a transaction is open, then a patch end) so every side may end there.
    whole = [*events, *([TxCommit()] if after is T else []), PatchEnd()]
    decoder = PatchDecoder(NT, source="t.jellyp")
    decoder.feed(_jelly(whole))
    decoder.close()
    # The Jelly change row is a PD (it needs no terms): compare kinds.
    assert [KIND_OF.get(type(e)) for e in decoder] == [None, *(KIND_OF[type(e)] for e in whole)]
    assert [type(e) for e in read_rdfp("".join(TEXT[type(e)] + "\n" for e in whole), NT)] == [type(e) for e in whole]
    writer: RdfPatchTextWriter[object] = RdfPatchTextWriter(NT)
    encoder: PatchEncoder[object] = PatchEncoder(PatchOptions(stream_type=StreamType.PUNCTUATED), NT)
    for event in events:
        writer.send(event)
        encoder.send(event)
    assert writer.in_transaction == encoder.in_transaction == (after is T)
    applier = Applier(MemoryTarget(), source="t", chain="ignore")
    result = applier.apply(whole)
    assert result.patches == 1 + sum(type(e) is PatchEnd for e in events)
    assert sum(type(item) is EndOfPatch for item in read_units(whole, NT)) == result.patches
