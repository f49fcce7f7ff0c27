"""The unit reader (patchsync.units): events in, units and patch ends out, chain ids read once.

Units as docs/design.md §2 states them: ``TX … TC`` commits, ``TX … TA`` counts for nothing,
rows outside a transaction form an implicit unit that ends (committed) at the next ``TX`` or
at the patch end, and input that stops inside a unit gives the complete units before it and
then an error naming the byte. The differential property over generated logs (apply, compact,
the rdflib parser, Spark, reverse) is in ``test_units_differential.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rdflib import Literal, URIRef

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import DecodeError
from patchsync.events import Add, Delete, Event, Header, Options, PatchEnd, PrefixAdd, TxAbort, TxCommit, TxStart
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.units import EndOfPatch, Mark, Unit, UnitReader, chain_head, patch_ends, patch_headers, read_units

from .apply_helpers import rdfp_to_jellyp

NT = NTriplesTerms()
X = Add("<http://e/x>", "<http://e/p>", '"x"')
Y = Add("<http://e/y>", "<http://e/p>", '"y"')
Z = Delete("<http://e/z>", "<http://e/p>", '"z"')


def shape(items: list[Unit | EndOfPatch]) -> list[tuple[str, ...]]:
    """Each item as (kind, committed/implicit flags, the rows' objects)."""
    out: list[tuple[str, ...]] = []
    for item in items:
        if isinstance(item, EndOfPatch):
            out.append(("end", item.patch.id or "-"))
        else:
            flags = ("committed" if item.committed else "aborted") + (" implicit" if item.implicit else "")
            out.append(("unit", flags, *(str(r[2]) for r in item.rows)))
    return out


def test_each_event_has_its_mark() -> None:
    reader = UnitReader()
    events: list[Event] = [
        Options(PatchOptions()),
        Header("id", "<urn:p:1>"),
        X,
        Y,
        TxStart(),
        Z,
        TxCommit(),
        X,
        PatchEnd(),
        PatchEnd(),
        TxStart(),
        TxAbort(),
        PrefixAdd("ex", "<http://e/>"),
        TxStart(),
        TxCommit(),
        PatchEnd(),
    ]
    assert [reader.read(e) for e in events] == [
        Mark.OUTSIDE,
        Mark.HEADER,
        Mark.FIRST_ROW,
        Mark.ROW,
        Mark.TX_AFTER_IMPLICIT,
        Mark.ROW,
        Mark.COMMIT,
        Mark.FIRST_ROW,
        Mark.PATCH_END_AFTER_IMPLICIT,
        Mark.PATCH_END,  # an empty patch
        Mark.TX,
        Mark.ABORT,
        Mark.FIRST_ROW,  # a prefix row opens an implicit unit too
        Mark.TX_AFTER_IMPLICIT,
        Mark.COMMIT,
        Mark.PATCH_END,
    ]
    assert reader.patches == 3


def test_rows_before_an_aborted_transaction_are_a_committed_unit() -> None:
    # The case compact once got wrong: the implicit unit before TX counts, the TX … TA not.
    text = 'H id <urn:p:1> .\nA <http://e/x> <http://e/p> "x" .\nTX .\nA <http://e/y> <http://e/p> "y" .\nTA .\n'
    for events in (read_rdfp(text, NT), _decode(rdfp_to_jellyp(text))):
        assert shape(list(read_units(events))) == [
            ("unit", "committed implicit", '"x"'),
            ("unit", "aborted", '"y"'),
            ("end", "urn:p:1"),
        ]


def test_rows_after_a_commit_and_empty_patches() -> None:
    events: list[Event] = [PatchEnd(), TxStart(), X, TxCommit(), Y, Z, PatchEnd(), TxStart(), TxCommit(), PatchEnd()]
    assert shape(list(read_units(events))) == [
        ("end", "-"),
        ("unit", "committed", '"x"'),
        ("unit", "committed implicit", '"y"', '"z"'),
        ("end", "-"),
        ("unit", "committed"),
        ("end", "-"),
    ]


def test_a_unit_ends_at_the_event_that_completes_it() -> None:
    tx, tc, end = TxStart(offset=30), TxCommit(offset=50), PatchEnd(offset=60)
    units = [i for i in read_units([X._replace(offset=10), tx, Y._replace(offset=40), tc, end]) if type(i) is Unit]
    assert [u.end for u in units] == [tx, tc]


def test_chain_ids_are_read_once_for_every_adapter() -> None:
    nt = [Header("id", "<urn:p:1>"), Header("prev", "<urn:p:0>"), Header("id", "<urn:p:2>"), X, PatchEnd()]
    rdflib_events = [Header("id", URIRef("urn:p:1")), Header("prev", Literal("zero")), PatchEnd()]
    (first,) = patch_ends(nt)
    (second,) = patch_ends(rdflib_events, RdflibTerms())
    # The last id header wins; an IRI is its text, anything else its N-Triples form.
    assert (first.patch.id, first.patch.prev, first.patch.number) == ("urn:p:2", "urn:p:0", 1)
    assert (second.patch.id, second.patch.prev) == ("urn:p:1", '"zero"')
    assert first.patch.pairs() == (("id", "urn:p:1"), ("prev", "urn:p:0"), ("id", "urn:p:2"))
    assert not first.patch.chain_after_changes


def test_the_headers_of_one_whole_patch_read_the_same_ids() -> None:
    events: list[Event] = [Header("id", "<urn:p:1>"), TxStart(), X, TxCommit(), Header("id", "<urn:p:2>"), PatchEnd()]
    (end,) = patch_ends(events)
    assert patch_headers(events).id == end.patch.id == "urn:p:2"


def test_a_chain_header_after_the_changes_is_noted() -> None:
    reader = UnitReader()
    for event in [Header("id", "<urn:p:1>"), TxStart(), X, Header("prev", "<urn:p:0>")]:
        reader.read(event)
    assert reader.patch.chain_after_changes and reader.patch.prev == "urn:p:0"


def test_the_ended_patch_stays_readable_until_the_next_event() -> None:
    reader = UnitReader()
    for event in [Header("id", "<urn:p:1>"), X, PatchEnd()]:
        reader.read(event)
    assert (reader.patch.id, reader.patch.number, reader.between_patches) == ("urn:p:1", 1, True)
    reader.read(Header("id", "<urn:p:2>"))
    assert (reader.patch.id, reader.patch.number) == ("urn:p:2", 2)


def test_events_that_stop_inside_a_unit_give_the_units_before_then_an_error() -> None:
    events: list[Event] = [TxStart(offset=0), X, TxCommit(offset=9), PatchEnd(offset=12), Y._replace(offset=20), Z]
    got: list[Unit | EndOfPatch] = []
    with pytest.raises(DecodeError, match=r"log\.rdfp, byte 20: the events end inside a unit"):
        got.extend(read_units(events, source="log.rdfp"))
    assert shape(got) == [("unit", "committed", '"x"'), ("end", "-")]


def test_a_torn_jelly_patch_log_gives_its_whole_units_then_the_decoders_error() -> None:
    text = 'H id <urn:p:1> .\nTX .\nA <http://e/x> <http://e/p> "x" .\nTC .\nZ .\nTX .\nA <http://e/y> <http://e/p> "y" .\n'
    data = rdfp_to_jellyp(text + "TC .\nZ .\n")
    torn = data[:-3]
    got: list[Unit | EndOfPatch] = []
    with pytest.raises(DecodeError) as info:
        got.extend(read_units(_decode(torn)))
    assert info.value.source == "t.jellyp" and info.value.offset is not None
    assert shape(got) == [("unit", "committed", '"x"'), ("end", "urn:p:1")]


def test_a_broken_rule_in_hand_made_events_names_the_byte() -> None:
    with pytest.raises(DecodeError, match=r"events, byte 7: TC without an open transaction"):
        list(read_units([TxCommit(offset=7)], source="events"))


def test_the_chain_head_is_the_last_patch_with_an_id() -> None:
    events: list[Event] = [Header("id", "<urn:p:1>"), X, PatchEnd(), TxStart(), TxCommit(), PatchEnd()]
    assert chain_head(events) == ("urn:p:1", 2)
    assert chain_head([], head="urn:p:0") == ("urn:p:0", 0)


def test_the_daemon_cuts_only_between_units() -> None:
    reader = UnitReader()
    cuts = []
    for event in [TxStart(), X, TxCommit(), Y, TxStart(), Z, TxAbort(), PatchEnd()]:
        reader.read(event)
        cuts.append(reader.between_units)
    # An implicit unit is known complete only at the TX after it, which opens another one.
    assert cuts == [False, False, True, False, False, False, True, True]


def _decode(data: bytes) -> Iterator[Event]:
    """The events of Jelly-Patch bytes; a decoder's error comes after the whole units' events."""
    decoder: PatchDecoder[str] = PatchDecoder(NT, source="t.jellyp")
    decoder.feed(data)
    yield from decoder
    decoder.close()
    yield from decoder
