"""``spark.readStream.format("jelly-patch")`` on growing logs, on the shared local Spark.

Differential: a log copied into place in pieces cut at random bytes (inside frames, inside
units) must give, over all micro-batches, exactly the rows the batch source gives for the
whole log, each once, and after each piece only rows of complete units. Spark's contract
for a replayable source is the Structured Streaming programming guide, "Fault Tolerance
Semantics" (https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html):
offsets tracked per trigger, the same range read again after a failure.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.errors import CheckpointError, UsageError
from patchsync.options import StreamType

from .process_helpers import read_until, wait_for, wait_for_value
from .test_spark import generate_log, typed_log

Row = tuple[Any, ...]


def batch_rows(spark: Any, paths: list[Path]) -> list[Row]:
    import patchsync.spark as ps

    return sorted(tuple(r) for r in ps.change_rows(spark, paths).collect())


def rows_of(spark: Any, table: str, logs: dict[str, str] | None = None) -> list[Row]:
    """The rows in a memory sink, with each ``log`` path mapped back through ``logs``."""
    out = []
    for r in spark.table(table).collect():
        row = tuple(r)
        out.append(((logs or {}).get(row[0], row[0]), *row[1:]))
    return sorted(out)


def start(spark: Any, source: Path | str, name: str) -> Any:
    stream = spark.readStream.format("jelly-patch").load(str(source))
    return stream.writeStream.format("memory").queryName(name).outputMode("append").start()


def cut_points(size: int, rng: random.Random, pieces: int) -> list[int]:
    """Where a log of ``size`` bytes is cut when copied in pieces: anywhere, then its end."""
    return [*sorted(rng.sample(range(1, size), pieces)), size]


@pytest.mark.slow
@pytest.mark.parametrize("kind", [StreamType.PUNCTUATED, StreamType.FRAME])
def test_growing_log_gives_every_unit_once(spark: Any, tmp_path: Path, kind: StreamType) -> None:
    rng = random.Random(50 + len(kind.name))
    whole = typed_log(tmp_path / "whole.jellyp", generate_log(rng, 30), kind)
    expected = batch_rows(spark, [whole])
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    live = live_dir / "a.jellyp"
    data = whole.read_bytes()
    cuts = cut_points(len(data), rng, 8)
    live.write_bytes(data[: cuts[0]])
    name = f"grow_{kind.name.lower()}"
    query = start(spark, live_dir, name)
    try:
        for cut in cuts:
            with open(live, "ab") as f:
                f.write(data[live.stat().st_size : cut])
            query.processAllAvailable()
            got = rows_of(spark, name, {str(live): str(whole)})
            # Each row once, in whole units: a prefix of the log's rows (sorted, they are in row order).
            assert got == expected[: len(got)]
            if got and got[-1][3] + 1 < len(expected):
                # The next row starts a unit still open at the cut (or in a frame not yet whole).
                assert cut < len(data)
        assert rows_of(spark, name, {str(live): str(whole)}) == expected
    finally:
        query.stop()


@pytest.mark.slow
def test_new_segments_are_read_in_order(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(5)
    src = tmp_path / "src"
    src.mkdir()
    logs = [typed_log(src / f"{i:02d}.jellyp", generate_log(rng, 6), StreamType.PUNCTUATED) for i in range(3)]
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(logs[0], live / logs[0].name)
    query = start(spark, live, "segments")
    try:
        query.processAllAvailable()
        for log in logs[1:]:
            shutil.copy(log, live / log.name)
            query.processAllAvailable()
        mapping = {str(live / log.name): str(log) for log in logs}
        assert rows_of(spark, "segments", mapping) == batch_rows(spark, logs)
        # A segment that sorts before one already read would have to come first: refused.
        shutil.copy(logs[0], live / "00a.jellyp")
        shutil.copy(logs[0], live / "000.jellyp")
        with pytest.raises(UsageError, match=r"000.jellyp: a new log sorts before .*already read"):
            _fail(query)
    finally:
        query.stop()


def _fail(query: Any) -> None:
    """Let the query see its input again; its failure as patchsync's one-line error."""
    import patchsync.spark as ps

    with ps.codec_errors():
        query.processAllAvailable()
        query.awaitTermination(0)


@pytest.mark.slow
@pytest.mark.parametrize("change", ["truncate", "replace", "remove"])
def test_replaced_or_cut_log_stops_the_query(spark: Any, tmp_path: Path, change: str) -> None:
    rng = random.Random(9)
    live = tmp_path / "live"
    live.mkdir()
    log = typed_log(live / "a.jellyp", generate_log(rng, 10), StreamType.PUNCTUATED)
    query = start(spark, live, f"cut_{change}")
    try:
        query.processAllAvailable()
        assert spark.table(f"cut_{change}").count() > 0
        size = log.stat().st_size
        if change == "truncate":
            with open(log, "r+b") as f:
                f.truncate(size // 2)
            rule = rf"{log}, byte {size // 2}: the log shrank below what was already decoded \(byte {size}\)"
        elif change == "replace":
            # Written beside it and moved in one step: the running query must see the
            # other log, not the moment a rewrite has emptied the file (that is a cut).
            other = typed_log(tmp_path / "other.jellyp", generate_log(random.Random(10), 12), StreamType.PUNCTUATED)
            assert other.stat().st_size > size  # else it reads as a cut, not a replacement
            os.replace(other, log)
            rule = rf"{log}, byte 0: the log's first frame changed: it was replaced"
        else:
            log.unlink()
            rule = rf"{log}: the log was removed while being tailed"
        with pytest.raises(CheckpointError, match=f"^{rule}"):
            _fail(query)
    finally:
        query.stop()


#: The driver of the exactly-once test: a file sink with a checkpoint, run until killed.
DRIVER = """
import sys
import patchsync.spark as ps

source, sink, checkpoint = sys.argv[1:4]
spark = ps.session("local[1]", app_name="patchsync-stream-driver", quiet=True, **{"spark.sql.shuffle.partitions": "1"})
query = (
    spark.readStream.format("jelly-patch").load(source)
    .writeStream.format("parquet").option("path", sink).option("checkpointLocation", checkpoint)
    .trigger(processingTime="100 milliseconds").start()
)
print("query started", file=sys.stderr, flush=True)
query.awaitTermination()
"""


def _driver(source: Path | str, sink: Path, checkpoint: Path) -> subprocess.Popen[str]:
    # A session of its own, so that kill -9 of the group takes the driver's JVM with it,
    # as a crash of the driver's machine would.
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(source), str(sink), str(checkpoint)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    read_until(proc, "query started")
    return proc


def _kill9(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


@pytest.mark.slow
def test_driver_killed_and_restarted_gives_every_row_once(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(77)
    src = tmp_path / "src"
    src.mkdir()
    logs = [typed_log(src / f"{i:02d}.jellyp", generate_log(rng, 40), StreamType.PUNCTUATED) for i in range(2)]
    expected = batch_rows(spark, logs)
    live, sink, checkpoint = tmp_path / "live", tmp_path / "sink", tmp_path / "checkpoint"
    live.mkdir()
    first = logs[0].read_bytes()
    cuts = cut_points(len(first), rng, 6)

    def sunk() -> int:
        # Read through the sink's own log (_spark_metadata): files of a batch cut short by the
        # kill are not in it, as for every reader of a Spark file sink.
        return sink_rows().count() if (sink / "_spark_metadata").exists() else 0

    def sink_rows() -> Any:
        import patchsync.spark as ps

        return spark.read.schema(ps.CHANGE_SCHEMA).parquet(str(sink))

    procs: list[subprocess.Popen[str]] = []
    try:
        proc = _driver(live, sink, checkpoint)
        procs.append(proc)
        (live / logs[0].name).write_bytes(first[: cuts[0]])
        for cut in cuts[1:4]:
            with open(live / logs[0].name, "ab") as f:
                f.write(first[(live / logs[0].name).stat().st_size : cut])
        wait_for(lambda: sunk() > 0, 120, "rows in the sink", progress=lambda: sorted(checkpoint.rglob("*")))
        # Killed while more is being written: a micro-batch may be planned, running or half written.
        with open(live / logs[0].name, "ab") as f:
            f.write(first[(live / logs[0].name).stat().st_size : cuts[4]])
        _kill9(proc)
        with open(live / logs[0].name, "ab") as f:
            f.write(first[(live / logs[0].name).stat().st_size :])
        shutil.copy(logs[1], live / logs[1].name)

        proc = _driver(live, sink, checkpoint)
        procs.append(proc)
        wait_for_value(sunk, len(expected), "every change row in the sink")
        _kill9(proc)
    finally:
        for p in procs:
            if p.poll() is None:
                _kill9(p)
    mapping = {str(live / log.name): str(log) for log in logs}
    got = sorted((mapping[r[0]], *r[1:]) for r in map(tuple, sink_rows().collect()))
    assert got == expected
