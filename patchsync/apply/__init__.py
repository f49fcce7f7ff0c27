"""Replaying patch logs into targets: the applier state machine, targets and one-call API.

``apply_file``/``apply_stream``/``apply_events`` apply a log to a :class:`Target` and return
an :class:`ApplyResult`; ``open_target`` opens a target by the names the CLI accepts.
Targets: :class:`MemoryTarget` (the reference), :class:`SqlTarget` (SQLite, PostgreSQL),
``RdflibTarget``/``FileTarget`` (rdflib) and ``OxigraphTarget`` (pyoxigraph), the last
three imported from their modules.
"""

from patchsync.apply.api import apply_events, apply_file, apply_stream, fingerprint, open_target
from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.target import Checkpoint, DumpableTarget, PatchRecord, SourceStatus, Target
from patchsync.apply.targets.memory import MemoryTarget

__all__ = [
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
    "fingerprint",
    "open_target",
]
