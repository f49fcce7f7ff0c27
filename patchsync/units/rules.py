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
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from patchsync.errors import PatchsyncError
from patchsync.events import (
    Add,
    Delete,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)

__all__ = [
    "KIND_OF",
    "QUIET",
    "RULES",
    "TRANSITIONS",
    "Boundary",
    "Kind",
    "Rule",
    "State",
    "Step",
    "TransactionError",
    "UnitTracker",
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
        if isinstance(step, Rule):
            raise TransactionError(step, kind, self.state)
        state = step.state
        if state is not self.state:
            self.state = state
            self._row = TRANSITIONS[state]
        return step

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
