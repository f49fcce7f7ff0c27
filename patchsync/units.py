"""Units of atomicity: the transaction rules of RDF Patch as one transition table.

Theory of operation. Every reader, writer and consumer of patch events walks the same
small state machine (docs/design.md §2; <https://afs.github.io/rdf-delta/rdf-patch.html>; <https://w3id.org/jelly/dev/specification/patch/>,
"Transactions"). Rows are reduced to a :class:`Kind` (``H``, ``TX``, ``TC``, ``TA``, a
change, the end of a patch, the end of the stream) and :data:`TRANSITIONS` says, for each
(:class:`State`, :class:`Kind`) pair, either the :class:`Step` taken (the next state and
the unit boundary it marks) or the :class:`Rule` that the row breaks. The table is data,
as h11's ``_state.py`` is: no reader keeps its own copy of the rules in ``if`` chains.

The rules, as the table encodes them:

* ``TX`` opens a transaction; it may not follow an open ``TX`` (no nesting).
* ``TC`` / ``TA`` close the open transaction; without one they are an error.
* Changes (``A``, ``D``, ``PA``, ``PD``) outside a transaction form an implicit unit that
  ends at the next ``TX`` or at the end of the patch.
* A patch, and the stream, may not end inside a transaction.
* Headers: RDF Patch puts them at the start of a patch, but Jelly-Patch expressly lets
  them appear anywhere ("users are free to use headers ... within or outside of
  transactions") and its conformance suite holds such streams, so a header never breaks
  a rule here. :attr:`UnitTracker.in_headers` tells a consumer whether the patch has only
  had headers so far (the applier's chain headers must come first).

Callers wrap :class:`TransactionError` in their own error type with their own position
(``DecodeError`` in readers, ``EncodeError`` in writers, ``ApplyError`` in the applier).
:meth:`UnitTracker.send` is one dict lookup and no allocation, for the decoders' hot path.

The unit reader. Every consumer of decoded events (the applier, the daemon, compact,
reverse, Spark, the rdflib parser, ingest, capture, the server) reads units through
:class:`UnitReader`, so none decides for itself where a unit ends, whether it counts, or
what a patch's ``id`` and ``prev`` are. :meth:`UnitReader.read` takes one event and answers
its :class:`Mark`, keeping the patch's headers in :class:`PatchHeaders` (the one place chain
ids are extracted); :func:`read_units` yields whole :class:`Unit` and :class:`EndOfPatch`
items, :func:`patch_ends` the patch ends alone. Input that stops inside a unit gives the
complete units before it first, then the decoder's own error (a batch reader fails naming
the byte) or :class:`~patchsync.errors.DecodeError` from :func:`read_units`; a reader fed
as bytes arrive (the daemon) asks :attr:`UnitReader.between_units` and waits for the rest.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from patchsync.errors import DecodeError, PatchsyncError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import NTriplesTerms, header_text

__all__ = [
    "CHANGE_TYPES",
    "COMPLETES_UNIT",
    "ENDS_PATCH",
    "KIND_OF",
    "QUIET",
    "RULES",
    "TRANSITIONS",
    "Boundary",
    "EndOfPatch",
    "Kind",
    "Mark",
    "PatchHeaders",
    "Rule",
    "State",
    "Step",
    "TransactionError",
    "Unit",
    "UnitReader",
    "UnitTracker",
    "patch_ends",
    "read_units",
]


class State(enum.Enum):
    """Where a stream stands with respect to patches and units."""

    #: No patch is open: the stream's start, or just after a patch end.
    BETWEEN_PATCHES = "between patches"
    #: A patch is open and has had only headers so far.
    IN_HEADERS = "in the patch headers"
    #: Changes outside a transaction: an implicit unit is open.
    IMPLICIT_UNIT = "in an implicit unit"
    #: Between ``TX`` and its ``TC`` / ``TA``.
    IN_TX = "in a transaction"
    #: A patch is open and its last unit has ended (after ``TC`` / ``TA``).
    BETWEEN_UNITS = "between units"

    # Members are singletons compared by identity: hashing by identity too keeps dict and
    # set lookups keyed by them in C (Enum.__hash__ is a Python call), once per row here.
    __hash__ = object.__hash__


class Kind(enum.Enum):
    """What a row is, as far as the transaction rules care."""

    HEADER = "H"
    TX = "TX"
    TC = "TC"
    TA = "TA"
    #: ``A``, ``D``, ``PA`` or ``PD``.
    CHANGE = "change"
    #: The end of a patch: a punctuation row, a FRAME frame's end, ``Z``, a ``PatchEnd``.
    PATCH_END = "patch end"
    #: The end of the whole stream (the input is complete, or a writer finishes).
    STREAM_END = "stream end"

    # Members are singletons compared by identity: hashing by identity too keeps dict and
    # set lookups keyed by them in C (Enum.__hash__ is a Python call), once per row here.
    __hash__ = object.__hash__


class Boundary(enum.Enum):
    """The end of a unit of atomicity that a step marks (docs/design.md §2)."""

    NONE = "none"
    #: ``TC``: the transaction's changes are applied atomically.
    COMMIT = "commit"
    #: ``TA``: the transaction's changes are dropped.
    ABORT = "abort"
    #: The implicit unit before this row (``TX``, patch end, stream end) is complete.
    IMPLICIT_END = "implicit unit end"
    #: Not an end: this change row opens an implicit unit.
    IMPLICIT_START = "implicit unit start"


class Step(NamedTuple):
    """A legal transition: the next state and the unit boundary it marks."""

    state: State
    boundary: Boundary


class Rule(NamedTuple):
    """A broken transaction rule.

    ``name`` is a stable identifier; ``what`` says what happened (``{row}`` stands for the
    row's name, which each format spells its own way); ``why`` quotes the rule.
    """

    name: str
    what: str
    why: str

    def text(self, row: str) -> str:
        """One line for users: what happened and the rule it breaks."""
        return f"{self.what.format(row=row)} ({self.why})"


TX_NESTED = Rule(
    "tx-nested",
    "{row} while a transaction is open",
    "transactions do not nest: the previous transaction operation MUST NOT be a transaction start",
)
TX_NOT_OPEN = Rule(
    "tx-not-open",
    "{row} without an open transaction",
    "the previous transaction operation MUST be a transaction start",
)
PATCH_END_IN_TX = Rule(
    "patch-end-in-tx",
    "{row} inside a transaction",
    "a transaction MUST start and commit/abort within one patch",
)
STREAM_END_IN_TX = Rule(
    "stream-end-in-tx",
    "stream ends inside a transaction",
    "a transaction MUST start and commit/abort within one patch",
)

#: Every rule the table can name, by name.
RULES: dict[str, Rule] = {r.name: r for r in (TX_NESTED, TX_NOT_OPEN, PATCH_END_IN_TX, STREAM_END_IN_TX)}

_B = State.BETWEEN_PATCHES
_H = State.IN_HEADERS
_I = State.IMPLICIT_UNIT
_T = State.IN_TX
_U = State.BETWEEN_UNITS
_NONE, _COMMIT, _ABORT = Boundary.NONE, Boundary.COMMIT, Boundary.ABORT
_IMPLICIT_END, _IMPLICIT_START = Boundary.IMPLICIT_END, Boundary.IMPLICIT_START

#: (state, kind) -> the step taken, or the rule the row breaks. Complete: every pair is here.
TRANSITIONS: dict[State, dict[Kind, Step | Rule]] = {
    _B: {
        Kind.HEADER: Step(_H, _NONE),
        Kind.TX: Step(_T, _NONE),
        Kind.TC: TX_NOT_OPEN,
        Kind.TA: TX_NOT_OPEN,
        Kind.CHANGE: Step(_I, _IMPLICIT_START),
        Kind.PATCH_END: Step(_B, _NONE),  # an empty patch (a PUNCTUATED stream may start with one)
        Kind.STREAM_END: Step(_B, _NONE),
    },
    _H: {
        Kind.HEADER: Step(_H, _NONE),
        Kind.TX: Step(_T, _NONE),
        Kind.TC: TX_NOT_OPEN,
        Kind.TA: TX_NOT_OPEN,
        Kind.CHANGE: Step(_I, _IMPLICIT_START),
        Kind.PATCH_END: Step(_B, _NONE),
        Kind.STREAM_END: Step(_B, _NONE),
    },
    _I: {
        Kind.HEADER: Step(_I, _NONE),  # allowed by Jelly-Patch (see the module docstring)
        Kind.TX: Step(_T, _IMPLICIT_END),
        Kind.TC: TX_NOT_OPEN,
        Kind.TA: TX_NOT_OPEN,
        Kind.CHANGE: Step(_I, _NONE),
        Kind.PATCH_END: Step(_B, _IMPLICIT_END),
        Kind.STREAM_END: Step(_B, _IMPLICIT_END),
    },
    _T: {
        Kind.HEADER: Step(_T, _NONE),
        Kind.TX: TX_NESTED,
        Kind.TC: Step(_U, _COMMIT),
        Kind.TA: Step(_U, _ABORT),
        Kind.CHANGE: Step(_T, _NONE),
        Kind.PATCH_END: PATCH_END_IN_TX,
        Kind.STREAM_END: STREAM_END_IN_TX,
    },
    _U: {
        Kind.HEADER: Step(_U, _NONE),
        Kind.TX: Step(_T, _NONE),
        Kind.TC: TX_NOT_OPEN,
        Kind.TA: TX_NOT_OPEN,
        Kind.CHANGE: Step(_I, _IMPLICIT_START),
        Kind.PATCH_END: Step(_B, _NONE),
        Kind.STREAM_END: Step(_B, _NONE),
    },
}

#: The kind of each event type; ``Options`` has none (it is not part of any patch).
KIND_OF: dict[type, Kind] = {
    Header: Kind.HEADER,
    TxStart: Kind.TX,
    TxCommit: Kind.TC,
    TxAbort: Kind.TA,
    Add: Kind.CHANGE,
    Delete: Kind.CHANGE,
    PrefixAdd: Kind.CHANGE,
    PrefixDelete: Kind.CHANGE,
    PatchEnd: Kind.PATCH_END,
}

_PATCH_OPEN = frozenset({_H, _I, _T, _U})

#: For each kind, the states in which such a row changes nothing (the step loops back with
#: no boundary). Derived from the table: a hot loop may skip :meth:`UnitTracker.send` for a
#: change row while ``tracker.state in QUIET[Kind.CHANGE]`` and stay exact.
QUIET: dict[Kind, frozenset[State]] = {
    kind: frozenset(s for s, row in TRANSITIONS.items() if row[kind] == Step(s, _NONE)) for kind in Kind
}


class TransactionError(PatchsyncError):
    """A row broke a transaction rule; callers re-raise it as their own error type.

    ``rule`` is the broken :class:`Rule`, ``kind`` the row and ``state`` where the stream
    stood. ``str(error)`` names the row by its kind; :meth:`text` lets a format use its
    own spelling of the row (``Z (end of patch)``, ``punctuation``).
    """

    def __init__(self, rule: Rule, kind: Kind, state: State) -> None:
        self.rule = rule
        self.kind = kind
        self.state = state
        super().__init__(self.text())

    def text(self, row: str | None = None) -> str:
        """The message, with ``row`` as the row's name (default: the kind's value)."""
        return self.rule.text(self.kind.value if row is None else row)


class UnitTracker:
    """Follows one stream through :data:`TRANSITIONS`.

    Feed it every row's :class:`Kind` with :meth:`send` (or an event with
    :meth:`send_event`); it answers the :class:`Step` taken, so the caller sees unit
    boundaries, or raises :class:`TransactionError` and keeps its state (a caller that
    goes on after an error sees the stream as it was before the bad row).
    """

    __slots__ = ("_row", "state")

    def __init__(self, state: State = State.BETWEEN_PATCHES) -> None:
        self.state = state
        self._row = TRANSITIONS[state]

    def send(self, kind: Kind) -> Step:
        """Take the row ``kind``; returns the step or raises :class:`TransactionError`."""
        step = self._row[kind]
        if type(step) is Rule:
            raise TransactionError(step, kind, self.state)
        state = step.state  # type: ignore[union-attr]
        if state is not self.state:
            self.state = state
            self._row = TRANSITIONS[state]
        return step  # type: ignore[return-value]

    def send_event(self, event: object) -> Step | None:
        """:meth:`send` for an event; ``None`` for events outside patches (``Options``)."""
        kind = KIND_OF.get(type(event))
        return None if kind is None else self.send(kind)

    def check(self, kind: Kind) -> None:
        """Raise :class:`TransactionError` if ``kind`` would break a rule; the state stays."""
        step = self._row[kind]
        if type(step) is Rule:
            raise TransactionError(step, kind, self.state)

    def step_for(self, kind: Kind) -> Step | Rule:
        """What :meth:`send` would do with ``kind``, without doing it."""
        return self._row[kind]

    def reset(self, state: State = State.BETWEEN_PATCHES) -> None:
        """Put the tracker in ``state`` (a resumed stream, a dropped patch)."""
        self.state = state
        self._row = TRANSITIONS[state]

    @property
    def in_transaction(self) -> bool:
        """Between ``TX`` and its ``TC`` / ``TA``."""
        return self.state is State.IN_TX

    @property
    def in_unit(self) -> bool:
        """A unit (explicit or implicit) is open and not yet complete."""
        return self.state is State.IN_TX or self.state is State.IMPLICIT_UNIT

    @property
    def patch_open(self) -> bool:
        """A patch has had rows since the last patch end."""
        return self.state in _PATCH_OPEN

    @property
    def in_headers(self) -> bool:
        """No row but headers since the last patch end."""
        return self.state is State.BETWEEN_PATCHES or self.state is State.IN_HEADERS


# -- the unit reader --------------------------------------------------------------------


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


#: The marks that complete a unit (committed, or aborted for :attr:`Mark.ABORT`).
COMPLETES_UNIT = frozenset({Mark.TX_AFTER_IMPLICIT, Mark.COMMIT, Mark.ABORT, Mark.PATCH_END_AFTER_IMPLICIT})
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

_NT = NTriplesTerms()
_CUT = frozenset({State.BETWEEN_PATCHES, State.BETWEEN_UNITS})


class PatchHeaders:
    """The headers of one patch, as read so far.

    ``id`` and ``prev`` are the patch's chain ids (docs/design.md §4): the text of the last
    ``H id`` / ``H prev`` header, an IRI's text or else the value's N-Triples form. ``rows``
    holds every header event in order; ``number`` is the patch's place in the stream
    (1-based). ``chain_after_changes`` says an ``id`` or ``prev`` header came after the
    patch's first unit began (the applier's strict chain policy refuses that).
    """

    __slots__ = ("_id", "_prev", "adapter", "chain_after_changes", "number", "rows")

    def __init__(self, adapter: TermAdapter[Any], number: int) -> None:
        self.adapter = adapter
        self.number = number
        self.rows: list[Header] = []
        self.chain_after_changes = False
        self._id: Any = None
        self._prev: Any = None

    @property
    def id(self) -> str | None:
        """The patch's ``id``, or ``None`` without one."""
        return None if self._id is None else header_text(self._id, self.adapter)

    @property
    def prev(self) -> str | None:
        """The patch's ``prev``, or ``None`` (a first patch)."""
        return None if self._prev is None else header_text(self._prev, self.adapter)

    @property
    def id_term(self) -> Any:
        """The ``id`` header's value as the adapter's term (``None`` without one)."""
        return self._id

    def take(self, header: Header, *, after_changes: bool) -> None:
        """Record ``header`` (``after_changes``: the patch's first unit has begun)."""
        self.rows.append(header)
        if header.key == "id":
            self._id = header.value
        elif header.key == "prev":
            self._prev = header.value
        else:
            return
        self.chain_after_changes = self.chain_after_changes or after_changes

    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every header as ``(key, value text)``, in order."""
        return tuple((h.key, header_text(h.value, self.adapter)) for h in self.rows)


class UnitReader:
    """Reads events as units and patches, one event at a time (see the module docstring).

    ``adapter`` is the term adapter of the events (N-Triples strings by default); only the
    chain ids are read through it. :meth:`read` answers the :class:`Mark` of each event;
    :attr:`patch` is the open patch's :class:`PatchHeaders`, and after a patch end it is
    still the patch that ended until the next event is read. Rows inside an open unit
    change nothing here: a hot loop may skip :meth:`read` for an ``A``/``D``/``PA``/``PD``
    row while ``reader.tracker.state in QUIET[Kind.CHANGE]`` (its mark is then
    :attr:`Mark.ROW`). Breaking a rule raises :class:`TransactionError` (decoders have
    checked the rules already; hand-made events may break them).
    """

    __slots__ = ("_ended", "adapter", "patch", "patches", "tracker")

    def __init__(self, adapter: TermAdapter[Any] | None = None) -> None:
        self.adapter: TermAdapter[Any] = adapter if adapter is not None else _NT
        self.tracker = UnitTracker()
        #: Patches ended so far.
        self.patches = 0
        self.patch = PatchHeaders(self.adapter, 1)
        self._ended = False

    def read(self, event: Event) -> Mark:
        """The mark of ``event``; moves the reader past it."""
        kind = KIND_OF.get(type(event))
        if kind is None:
            return Mark.OUTSIDE
        if self._ended:
            self._ended = False
            self.patch = PatchHeaders(self.adapter, self.patches + 1)
        step = self.tracker.send(kind)
        if kind is Kind.HEADER:
            self.patch.take(event, after_changes=not self.tracker.in_headers)  # type: ignore[arg-type]
        elif kind is Kind.PATCH_END:
            self._ended = True
            self.patches += 1
        return _MARKS[kind][step.boundary]

    @property
    def between_units(self) -> bool:
        """Every event read so far belongs to a complete unit (or to no unit): a cut point."""
        return self.tracker.state in _CUT

    @property
    def between_patches(self) -> bool:
        """No patch is open: the last patch has ended (or none began)."""
        return self.tracker.state is State.BETWEEN_PATCHES

    @property
    def in_unit(self) -> bool:
        """A unit is open and not yet complete."""
        return self.tracker.in_unit

    def at_checkpoint(self) -> None:
        """The events read so far end at a checkpoint, which always sits at a unit's end:
        an implicit unit the reader still sees open was completed by the ``TX`` after it."""
        if self.tracker.in_unit:
            self.tracker.reset(State.BETWEEN_UNITS)

    def reset(self) -> None:
        """Start over, as for a new stream."""
        self.tracker.reset()
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
    #: The patch it belongs to (its headers as read up to the unit's end).
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


def patch_ends(events: Iterable[Event], adapter: TermAdapter[Any] | None = None) -> Iterator[EndOfPatch]:
    """The end of each patch of ``events`` with its headers (units are not collected)."""
    reader = UnitReader(adapter)
    read, tracker, quiet = reader.read, reader.tracker, QUIET[Kind.CHANGE]
    for event in events:
        if type(event) in CHANGE_TYPES and tracker.state in quiet:
            continue  # a row inside a unit: nothing to see
        if read(event) in ENDS_PATCH:
            yield EndOfPatch(reader.patch, event)
