"""Incremental replay: a state directory of versions, each with the log positions it covers.

Layout of a state directory::

    STATE/CURRENT                         the name of the current version (switched atomically)
    STATE/v000007/part-*...               the quads (Parquet or N-Quads), as write_replay writes them
    STATE/v000007/_patchsync_positions.json   per log: path, identity, byte position; format, base

A run reads the current version and its positions, finds how far each log's whole frames
now reach (:func:`~._stream.advance`, the rule of the streaming source: a log removed, cut
below its position or replaced is refused, new files in a directory are new logs in
file-name order), reads only the units those new frames complete and folds them onto the
previous quads (:func:`~._replay.fold_onto`). The new version is written beside the
previous one, its positions file last; ``CURRENT`` then names it (``os.replace``), and only
then are versions beyond ``keep`` removed, so a run killed at any point leaves the previous
version current and whole. A version directory without its positions file is an unfinished
run's and is never read (the next run removes it). One run at a time writes a state
directory: it holds the directory's lock (:mod:`._lock`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from patchsync.errors import CheckpointError, PatchsyncError, UsageError
from patchsync.spark._errors import codec_errors, encode_error
from patchsync.spark._lock import state_lock
from patchsync.spark._replay import PathLike, fold, fold_onto, path_list, snapshot, snapshot_files, write_quads
from patchsync.spark._sources import expand_paths, paths_option
from patchsync.spark._stream import Offset, advance, plan, ranges_option

CURRENT = "CURRENT"
POSITIONS = "_patchsync_positions.json"
_VERSION = re.compile(r"v(\d{6})")
#: New log bytes up to which the quads they touch are broadcast to the fold's join (their
#: quads fit a driver's memory many times over), so the previous state is not shuffled.
BROADCAST_BYTES = 64 << 20


@dataclass(frozen=True)
class StateVersion:
    """One version of a state directory: its quads and the log positions they cover."""

    path: Path
    number: int
    #: Per log (its place in log order, as a string): ``path``, ``id`` (identity), ``at`` (byte).
    logs: dict[str, Offset]
    fmt: str
    base: list[str]
    #: Whether this run wrote it (False: nothing new was committed, the previous one stands).
    written: bool = True


def current_version(state: PathLike) -> StateVersion | None:
    """The current version of a state directory, or ``None`` if it holds none yet."""
    root = Path(os.fspath(state))
    try:
        name = (root / CURRENT).read_text().strip()
    except FileNotFoundError:
        return None
    m = _VERSION.fullmatch(name)
    try:
        doc = json.loads((root / name / POSITIONS).read_text()) if m else None
    except (OSError, ValueError):
        doc = None
    if m is None or not isinstance(doc, dict) or not isinstance(doc.get("logs"), dict):
        raise UsageError(f"{root / CURRENT}: names {name!r}, not a complete version of this state directory")
    return StateVersion(root / name, int(m.group(1)), doc["logs"], str(doc["format"]), list(doc["base"]))


def _versions(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _VERSION.fullmatch(p.name)) and p.is_dir()]
    return sorted(found)


def read_state(spark: SparkSession, version: StateVersion) -> DataFrame:
    """The quads ``s, p, o, g`` of a version."""
    if version.fmt == "parquet":
        return spark.read.parquet(str(version.path))
    return snapshot(spark, str(version.path)).select("s", "p", "o", "g")


def replay_into(
    spark: SparkSession,
    logs: PathLike | Sequence[PathLike],
    state: PathLike,
    *,
    base: PathLike | Sequence[PathLike] | None = None,
    fmt: str = "parquet",
    full: bool = False,
    keep: int = 2,
) -> StateVersion:
    """Bring the state directory ``state`` up to ``logs``: fold in what was committed since its
    current version (all of it the first time, or with ``full``) and write a new version.

    Raises :class:`~patchsync.errors.CheckpointError` for a log replaced or cut below its
    recorded position (unless ``full``), :class:`~patchsync.errors.UsageError` for a log
    recorded but not given, or a format or base that differs from the recorded ones.
    ``keep`` versions are kept (the new one included). The state directory's lock
    (:mod:`._lock`) is held meanwhile: a run while another process holds it is refused
    with a :class:`~patchsync.errors.UsageError` naming that process.
    """
    if keep < 1:
        raise UsageError(f"--keep {keep}: at least the current version is kept (1 or more)")
    root = Path(os.fspath(state))
    with state_lock(root):
        return _replay_into(spark, logs, root, base=base, fmt=fmt, full=full, keep=keep)


def _replay_into(
    spark: SparkSession,
    logs: PathLike | Sequence[PathLike],
    root: Path,
    *,
    base: PathLike | Sequence[PathLike] | None,
    fmt: str,
    full: bool,
    keep: int,
) -> StateVersion:
    bases = snapshot_files(base) if base is not None else []
    files = expand_paths(path_list(logs), (".jellyp",))
    prev = None if full else current_version(root)
    start: Offset = {"logs": {}}
    if prev is not None:
        _check_same(root, prev, files, fmt, bases)
        start = {"logs": prev.logs}
    try:
        end: Offset = {"logs": advance(start["logs"], files)}
    except CheckpointError as exc:
        raise CheckpointError(f"{exc}; it cannot be folded into {root} (--full replays every log)") from None
    if prev is not None and not plan(start, end):
        return StateVersion(prev.path, prev.number, prev.logs, prev.fmt, prev.base, written=False)
    rows = spark.read.format("jelly-patch").option("ranges", ranges_option(start, end)).load()
    if prev is not None:
        new_bytes = sum(p.end - p.start for p in plan(start, end))
        quads = fold_onto(read_state(spark, prev), rows, few=new_bytes <= BROADCAST_BYTES)
    else:
        quads = fold(rows, snapshot(spark, bases) if bases else None)
    versions = _versions(root)
    number = (versions[-1][0] if versions else 0) + 1
    out = root / f"v{number:06d}"
    root.mkdir(parents=True, exist_ok=True)
    with codec_errors():
        write_quads(quads, out, fmt)
    _write_atomic(out / POSITIONS, json.dumps({"logs": end["logs"], "format": fmt, "base": bases}, indent=1))
    _write_atomic(root / CURRENT, out.name + "\n")
    # Kept: the newest ``keep`` complete versions; a version without its positions file is
    # what a run killed midway left, and goes.
    complete = [p for _, p in _versions(root) if (p / POSITIONS).exists()]
    for _, old in _versions(root):
        if old not in complete[-keep:]:
            shutil.rmtree(old, ignore_errors=True)
    return StateVersion(out, number, end["logs"], fmt, bases)


def _check_same(root: Path, prev: StateVersion, files: list[str], fmt: str, bases: list[str]) -> None:
    if prev.fmt != fmt:
        raise UsageError(f"{prev.path}: holds {prev.fmt}; --format {fmt} needs --full")
    if bases and bases != prev.base:
        raise UsageError(f"{root}: a base starts a state, and this one holds a replay already (--full starts over)")
    for entry in prev.logs.values():
        if entry["path"] not in files:
            raise UsageError(f"{entry['path']}: replayed into {root} but not among the logs given (--full starts over)")


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def follow(
    spark: SparkSession,
    logs: PathLike | Sequence[PathLike],
    state: PathLike,
    *,
    trigger: float = 10.0,
    fmt: str = "parquet",
    keep: int = 2,
    base: PathLike | Sequence[PathLike] | None = None,
    on_version: Callable[[StateVersion], None] | None = None,
) -> StreamingQuery:
    """:func:`replay_into` as a streaming query: every ``trigger`` seconds in which the logs grew.

    The query reads ``jelly-patch`` as a stream, so Spark polls the logs (and fails the query
    on a log replaced or cut, with the line ``tail`` gives); each micro-batch folds what was
    committed into a new version exactly as a run of ``spark-replay`` would, from the
    positions the current version records. Those positions, not Spark's checkpoint, say what
    is folded, so a query killed at any point, or ``spark-replay`` runs between, never fold
    a unit twice. ``on_version`` is called with each version written. Returns the started query.
    """
    root = Path(os.fspath(state))
    paths = path_list(logs)
    replay_into(spark, paths, root, base=base, fmt=fmt, keep=keep)  # refusals fail here, before the query

    def batch(_rows: DataFrame, _batch_id: int) -> None:
        try:
            version = replay_into(spark, paths, root, fmt=fmt, keep=keep)
        except PatchsyncError as exc:
            # Raised inside Spark's callback: carried so that codec_errors() finds it again.
            raise encode_error(exc) from None
        if version.written and on_version is not None:
            on_version(version)

    return (
        spark.readStream.format("jelly-patch")
        .option("paths", paths_option(paths))
        .load()
        .writeStream.foreachBatch(batch)
        .trigger(processingTime=f"{trigger} seconds")
        .start()
    )


__all__ = ["CURRENT", "POSITIONS", "StateVersion", "current_version", "follow", "read_state", "replay_into"]
