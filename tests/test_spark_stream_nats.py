"""``jelly-patch`` over a NATS JetStream stream (``load("nats://HOST:PORT/STREAM")``), on the
shared local Spark and the test NATS server.

Differential: generated logs published to a stream must give, as a batch and as a stream, the
rows the batch source gives for the log file, in the same order (``row`` is numbered by
sequence instead), and their fold the state of the reference applier (MemoryTarget). Spark's
contract for a replayable source is the Structured Streaming programming guide, "Fault
Tolerance Semantics" (https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html):
offsets tracked per trigger, the same range read again after a failure.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("nats")

from patchsync.errors import CheckpointError
from patchsync.events import Event, Header, PatchEnd
from patchsync.options import StreamType

from .process_helpers import wait_for, wait_for_value
from .test_spark import generate_log, reference, typed_log
from .test_spark_stream import _driver, _fail, _kill9, batch_rows

Row = tuple[Any, ...]
#: Columns compared: all but ``log`` (the path or the address) and ``row`` (numbered by sequence).
SAME = (1, 2, 4, 5, 6, 7, 8, 9, 10)


def chained_patches(rng: random.Random, count: int, tag: str) -> list[list[Event]]:
    """Generated patches, each with the ``id`` and ``prev`` headers a stream needs."""
    patches: list[list[Event]] = [[]]
    for event in generate_log(rng, count):
        patches[-1].append(event)
        if type(event) is PatchEnd:
            patches.append([])
    out = []
    for n, patch in enumerate(patches[:-1]):
        ids = [Header("id", f"<urn:{tag}:{n}>")]
        if n:
            ids.append(Header("prev", f"<urn:{tag}:{n - 1}>"))
        out.append(ids + patch)
    return out


def log_file(path: Path, patches: list[list[Event]]) -> Path:
    return typed_log(path, [e for p in patches for e in p], StreamType.PUNCTUATED)


def publish(url: str, path: Path) -> None:
    from patchsync.nats import publish_logs

    publish_logs([path], url)


def in_order(rows: list[Row]) -> list[Row]:
    """The rows in log order (by ``row``), without the columns a stream numbers otherwise."""
    return [tuple(r[i] for i in SAME) for r in sorted(rows, key=lambda r: r[3])]


def table_rows(spark: Any, name: str) -> list[Row]:
    return [tuple(r) for r in spark.table(name).collect()]


def state_of(spark: Any, rows: list[Row]) -> set[tuple[str, str, str, str]]:
    import patchsync.spark as ps
    from patchsync.spark._replay import fold

    return set(ps.iter_quads(fold(spark.createDataFrame(rows, ps.CHANGE_SCHEMA), None)))


@pytest.mark.slow
def test_stream_rows_equal_the_batch_source_and_the_reference(spark: Any, nats_stream: str, tmp_path: Path) -> None:
    patches = chained_patches(random.Random(51), 60, "eq")
    first, whole = log_file(tmp_path / "first.jellyp", patches[:35]), log_file(tmp_path / "all.jellyp", patches)
    publish(nats_stream, first)
    query = (
        spark.readStream.format("jelly-patch")
        .option("messagesPerPartition", "7")
        .load(nats_stream)
        .writeStream.format("memory")
        .queryName("nats_eq")
        .start()
    )
    try:
        query.processAllAvailable()
        expected = in_order(batch_rows(spark, [first]))
        assert in_order(table_rows(spark, "nats_eq")) == expected
        # Published while the query runs: picked up, each row once.
        publish(nats_stream, whole)
        query.processAllAvailable()
        got = table_rows(spark, "nats_eq")
    finally:
        query.stop()
    assert in_order(got) == in_order(batch_rows(spark, [whole]))
    assert {r[0] for r in got} == {nats_stream}
    assert state_of(spark, got) == reference([whole])
    # The batch read of the stream: the same rows.
    batch = [tuple(r) for r in spark.read.format("jelly-patch").load(nats_stream).collect()]
    assert sorted(batch) == sorted(got)


def _purge(url: str) -> None:
    from patchsync.nats import NatsLog

    with NatsLog(url) as log:
        # The last message stays, as a stream's retention keeps the newest.
        log.run(lambda: log.js.purge_stream(log.name, keep=1))


@pytest.mark.slow
@pytest.mark.parametrize("change", ["delete", "remake", "purge"])
def test_deleted_or_purged_stream_stops_the_query(spark: Any, nats_stream: str, tmp_path: Path, change: str) -> None:
    from patchsync.nats import NatsLog

    patches = chained_patches(random.Random(52), 12, change)
    publish(nats_stream, log_file(tmp_path / "a.jellyp", patches[:6]))

    def start() -> Any:
        return (
            spark.readStream.format("jelly-patch")
            .load(nats_stream)
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "sink"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )

    query = start()
    query.processAllAvailable()
    query.stop()
    if change == "purge":
        # Messages 7 to 11 are published and purged before the query reads them.
        publish(nats_stream, log_file(tmp_path / "b.jellyp", patches))
        _purge(nats_stream)
        rule = rf"{nats_stream}, sequence 7: messages not yet read are gone \(purged"
    else:
        with NatsLog(nats_stream) as log:
            log.delete_stream()
        if change == "remake":
            publish(nats_stream, log_file(tmp_path / "b.jellyp", patches))
            rule = rf"{nats_stream}, sequence 6: the stream was deleted and made again"
        else:
            rule = rf"{nats_stream}: the stream was removed while being read \(read up to sequence 6\)"
    query = start()
    try:
        with pytest.raises(CheckpointError, match=f"^{rule}"):
            _fail(query)
    finally:
        query.stop()
    if change == "purge":
        # A new query started where the stream now starts reads what it holds.
        later = (
            spark.readStream.format("jelly-patch")
            .option("startingSequence", "12")
            .load(nats_stream)
            .writeStream.format("memory")
            .queryName("nats_later")
            .trigger(availableNow=True)
            .start()
        )
        later.awaitTermination()
        whole = batch_rows(spark, [log_file(tmp_path / "all.jellyp", patches)])
        assert in_order(table_rows(spark, "nats_later")) == in_order([r for r in whole if r[2] == 11])


@pytest.mark.slow
def test_driver_killed_and_restarted_gives_every_row_once(spark: Any, nats_stream: str, tmp_path: Path) -> None:
    import patchsync.spark as ps

    patches = chained_patches(random.Random(54), 80, "kill")
    stages = [log_file(tmp_path / f"{n}.jellyp", patches[:n]) for n in (10, 30, 50, 80)]
    expected = in_order(batch_rows(spark, [stages[-1]]))
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"

    def sink_rows() -> Any:
        return spark.read.schema(ps.CHANGE_SCHEMA).parquet(str(sink))

    def sunk() -> int:
        # Read through the sink's own log (_spark_metadata): files of a batch cut short by the
        # kill are not in it, as for every reader of a Spark file sink.
        return sink_rows().count() if (sink / "_spark_metadata").exists() else 0

    publish(nats_stream, stages[0])
    proc = _driver(nats_stream, sink, checkpoint)
    procs = [proc]
    try:
        publish(nats_stream, stages[1])
        wait_for(lambda: sunk() > 0, 120, "rows in the sink", progress=lambda: sorted(checkpoint.rglob("*")))
        # Killed while more is published: a micro-batch may be planned, running or half written.
        publish(nats_stream, stages[2])
        _kill9(proc)
        publish(nats_stream, stages[3])
        proc = _driver(nats_stream, sink, checkpoint)
        procs.append(proc)
        wait_for_value(sunk, len(expected), "every change row in the sink")
        _kill9(proc)
    finally:
        for p in procs:
            if p.poll() is None:
                _kill9(p)
    assert in_order([tuple(r) for r in sink_rows().collect()]) == expected


def test_a_message_cut_inside_its_unit_gives_none_of_its_rows(nats_stream: str) -> None:
    """A unit never spans messages: the codec refuses a transaction that does not end in its
    patch (https://w3id.org/jelly/dev/specification/patch/, "Transactions"), and a message
    holds one patch. A payload cut inside its unit fails the task, naming stream and
    sequence: no row of it is given."""
    from patchsync.events import Add, TxCommit, TxStart
    from patchsync.logs.payloads import encode_patch, message_options
    from patchsync.nats import NatsLog
    from patchsync.spark._errors import WorkerDecodeError, decode_error_in
    from patchsync.spark._remote_stream import MessageRange, read_messages

    ex = "http://example.org/"

    def payload(n: int, prev: str | None) -> bytes:
        head = [Header("id", f"<urn:cut:{n}>"), *([Header("prev", f"<{prev}>")] if prev else [])]
        rows = [Add(f"<{ex}s{n}>", f"<{ex}p>", f'"{i}"', "") for i in range(50)]
        return encode_patch([*head, TxStart(), *rows, TxCommit(), PatchEnd()], message_options(None))

    with NatsLog(nats_stream) as log:
        log.ensure_stream()
        log.publish_patch(payload(0, None), "urn:cut:0", None)
        whole = payload(1, "urn:cut:0")
        log.publish_patch(whole[: len(whole) - 40], "urn:cut:1", "urn:cut:0")
        identity = log.fingerprint()
    good = list(read_messages(MessageRange(0, nats_stream, identity, 0, 1)))
    assert [b.num_rows for b in good] == [51]  # its id header and 50 adds
    with pytest.raises(WorkerDecodeError) as caught:
        list(read_messages(MessageRange(0, nats_stream, identity, 0, 2)))
    error = decode_error_in(str(caught.value))
    assert error is not None and str(error).startswith(f"{nats_stream} sequence 2")
