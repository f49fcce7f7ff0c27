"""Replaying patch logs into targets: the applier state machine, targets and one-call API.

``apply_file``/``apply_stream``/``apply_events`` apply a log to a :class:`Target` and return
an :class:`ApplyResult`; ``open_target`` opens a target by the names the CLI accepts, through
the scheme registry (:mod:`patchsync.apply.registry`, extended with ``register_target``).
Targets declare optional abilities in ``capabilities`` (the ``CAN_*`` names), each a typed
protocol checked once when an applier takes the target (the contract: :mod:`patchsync.apply.target`).
Targets: :class:`MemoryTarget` (the reference), :class:`SqlTarget` (SQLite, PostgreSQL),
``RdflibTarget`` (rdflib), ``FileTarget`` (RDF files) and ``OxigraphTarget`` (pyoxigraph), the
last three imported from their modules. ``write_snapshot`` writes a target's state with its
position and ``load_base`` starts an empty target from such a file (docs/design.md §10).
"""

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes
from patchsync.apply.registry import open_target, register_target, target_schemes
from patchsync.apply.target import (
    CAN_BULK_LOAD,
    CAN_CONTAINS,
    CAN_DISCARD,
    CAN_DUMP,
    CAN_HISTORY,
    CAN_LAST_WRITES,
    CAN_NAMESPACES,
    CAN_WRITE_EACH,
    CAN_WRITE_LATER,
    CAN_WRITE_PREFIXES,
    Checkpoint,
    DumpableTarget,
    PatchRecord,
    SourceStatus,
    Target,
    capabilities_of,
)

if TYPE_CHECKING:
    from patchsync.apply.api import apply_events, apply_file, apply_stream, fingerprint
    from patchsync.apply.applier import Applier, ApplyResult
    from patchsync.apply.base import load_base
    from patchsync.apply.snapshot_file import write_snapshot
    from patchsync.apply.targets.memory import MemoryTarget

# The applier and the one-call API load on first use: opening a target to read its
# checkpoints (``patchsync status``) needs neither.
_LAZY = {
    "apply_events": "patchsync.apply.api",
    "apply_file": "patchsync.apply.api",
    "apply_stream": "patchsync.apply.api",
    "fingerprint": "patchsync.apply.api",
    "Applier": "patchsync.apply.applier",
    "ApplyResult": "patchsync.apply.applier",
    "MemoryTarget": "patchsync.apply.targets.memory",
    "load_base": "patchsync.apply.base",
    "write_snapshot": "patchsync.apply.snapshot_file",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "CAN_BULK_LOAD",
    "CAN_CONTAINS",
    "CAN_DISCARD",
    "CAN_DUMP",
    "CAN_HISTORY",
    "CAN_LAST_WRITES",
    "CAN_NAMESPACES",
    "CAN_WRITE_EACH",
    "CAN_WRITE_LATER",
    "CAN_WRITE_PREFIXES",
    "Applier",
    "ApplyResult",
    "Checkpoint",
    "DumpableTarget",
    "MemoryTarget",
    "PatchRecord",
    "SourceStatus",
    "Target",
    "apply_events",
    "apply_file",
    "apply_stream",
    "capabilities_of",
    "fingerprint",
    "load_base",
    "open_target",
    "register_target",
    "target_schemes",
    "write_snapshot",
]
