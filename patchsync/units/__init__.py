"""Units of atomicity: the transaction rules (:mod:`.rules`, one transition table) and the
one unit reader every consumer of decoded events goes through (:mod:`.reader`)."""

from __future__ import annotations

from patchsync.units.reader import (
    CHANGE_TYPES,
    ENDS_PATCH,
    EndOfPatch,
    Mark,
    PatchHeaders,
    Unit,
    UnitReader,
    chain_head,
    patch_ends,
    patch_headers,
    read_units,
)
from patchsync.units.rules import (
    KIND_OF,
    QUIET,
    RULES,
    TRANSITIONS,
    Boundary,
    Kind,
    Rule,
    State,
    Step,
    TransactionError,
    UnitTracker,
)

__all__ = [
    "CHANGE_TYPES",
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
    "chain_head",
    "patch_ends",
    "patch_headers",
    "read_units",
]
