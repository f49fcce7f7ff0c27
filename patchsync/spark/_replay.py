"""Replay and compaction of patch logs as Spark jobs (driver side).

Replay uses that add and delete are set operations on single quads: the state of a quad
after a sequence of units depends only on the last committed operation on that quad
(docs/design.md §7). So the job is a group-by on the quad, keeping the operation with the greatest
``(log_index, row)``, the order in which the single-process applier would have run it; a
base snapshot enters as adds ordered before every log. Only that group-by shuffles; the
decode is one task per file.

Compaction is the same group-by without the base: for each quad touched by the logs, its
last committed operation. Applying that net patch to any state gives what applying the logs
in order gives, so it can replace them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from patchsync import formats
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import UsageError
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.spark._errors import codec_errors
from patchsync.spark._sources import RDF_SUFFIXES, expand_paths, paths_option
from patchsync.terms.ntriples import NTriplesTerms

PathLike = str | os.PathLike[str]


def path_list(paths: PathLike | Sequence[PathLike]) -> list[str]:
    """One path or several, as a list of strings."""
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def change_rows(spark: SparkSession, logs: PathLike | Sequence[PathLike]) -> DataFrame:
    """The change rows of ``.jellyp`` logs (files or directories, in log order), one partition per file.

    Directories are listed here, on the driver, so that a missing path fails at once with a
    :class:`~patchsync.errors.UsageError` and the log order is fixed before any task runs.
    """
    files = expand_paths(path_list(logs), (".jellyp",))
    return spark.read.format("jelly-patch").option("paths", paths_option(files)).load()


def snapshot(spark: SparkSession, paths: PathLike | Sequence[PathLike]) -> DataFrame:
    """Quads of snapshot files of any RDF format with the ``convert`` role, mixed freely:
    Jelly-RDF (``.jelly``, a ``patchsync snapshot`` included: its position is not used), N-Quads,
    N-Triples, TriG, Turtle, Jena's RDF Thrift (``.rt``) and RDF Protobuf (``.rpb``).

    Columns ``s``, ``p``, ``o``, ``g`` (``""`` for the default graph), ``log_index``, ``row``.
    Every format gives the N-Triples strings and blank node labels ``.nq`` gives for the same data.
    """
    return spark.read.format("patchsync-rdf").option("paths", paths_option(snapshot_files(paths))).load()


def snapshot_files(paths: PathLike | Sequence[PathLike]) -> list[str]:
    """The RDF files that snapshot paths (files or directories) stand for, in order.

    Checked on the driver, so that a missing path or a file of no RDF format fails at once
    with a one-line :class:`~patchsync.errors.UsageError`, before any task runs.
    """
    files = path_list(paths)
    for f in files:
        _snapshot_format(f)
    return expand_paths(files, RDF_SUFFIXES)


def _snapshot_format(path: str) -> str:
    """The format name of a snapshot file (``"mixed"`` for a directory of RDF files)."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file or directory")
    if p.is_dir():
        if not expand_paths([path], RDF_SUFFIXES):
            raise UsageError(f"{path}: a snapshot directory holds RDF files ({', '.join(RDF_SUFFIXES)}); none here")
        return "mixed"
    found = formats.find(path, None, formats.RDF_CONVERT)
    if found is None:
        raise UsageError(f"{path}: a base snapshot is an RDF file: {', '.join(RDF_SUFFIXES)}")
    return found.name


#: Bits of a row number in :func:`_at`: 2**40 rows per file, far beyond any log.
_ROW_BITS = 40


def _at() -> Column:
    """``(log_index, row)`` as one long, ordered the same way: the order in which the applier
    runs operations (the greatest is the last). A long is compared and shuffled faster
    than a struct of two fields, a third of the group-by's time (bench/spark_bench.py).
    Base snapshot rows (``log_index`` -1) come out negative, before every log."""
    return F.col("log_index").cast("long") * F.lit(1 << _ROW_BITS) + F.col("row")


def _last_committed(rows: DataFrame) -> DataFrame:
    # The greatest (log_index, row) is the operation the applier would have run last.
    return (
        rows.where(F.col("committed") & F.col("op").isin("A", "D"))
        .select(
            "s",
            "p",
            "o",
            F.coalesce(F.col("g"), F.lit("")).alias("g"),
            _at().alias("at"),
            "op",
        )
        .groupBy("s", "p", "o", "g")
        .agg(F.max_by("op", "at").alias("op"))
    )


def replay(
    spark: SparkSession,
    logs: PathLike | Sequence[PathLike],
    base: PathLike | Sequence[PathLike] | None = None,
) -> DataFrame:
    """The dataset after applying ``logs`` in order to ``base``, as quads ``(s, p, o, g)``.

    ``logs`` are ``.jellyp`` files or directories of them (read in file-name order);
    ``base`` is an optional starting state: RDF files of any ``convert`` format or directories
    of them (see :func:`snapshot`). Terms are N-Triples
    strings and ``g`` is ``""`` for the default graph, as in ``patchsync dump``. Only
    committed units count (aborted units and a unit cut off by the end of a file do not);
    the result is lazy: a bad file fails the first action, which :func:`codec_errors`
    turns into the codec's :class:`~patchsync.errors.DecodeError`.
    """
    return fold(change_rows(spark, logs), None if base is None else snapshot(spark, base))


def fold(rows: DataFrame, base: DataFrame | None) -> DataFrame:
    """The quads after applying change ``rows`` (columns of ``jelly-patch``) to ``base``
    (quads ``s, p, o, g``, or none): per quad, its last committed operation wins."""
    ops = _committed_ops(rows)
    if base is not None:
        start = base.select(
            "s", "p", "o", "g", F.lit(-1).alias("log_index"), F.lit(0).cast("long").alias("row"), F.lit("A").alias("op")
        )
        ops = start.unionByName(ops)
    last = _last_ops(ops)
    return last.where(F.col("add")).select("s", "p", "o", "g")


def _committed_ops(rows: DataFrame) -> DataFrame:
    """The committed adds and deletes among change rows, ``g`` ``""`` for the default graph."""
    return rows.where(F.col("committed") & F.col("op").isin("A", "D")).select(
        "s", "p", "o", F.coalesce(F.col("g"), F.lit("")).alias("g"), "log_index", "row", "op"
    )


def _last_ops(ops: DataFrame) -> DataFrame:
    """Per quad, whether its last operation (the greatest ``(log_index, row)``) is an add."""
    return (
        ops.select("s", "p", "o", "g", _at().alias("at"), (F.col("op") == "A").alias("add"))
        .groupBy("s", "p", "o", "g")
        .agg(F.max_by("add", "at").alias("add"))
    )


def fold_onto(state: DataFrame, rows: DataFrame, *, few: bool = False) -> DataFrame:
    """:func:`fold` of ``rows`` onto a ``state`` that holds each quad once (a replay's result).

    The same answer by another road, for an incremental replay: only the quads the rows
    touch are grouped; the state is kept but for those (an anti-join). With ``few`` (the
    caller knows the new rows are few) the touched quads are broadcast, so the state is
    not shuffled; otherwise Spark chooses.
    """
    return apply_changes(state, net_changes(rows), few=few)


def net_changes(rows: DataFrame) -> DataFrame:
    """Per quad that the committed units of change ``rows`` touch, whether it is there after
    them: columns ``s, p, o, g, add``. Applied to any state with :func:`apply_changes`, they
    give what applying the rows in order gives (the last committed operation on a quad wins)."""
    return _last_ops(_committed_ops(rows))


def stack_changes(layers: Sequence[DataFrame]) -> DataFrame:
    """Net changes (columns of :func:`net_changes`) of several layers applied in order, as one:
    per quad, the layer that touched it last decides."""
    if len(layers) == 1:
        return layers[0]
    ops = [c.select("s", "p", "o", "g", "add", F.lit(i).alias("layer")) for i, c in enumerate(layers)]
    stacked = ops[0]
    for more in ops[1:]:
        stacked = stacked.unionByName(more)
    return stacked.groupBy("s", "p", "o", "g").agg(F.max_by("add", "layer").alias("add"))


def apply_changes(state: DataFrame, changes: DataFrame, *, few: bool = False) -> DataFrame:
    """The quads of ``state`` (each quad once) after net ``changes`` (:func:`net_changes`): the
    state but for the quads the changes touch (an anti-join), and those the changes add.
    With ``few`` the touched quads are broadcast, so the state is not shuffled."""
    touched = changes.select("s", "p", "o", "g")
    kept = state.select("s", "p", "o", "g").join(
        F.broadcast(touched) if few else touched, ["s", "p", "o", "g"], "left_anti"
    )
    return kept.unionByName(changes.where(F.col("add")).select("s", "p", "o", "g"))


def compact(spark: SparkSession, logs: PathLike | Sequence[PathLike]) -> DataFrame:
    """One net patch equivalent to ``logs``, as rows ``(op, s, p, o, g, key)``.

    Per quad, its last committed ``A`` or ``D``; per (graph, prefix), its last committed
    ``PA`` (IRI in ``o``) or ``PD``. Applying these rows in any order to a state gives what
    applying the logs in order gives. :func:`write_compact` writes them as a ``.jellyp``.
    """
    rows = change_rows(spark, logs).where(F.col("committed"))
    quads = _last_committed(rows).select("op", "s", "p", "o", "g", F.lit(None).cast("string").alias("key"))
    prefixes = (
        rows.where(F.col("op").isin("PA", "PD"))
        .select(F.coalesce(F.col("g"), F.lit("")).alias("g"), "key", _at().alias("at"), "op", "o")
        .groupBy("g", "key")
        .agg(F.max_by(F.struct("op", "o"), "at").alias("last"))
        .select(
            F.col("last.op").alias("op"),
            F.lit(None).cast("string").alias("s"),
            F.lit(None).cast("string").alias("p"),
            F.col("last.o").alias("o"),
            "g",
            "key",
        )
    )
    return prefixes.unionByName(quads)


def write_compact(net: DataFrame, out: PathLike | IO[bytes], *, max_frame_rows: int = 10_000) -> int:
    """Write the rows of :func:`compact` as one ``.jellyp`` patch (one transaction); returns rows written.

    Runs on the driver, streaming the rows with ``toLocalIterator`` so the net patch need not
    fit in the driver's memory at once. Prefix rows come first, so that they precede the
    statements that may use them.
    """
    with codec_errors():
        flags = net.select(
            F.max(F.coalesce(F.col("s").startswith("<<") | F.col("o").startswith("<<"), F.lit(False))).alias("star"),
            F.max(
                F.coalesce(~F.col("s").startswith("<") & ~F.col("s").startswith("_:"), F.lit(False))
                | F.coalesce(~F.col("p").startswith("<") | F.col("p").startswith("<<"), F.lit(False))
            ).alias("generalized"),
        ).first()
    star = bool(flags["star"]) if flags is not None else False
    generalized = bool(flags["generalized"]) if flags is not None else False
    options = PatchOptions(
        stream_type=StreamType.PUNCTUATED,
        statement_type=StatementType.QUADS,
        rdf_star=star,
        generalized_statements=generalized,
    )
    encoder: PatchEncoder[str] = PatchEncoder(options, NTriplesTerms(), max_frame_rows=max_frame_rows)
    ordered = net.orderBy(F.col("op").isin("PA", "PD").desc())
    with _open_out(out) as f, codec_errors():
        encoder.tx_start()
        n = 0
        for r in ordered.toLocalIterator():
            op = r["op"]
            if op == "A":
                encoder.add(r["s"], r["p"], r["o"], r["g"])
            elif op == "D":
                encoder.delete(r["s"], r["p"], r["o"], r["g"])
            elif op == "PA":
                encoder.prefix_add(r["key"], r["o"], r["g"])
            else:
                encoder.prefix_delete(r["key"], None, r["g"])
            n += 1
            f.write(encoder.take())
        encoder.tx_commit()
        encoder.end_patch()
        encoder.finish()
        f.write(encoder.take())
    return n


class _open_out:
    """A context manager over a path (opened, then closed) or an open binary stream (kept open)."""

    def __init__(self, out: PathLike | IO[bytes]) -> None:
        self._out = out
        self._owned: IO[bytes] | None = None

    def __enter__(self) -> IO[bytes]:
        if isinstance(self._out, (str, os.PathLike)):
            self._owned = open(self._out, "wb")
            return self._owned
        return self._out

    def __exit__(self, *exc: object) -> None:
        if self._owned is not None:
            self._owned.close()


def nquads_lines(quads: DataFrame) -> DataFrame:
    """One N-Quads line per quad (a single ``value`` column, for ``DataFrame.write.text``)."""
    return quads.select(_nquad_line().alias("value"))


def _nquad_line() -> Column:
    return F.when(F.col("g") == "", F.concat_ws(" ", "s", "p", "o", F.lit("."))).otherwise(
        F.concat_ws(" ", "s", "p", "o", "g", F.lit("."))
    )


def iter_quads(quads: DataFrame) -> Iterator[tuple[str, str, str, str]]:
    """The quads of a replay result on the driver, as tuples (for tests and small results)."""
    with codec_errors():
        for r in quads.toLocalIterator():
            yield (r["s"], r["p"], r["o"], r["g"])


def write_replay(
    spark: SparkSession,
    logs: PathLike | Sequence[PathLike],
    out: PathLike,
    *,
    base: PathLike | Sequence[PathLike] | None = None,
    fmt: str = "parquet",
) -> None:
    """Replay ``logs`` onto ``base`` and write the quads to the directory ``out`` (replaced if present).

    ``fmt`` is ``parquet`` (columns ``s``, ``p``, ``o``, ``g``) or ``nq`` (N-Quads text
    partitions). A bad input file raises the codec's :class:`~patchsync.errors.DecodeError`.
    """
    if fmt not in ("parquet", "nq"):
        raise UsageError(f"unknown output format {fmt!r} (expected parquet or nq)")
    write_quads(replay(spark, logs, base), out, fmt)


def write_quads(quads: DataFrame, out: PathLike, fmt: str) -> None:
    """Write quads to the directory ``out`` (replaced if present) as ``parquet`` or ``nq``."""
    if fmt not in ("parquet", "nq"):
        raise UsageError(f"unknown output format {fmt!r} (expected parquet or nq)")
    with codec_errors():
        if fmt == "parquet":
            quads.write.mode("overwrite").parquet(os.fspath(out))
        else:
            nquads_lines(quads).write.mode("overwrite").text(os.fspath(out))
            _name_parts(Path(os.fspath(out)), ".txt", ".nq")


#: The directories of :func:`write_changes`: the quads a delta adds and those it deletes.
ADDED, DELETED = "added", "deleted"


def write_changes(changes: DataFrame, out: PathLike, fmt: str) -> None:
    """Write net changes (:func:`net_changes`) to ``out`` as two quad directories in the format
    ``fmt``: ``out/added`` and ``out/deleted`` (one missing when no quad goes there), in one job."""
    if fmt not in ("parquet", "nq"):
        raise UsageError(f"unknown output format {fmt!r} (expected parquet or nq)")
    root = Path(os.fspath(out))
    with codec_errors():
        if fmt == "parquet":
            changes.select("s", "p", "o", "g", "add").write.mode("overwrite").partitionBy("add").parquet(str(root))
        else:
            lines = changes.select(_nquad_line().alias("value"), "add")
            lines.write.mode("overwrite").partitionBy("add").text(str(root))
    # Spark names a partition by its value; the names say what the quads are.
    for value, name in (("true", ADDED), ("false", DELETED)):
        part = root / f"add={value}"
        if part.is_dir():
            part.rename(root / name)
            if fmt == "nq":
                _name_parts(root / name, ".txt", ".nq")


def _name_parts(out: Path, old: str, new: str) -> None:
    """Give Spark's part files (and the checksums beside them) the suffix of their format:
    its text writer names them ``part-*.txt`` whatever they hold."""
    for part in out.glob(f"part-*{old}"):
        part.rename(part.with_name(part.name.removesuffix(old) + new))
        crc = part.with_name(f".{part.name}.crc")
        if crc.exists():
            crc.rename(crc.with_name(f".{part.name.removesuffix(old)}{new}.crc"))
