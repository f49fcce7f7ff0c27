"""The curated public API: exactly these names, all importable, and a light import."""

from __future__ import annotations

import subprocess
import sys

import patchsync

# Changing this set is an API decision: update it on purpose, with the README.
PUBLIC = {
    # codec and events
    "PatchDecoder", "PatchEncoder", "RdfDecoder", "RdfEncoder", "encode_statements",
    "END", "NEED_DATA", "Event", "Position", "Options", "Header", "TxStart", "TxCommit", "TxAbort",
    "Add", "Delete", "PrefixAdd", "PrefixDelete", "PatchEnd",
    "RdfEvent", "StreamOptions", "Statement", "GraphStart", "GraphEnd", "Namespace", "FrameEnd",
    "PatchOptions", "StreamType", "StatementType", "Limits", "RdfOptions", "PhysicalType", "LogicalType",
    "TermAdapter", "TripleTerm",
    # applier
    "Applier", "ApplyResult", "Checkpoint", "PatchRecord", "Target", "MemoryTarget",
    "apply_events", "apply_file", "apply_stream", "open_target",
    # capture
    "Recorder", "RecordingStore", "LogWriter", "record",
    # log files
    "read_events", "write_events", "LogAppender",
    # errors
    "PatchsyncError", "DecodeError", "EncodeError", "UsageError", "FormatError",
    "ApplyError", "ChainError", "CheckpointError", "TargetUnavailable",
    "__version__",
}  # fmt: skip


def test_all_is_the_curated_api() -> None:
    assert set(patchsync.__all__) == PUBLIC
    assert len(patchsync.__all__) == len(PUBLIC)  # no duplicates


def test_every_public_name_resolves() -> None:
    for name in patchsync.__all__:
        assert getattr(patchsync, name) is not None, name


def test_errors_share_one_root() -> None:
    for name in (
        "DecodeError",
        "EncodeError",
        "UsageError",
        "FormatError",
        "ApplyError",
        "ChainError",
        "CheckpointError",
        "TargetUnavailable",
    ):
        assert issubclass(getattr(patchsync, name), patchsync.PatchsyncError)


def test_import_does_not_load_optional_stacks() -> None:
    code = "import sys, patchsync; print(sorted(m for m in ('rdflib', 'sqlalchemy', 'pyspark', 'watchdog') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
