"""Incremental replay: a state directory of versions, each with the log positions it covers.

Layout of a state directory::

    STATE/CURRENT                         the name of the current version (switched atomically)
    STATE/.lock                           held by the run writing the directory (:mod:`._lock`)
    STATE/v000005/part-*...               a full version: all the quads (Parquet or N-Quads)
    STATE/v000006/added/part-*...         a delta version: the quads the units folded by its
    STATE/v000006/deleted/part-*...       run leave present (added) or absent (deleted)
    STATE/v000006/_patchsync_positions.json   per log: path, identity, byte position; format,
                                          base; its layers: the full version and deltas it is

A version is a full version and the deltas written since, in order (its *layers*): per quad,
the last delta that names it decides whether it is there, else the full version does
(:func:`read_state`, the one reader). So an incremental run writes only the net changes of
the units it folds, without reading the previous quads. When the deltas of the current
version hold more than :data:`DELTA_BOUND` of its full version's quad count, the next run
writes a full version instead (the current quads with the new units folded in).

A run reads the current version and its positions, finds how far each log's whole frames
now reach (:func:`~._stream.advance`, the rule of the streaming source: a log removed, cut
below its position or replaced is refused, new files in a directory are new logs in
file-name order) and reads only the units those new frames complete. The new version is
written beside the previous one, its positions file last; ``CURRENT`` then names it
(``os.replace``), and only then are versions beyond ``keep`` removed (but for the layers of
those kept), so a run killed at any point leaves the previous version current and whole. A
version directory without its positions file is an unfinished run's and is never read (the
next run removes it). One run at a time writes a state directory: it holds the directory's
lock (:mod:`._lock`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from patchsync.errors import CheckpointError, PatchsyncError, UsageError
from patchsync.spark._errors import codec_errors, encode_error
from patchsync.spark._lock import state_lock
from patchsync.spark._replay import (
    ADDED,
    DELETED,
    PathLike,
    apply_changes,
    fold,
    net_changes,
    path_list,
    snapshot,
    snapshot_files,
    stack_changes,
    write_changes,
    write_quads,
)
from patchsync.spark._resume import DECODERS, prune
from patchsync.spark._sources import expand_paths, paths_option
from patchsync.spark._stream import Offset, advance, plan, ranges_option

CURRENT = "CURRENT"
POSITIONS = "_patchsync_positions.json"
_VERSION = re.compile(r"v(\d{6})")
#: New log bytes up to which the quads they touch are broadcast to the fold's join (their
#: quads fit a driver's memory many times over), so the previous state is not shuffled.
BROADCAST_BYTES = 64 << 20
#: Delta quads up to which they are broadcast to the join with a full version's quads.
BROADCAST_ROWS = 200_000
#: The quads of a version's deltas, as a fraction of its full version's, past which the next
#: run writes a full version: reading a version joins its deltas with its full version.
DELTA_BOUND = 0.2
FULL, DELTA = "full", "delta"


@dataclass(frozen=True)
class Layer:
    """A version directory that a version is made of: a ``full`` one or a ``delta``, with its quad count."""

    name: str
    kind: str
    rows: int


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
    #: The full version and the deltas since, in order, that make this version's quads.
    layers: tuple[Layer, ...] = field(default=())

    @property
    def delta_rows(self) -> int:
        """The quads this version's deltas hold."""
        return sum(layer.rows for layer in self.layers[1:])


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
        layers = tuple(Layer(str(e["name"]), str(e["kind"]), int(e["rows"])) for e in doc["layers"]) if doc else ()
    except (OSError, ValueError, KeyError, TypeError):
        doc = None
    if m is None or not isinstance(doc, dict) or not isinstance(doc.get("logs"), dict) or not layers:
        raise UsageError(f"{root / CURRENT}: names {name!r}, not a complete version of this state directory")
    return StateVersion(root / name, int(m.group(1)), doc["logs"], str(doc["format"]), list(doc["base"]), layers=layers)


def _versions(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _VERSION.fullmatch(p.name)) and p.is_dir()]
    return sorted(found)


def read_state(spark: SparkSession, version: StateVersion) -> DataFrame:
    """The quads ``s, p, o, g`` of a version: its full version with its deltas applied in order."""
    root = version.path.parent
    full, *deltas = version.layers
    quads = _read_quads(spark, root / full.name, version.fmt)
    if not deltas:
        return quads
    changes = stack_changes([_read_delta(spark, root / d.name, version.fmt) for d in deltas])
    return apply_changes(quads, changes, few=version.delta_rows <= BROADCAST_ROWS)


def _read_quads(spark: SparkSession, path: Path, fmt: str) -> DataFrame:
    if not path.is_dir() or not any(path.glob("part-*")):
        return spark.createDataFrame([], "s string, p string, o string, g string")
    if fmt == "parquet":
        return spark.read.parquet(str(path)).select("s", "p", "o", "g")
    return snapshot(spark, str(path)).select("s", "p", "o", "g")


def _read_delta(spark: SparkSession, path: Path, fmt: str) -> DataFrame:
    added = _read_quads(spark, path / ADDED, fmt).withColumn("add", F.lit(True))
    return added.unionByName(_read_quads(spark, path / DELETED, fmt).withColumn("add", F.lit(False)))


def _count(path: Path, fmt: str) -> int:
    """The quads in a directory written by :func:`write_quads`, read on the driver without a
    Spark job (each job costs a scheduling round, a large share of a small incremental run):
    the row counts in the Parquet footers, or the N-Quads lines (one per quad)."""
    parts = sorted(path.glob("part-*")) if path.is_dir() else []
    if fmt == "parquet":
        return sum(pq.ParquetFile(part).metadata.num_rows for part in parts)
    lines = 0
    for part in parts:
        with open(part, "rb") as f:
            while chunk := f.read(1 << 20):
                lines += chunk.count(b"\n")
    return lines


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
        return replace(prev, written=False)
    # Each range starts from the decoder snapshot its log's previous range left (_resume).
    decoders = root / DECODERS
    rows = spark.read.format("jelly-patch").option("ranges", ranges_option(start, end, str(decoders))).load()
    versions = _versions(root)
    number = (versions[-1][0] if versions else 0) + 1
    out = root / f"v{number:06d}"
    root.mkdir(parents=True, exist_ok=True)
    if prev is not None and prev.delta_rows <= DELTA_BOUND * prev.layers[0].rows:
        # A delta: the net changes of the new units alone; the previous quads are not read.
        write_changes(net_changes(rows), out, fmt)
        rows_written = _count(out / ADDED, fmt) + _count(out / DELETED, fmt)
        layers = (*prev.layers, Layer(out.name, DELTA, rows_written))
    else:
        if prev is not None:
            new_bytes = sum(p.end - p.start for p in plan(start, end))
            few = new_bytes <= BROADCAST_BYTES and prev.delta_rows <= BROADCAST_ROWS
            quads = apply_changes(read_state(spark, prev), net_changes(rows), few=few)
        else:
            quads = fold(rows, snapshot(spark, bases) if bases else None)
        with codec_errors():
            write_quads(quads, out, fmt)
        layers = (Layer(out.name, FULL, _count(out, fmt)),)
    doc = {
        "logs": end["logs"],
        "format": fmt,
        "base": bases,
        "layers": [{"name": layer.name, "kind": layer.kind, "rows": layer.rows} for layer in layers],
    }
    _write_atomic(out / POSITIONS, json.dumps(doc, indent=1))
    _write_atomic(root / CURRENT, out.name + "\n")
    _remove_old(root, keep)
    prune(decoders, end["logs"])
    return StateVersion(out, number, end["logs"], fmt, bases, layers=layers)


def _remove_old(root: Path, keep: int) -> None:
    """Remove all but the newest ``keep`` complete versions and the layers they are made of;
    a version without its positions file is what a run killed midway left, and goes."""
    complete = [p for _, p in _versions(root) if (p / POSITIONS).exists()]
    needed: set[str] = set()
    for path in complete[-keep:]:
        doc = json.loads((path / POSITIONS).read_text())
        needed.update(str(layer["name"]) for layer in doc["layers"])
    for _, old in _versions(root):
        if old.name not in needed:
            shutil.rmtree(old, ignore_errors=True)


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
    Each micro-batch holds the state directory's lock while it writes; hold
    :func:`~._lock.state_lock` around the query to keep other writers out between them
    (``spark-replay --follow`` does).
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


__all__ = [
    "CURRENT",
    "DELTA_BOUND",
    "POSITIONS",
    "Layer",
    "StateVersion",
    "current_version",
    "follow",
    "read_state",
    "replay_into",
]
