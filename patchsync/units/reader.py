"""The unit reader: events in, units and patch ends out (docs/design.md §2, §4).

Every consumer of decoded events (the applier, the daemon, compact, reverse, Spark, the
rdflib parser, ingest, capture, the server) reads units through :class:`UnitReader`, so
none decides for itself where a unit ends, whether it counts, or what a patch's ``id`` and
``prev`` are. :meth:`UnitReader.read` takes one event and answers its :class:`Mark`,
stepping through :data:`~patchsync.units.rules.TRANSITIONS` and keeping the patch's headers
in :class:`PatchHeaders` (the one place chain ids are extracted); :func:`read_units` yields
whole :class:`Unit` and :class:`EndOfPatch` items, :func:`patch_ends` the patch ends alone,
:func:`chain_head` a log's head, :func:`patch_headers` the headers of one whole patch
(a stream message). Input that stops inside a unit gives the complete units before it
first, then the decoder's own error (a batch reader fails naming the byte) or
:class:`~patchsync.errors.DecodeError` from :func:`read_units`; a reader fed as bytes
arrive (the daemon) asks :attr:`UnitReader.between_units` and waits for the rest.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from patchsync.errors import DecodeError
from patchsync.events import Event, Header
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import NTriplesTerms, header_text
from patchsync.units.rules import KIND_OF, TRANSITIONS, Boundary, Kind, Rule, State, TransactionError

__all__ = [
    "CHANGE_TYPES",
    "ENDS_PATCH",
    "EndOfPatch",
    "Mark",
    "PatchHeaders",
    "Unit",
    "UnitReader",
    "chain_head",
    "patch_ends",
    "patch_headers",
    "read_units",
]


class Mark(enum.Enum):
    """What one event is to a consumer of units: the answer of :meth:`UnitReader.read`."""

    #: Not part of any patch (the options row).
    OUTSIDE = "outside patches"
    #: A header row; :attr:`UnitReader.patch` holds it.
    HEADER = "header"
    #: A change or prefix row of the open unit.
    ROW = "row"
    #: A change or prefix row that opens an implicit unit (its first row).
    FIRST_ROW = "first row of an implicit unit"
    #: ``TX``: a transaction opens.
    TX = "transaction start"
    #: ``TX`` after rows outside a transaction: that implicit unit is complete (committed),
    #: then a transaction opens.
    TX_AFTER_IMPLICIT = "implicit unit complete, transaction start"
    #: ``TC``: the transaction is complete and committed.
    COMMIT = "commit"
    #: ``TA``: the transaction is complete and aborted (its rows count for nothing).
    ABORT = "abort"
    #: The patch ends (no unit was open).
    PATCH_END = "patch end"
    #: The patch ends after rows outside a transaction: that implicit unit is complete
    #: (committed), then the patch ends.
    PATCH_END_AFTER_IMPLICIT = "implicit unit complete, patch end"

    __hash__ = object.__hash__


#: The marks that end a patch.
ENDS_PATCH = frozenset({Mark.PATCH_END, Mark.PATCH_END_AFTER_IMPLICIT})

#: (kind, boundary of its step) -> mark: every legal step of :data:`TRANSITIONS` names one.
_MARKS: dict[Kind, dict[Boundary, Mark]] = {
    Kind.HEADER: {Boundary.NONE: Mark.HEADER},
    Kind.CHANGE: {Boundary.NONE: Mark.ROW, Boundary.IMPLICIT_START: Mark.FIRST_ROW},
    Kind.TX: {Boundary.NONE: Mark.TX, Boundary.IMPLICIT_END: Mark.TX_AFTER_IMPLICIT},
    Kind.TC: {Boundary.COMMIT: Mark.COMMIT},
    Kind.TA: {Boundary.ABORT: Mark.ABORT},
    Kind.PATCH_END: {Boundary.NONE: Mark.PATCH_END, Boundary.IMPLICIT_END: Mark.PATCH_END_AFTER_IMPLICIT},
}

#: The event types of a unit's rows: ``A``, ``D``, ``PA``, ``PD``.
CHANGE_TYPES = frozenset(t for t, k in KIND_OF.items() if k is Kind.CHANGE)

_HEADER, _PATCH_END, _PATCH_END_AFTER_IMPLICIT = Mark.HEADER, Mark.PATCH_END, Mark.PATCH_END_AFTER_IMPLICIT

_NT = NTriplesTerms()
_CUT = frozenset({State.BETWEEN_PATCHES, State.BETWEEN_UNITS})
_OPEN_UNIT = frozenset({State.IMPLICIT_UNIT, State.IN_TX})


class _Entry(NamedTuple):
    """What reading an event of one type does in one state: derived from :data:`TRANSITIONS`."""

    #: The next state, or ``None`` when the row breaks ``rule``.
    state: State | None
    mark: Mark
    kind: Kind
    rule: Rule | None


#: state -> event type -> entry: :data:`TRANSITIONS` and :data:`KIND_OF` joined once, so that
#: reading an event is one lookup (the reader sits on the applier's path).
_READ: dict[State, dict[type, _Entry]] = {
    state: {
        cls: (
            _Entry(None, Mark.OUTSIDE, kind, step)
            if isinstance(step, Rule)
            else _Entry(step.state, _MARKS[kind][step.boundary], kind, None)
        )
        for cls, kind in KIND_OF.items()
        for step in (row[kind],)
    }
    for state, row in TRANSITIONS.items()
}


class PatchHeaders:
    """The headers of one patch, as read so far.

    ``id`` and ``prev`` are the patch's chain ids (docs/design.md §4): the text of the last
    ``H id`` / ``H prev`` header, an IRI's text or else the value's N-Triples form. ``rows``
    holds every header event in order; ``number`` is the patch's place in the stream
    (1-based). ``chain_after_changes`` says an ``id`` or ``prev`` header came after the
    patch's first unit began (the applier's strict chain policy refuses that).
    """

    __slots__ = ("_id", "_id_text", "_prev", "_prev_text", "adapter", "chain_after_changes", "number", "rows")

    def __init__(self, adapter: TermAdapter[Any], number: int) -> None:
        self.adapter = adapter
        self.number = number
        self.rows: list[Header] = []
        self.chain_after_changes = False
        self._id: Any = None
        self._prev: Any = None
        # The texts, made when first asked for (the applier asks several times a patch).
        self._id_text: str | None = None
        self._prev_text: str | None = None

    @property
    def id(self) -> str | None:
        """The patch's ``id``, or ``None`` without one."""
        text = self._id_text
        if text is None and self._id is not None:
            text = self._id_text = header_text(self._id, self.adapter)
        return text

    @property
    def prev(self) -> str | None:
        """The patch's ``prev``, or ``None`` (a first patch)."""
        text = self._prev_text
        if text is None and self._prev is not None:
            text = self._prev_text = header_text(self._prev, self.adapter)
        return text

    @property
    def id_term(self) -> Any:
        """The ``id`` header's value as the adapter's term (``None`` without one)."""
        return self._id

    def take(self, header: Header, *, after_changes: bool) -> None:
        """Record ``header`` (``after_changes``: the patch's first unit has begun)."""
        self.rows.append(header)
        if header.key == "id":
            self._id, self._id_text = header.value, None
        elif header.key == "prev":
            self._prev, self._prev_text = header.value, None
        else:
            return
        self.chain_after_changes = self.chain_after_changes or after_changes

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every header as ``(key, value text)``, in order."""
        text = self._text
        return tuple([(h.key, text(h.value)) for h in self.rows])

    def _text(self, value: Any) -> str:
        # The chain ids' texts are made once; most patches hold no other header.
        if value is self._id:
            return self.id  # type: ignore[return-value]
        if value is self._prev:
            return self.prev  # type: ignore[return-value]
        return header_text(value, self.adapter)


class UnitReader:
    """Reads events as units and patches, one event at a time (see the module docstring).

    ``adapter`` is the term adapter of the events (N-Triples strings by default); only the
    chain ids are read through it. :meth:`read` answers the :class:`Mark` of each event,
    stepping through :data:`TRANSITIONS` (``state`` is where the stream stands);
    :attr:`patch` is the open patch's :class:`PatchHeaders`, and after a patch end it is
    still the patch that ended until the next event is read. A loop that cannot afford even
    the call may skip :meth:`read` for an ``A``/``D``/``PA``/``PD`` row while
    ``reader.state in QUIET[Kind.CHANGE]`` (inside an open unit: its mark is
    :attr:`Mark.ROW` and nothing changes). Breaking a rule raises :class:`TransactionError`
    and leaves the reader as it was (decoders have checked the rules already; hand-made
    events may break them).
    """

    __slots__ = ("_ended", "_read", "adapter", "patch", "patches", "state")

    def __init__(self, adapter: TermAdapter[Any] | None = None) -> None:
        self.adapter: TermAdapter[Any] = adapter if adapter is not None else _NT
        self.state = State.BETWEEN_PATCHES
        self._read = _READ[self.state]
        #: Patches ended so far.
        self.patches = 0
        self.patch = PatchHeaders(self.adapter, 1)
        self._ended = False

    def read(self, event: Event) -> Mark:
        """The mark of ``event``; moves the reader past it."""
        entry = self._read.get(type(event))
        if entry is None:
            return Mark.OUTSIDE
        state, mark = entry.state, entry.mark
        if state is None:
            assert entry.rule is not None
            raise TransactionError(entry.rule, entry.kind, self.state)
        if state is not self.state:
            self.state = state
            self._read = _READ[state]
        if self._ended:
            self._ended = False
            self.patch = PatchHeaders(self.adapter, self.patches + 1)
        if mark is _HEADER:
            self.patch.take(event, after_changes=state is not State.IN_HEADERS)  # type: ignore[arg-type]
        elif mark is _PATCH_END or mark is _PATCH_END_AFTER_IMPLICIT:
            self._ended = True
            self.patches += 1
        return mark

    @property
    def between_units(self) -> bool:
        """Every event read so far belongs to a complete unit (or to no unit): a cut point."""
        return self.state in _CUT

    @property
    def between_patches(self) -> bool:
        """No patch is open: the last patch has ended (or none began)."""
        return self.state is State.BETWEEN_PATCHES

    @property
    def in_unit(self) -> bool:
        """A unit is open and not yet complete."""
        return self.state in _OPEN_UNIT

    def at_checkpoint(self) -> None:
        """The events read so far end at a checkpoint, which always sits at a unit's end:
        an implicit unit the reader still sees open was completed by the ``TX`` after it."""
        if self.state in _OPEN_UNIT:
            self.state = State.BETWEEN_UNITS
            self._read = _READ[self.state]

    def reset(self) -> None:
        """Start over, as for a new stream."""
        self.state = State.BETWEEN_PATCHES
        self._read = _READ[self.state]
        self.patches = 0
        self.patch = PatchHeaders(self.adapter, 1)
        self._ended = False


class Unit(NamedTuple):
    """One complete unit of atomicity (docs/design.md §2)."""

    #: Its ``A``, ``D``, ``PA`` and ``PD`` rows, in order.
    rows: list[Event]
    #: ``TC`` or an implicit unit's end; ``False`` for ``TA`` (its rows count for nothing).
    committed: bool
    #: Rows outside a transaction (ended by ``TX`` or the patch end).
    implicit: bool
    #: The patch it belongs to (its headers so far; later headers of the patch join them).
    patch: PatchHeaders
    #: What completed it (``TC``, ``TA``, or the ``TX`` / patch end after an implicit unit).
    end: Event


class EndOfPatch(NamedTuple):
    """The end of a patch (an empty patch has nothing else)."""

    patch: PatchHeaders
    #: The patch end event (its position is the patch's end).
    end: Event


def read_units(
    events: Iterable[Event], adapter: TermAdapter[Any] | None = None, *, source: str = "<events>"
) -> Iterator[Unit | EndOfPatch]:
    """The complete units and patch ends of ``events``, in order.

    Each unit comes out when it is complete, so the units before a decoder's error come out
    before the error. Events that run out inside a unit (hand-made ones; a decoder fails
    such input itself) raise :class:`DecodeError` naming ``source`` and the byte where the
    unfinished unit began, after the complete units; so does a broken transaction rule.
    """
    reader = UnitReader(adapter)
    read = reader.read
    rows: list[Event] = []
    start: Event | None = None  # the first event of the open unit
    for event in events:
        try:
            mark = read(event)
        except TransactionError as exc:
            raise DecodeError(exc.text(), source=source, offset=event.offset) from None
        if mark is Mark.ROW:
            rows.append(event)
        elif mark is Mark.FIRST_ROW:
            rows.append(event)
            start = event
        elif mark is Mark.HEADER or mark is Mark.OUTSIDE:
            continue
        elif mark is Mark.TX:
            start = event
        elif mark is Mark.PATCH_END:
            yield EndOfPatch(reader.patch, event)
        else:
            implicit = mark is Mark.TX_AFTER_IMPLICIT or mark is Mark.PATCH_END_AFTER_IMPLICIT
            yield Unit(rows, mark is not Mark.ABORT, implicit, reader.patch, event)
            rows = []
            start = event if mark is Mark.TX_AFTER_IMPLICIT else None
            if mark is Mark.PATCH_END_AFTER_IMPLICIT:
                yield EndOfPatch(reader.patch, event)
    if reader.in_unit:
        at = start.offset if start is not None else 0
        raise DecodeError("the events end inside a unit, which then counts for nothing", source=source, offset=at)


def patch_ends(
    events: Iterable[Event], adapter: TermAdapter[Any] | None = None, *, source: str = "<events>"
) -> Iterator[EndOfPatch]:
    """The end of each patch of ``events`` with its headers (units are not collected); a
    broken transaction rule raises :class:`DecodeError` as in :func:`read_units`."""
    reader = UnitReader(adapter)
    read = reader.read
    fresh = True  # only the first row after another event can move the reader (QUIET)
    for event in events:
        if type(event) in CHANGE_TYPES:
            if not fresh:
                continue
            fresh = False
        else:
            fresh = True
        try:
            mark = read(event)
        except TransactionError as exc:
            raise DecodeError(exc.text(), source=source, offset=event.offset) from None
        if mark in ENDS_PATCH:
            yield EndOfPatch(reader.patch, event)


def patch_headers(events: Iterable[Event], adapter: TermAdapter[Any] | None = None) -> PatchHeaders:
    """The headers of one whole patch whose rules a decoder has checked (a stream message).

    Its units are not followed, so :attr:`PatchHeaders.chain_after_changes` is not noted;
    this is the cheap way to a message's ``id`` on the replica's path.
    """
    headers = PatchHeaders(adapter if adapter is not None else _NT, 1)
    for event in events:
        if type(event) is Header:
            headers.take(event, after_changes=False)
    return headers


def chain_head(
    events: Iterable[Event], adapter: TermAdapter[Any] | None = None, *, head: str | None = None
) -> tuple[str | None, int]:
    """The chain head after ``events`` and the number of patches they end.

    The head is the ``id`` of the last ended patch that has one; ``head`` (the head before
    ``events``) when none has.
    """
    count = 0
    for end in patch_ends(events, adapter):
        head = end.patch.id or head
        count += 1
    return head, count
