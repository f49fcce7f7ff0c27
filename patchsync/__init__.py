"""patchsync: RDF Patch replication in Python.

The public API lives here; modules whose names start with ``_`` and names not listed in
``__all__`` are internal.
"""

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes
from patchsync.errors import (
    ApplyError,
    ChainError,
    CheckpointError,
    DecodeError,
    EncodeError,
    FormatError,
    PatchsyncError,
    TargetUnavailable,
    UsageError,
)
from patchsync.events import (
    Add,
    Delete,
    Event,
    FrameEnd,
    GraphEnd,
    GraphStart,
    Header,
    LogicalType,
    Namespace,
    Options,
    PatchEnd,
    PhysicalType,
    Position,
    PrefixAdd,
    PrefixDelete,
    RdfEvent,
    RdfOptions,
    Statement,
    StreamOptions,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.options import Limits, PatchOptions, StatementType, StreamType
from patchsync.terms import TermAdapter, TripleTerm

__version__ = "0.1.0"

__all__ = [
    "END",
    "NEED_DATA",
    "Add",
    "Applier",
    "ApplyError",
    "ApplyResult",
    "ChainError",
    "Checkpoint",
    "CheckpointError",
    "DecodeError",
    "Delete",
    "EncodeError",
    "Event",
    "FormatError",
    "FrameEnd",
    "GraphEnd",
    "GraphStart",
    "Header",
    "Limits",
    "LogAppender",
    "LogWriter",
    "LogicalType",
    "MemoryTarget",
    "Namespace",
    "Options",
    "PatchDecoder",
    "PatchEncoder",
    "PatchEnd",
    "PatchOptions",
    "PatchRecord",
    "PatchsyncError",
    "PhysicalType",
    "Position",
    "PrefixAdd",
    "PrefixDelete",
    "RdfDecoder",
    "RdfEncoder",
    "RdfEvent",
    "RdfOptions",
    "Recorder",
    "RecordingStore",
    "Statement",
    "StatementType",
    "StreamOptions",
    "StreamType",
    "Target",
    "TargetUnavailable",
    "TermAdapter",
    "TripleTerm",
    "TxAbort",
    "TxCommit",
    "TxStart",
    "UsageError",
    "apply_events",
    "apply_file",
    "apply_stream",
    "encode_statements",
    "open_target",
    "read_events",
    "record",
    "write_events",
    "__version__",
]

# Exported lazily, so that ``import patchsync`` (and so every command's start) loads only the
# small modules above: the codec, the applier and the log-file layer load on first use, and
# the rdflib change recorder (rdflib) only when asked for.
_LAZY = {
    "Applier": "patchsync.apply",
    "ApplyResult": "patchsync.apply",
    "Checkpoint": "patchsync.apply",
    "MemoryTarget": "patchsync.apply",
    "PatchRecord": "patchsync.apply",
    "Target": "patchsync.apply",
    "apply_events": "patchsync.apply",
    "apply_file": "patchsync.apply",
    "apply_stream": "patchsync.apply",
    "open_target": "patchsync.apply",
    "END": "patchsync.codec.patch_decoder",
    "NEED_DATA": "patchsync.codec.patch_decoder",
    "PatchDecoder": "patchsync.codec.patch_decoder",
    "PatchEncoder": "patchsync.codec.patch_encoder",
    "RdfDecoder": "patchsync.codec.rdf_decoder",
    "RdfEncoder": "patchsync.codec.rdf_encoder",
    "encode_statements": "patchsync.codec.rdf_encoder",
    "LogWriter": "patchsync.capture",
    "Recorder": "patchsync.capture",
    "RecordingStore": "patchsync.capture",
    "record": "patchsync.capture",
    "LogAppender": "patchsync.logs.patch_logs",
    "read_events": "patchsync.logs.patch_logs",
    "write_events": "patchsync.logs.patch_logs",
}
if TYPE_CHECKING:
    from patchsync.apply import (
        Applier,
        ApplyResult,
        Checkpoint,
        MemoryTarget,
        PatchRecord,
        Target,
        apply_events,
        apply_file,
        apply_stream,
        open_target,
    )
    from patchsync.capture import LogWriter, Recorder, RecordingStore, record
    from patchsync.codec.patch_decoder import END, NEED_DATA, PatchDecoder
    from patchsync.codec.patch_encoder import PatchEncoder
    from patchsync.codec.rdf_decoder import RdfDecoder
    from patchsync.codec.rdf_encoder import RdfEncoder, encode_statements
    from patchsync.logs.patch_logs import LogAppender, read_events, write_events


__getattr__ = lazy_attributes(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public API (``__all__``), not the names this module builds it with."""
    return sorted(__all__)
