"""``jelly-patch`` as a batch and a streaming source: change rows of growing ``.jellyp`` logs.

Theory of operation. Spark's streaming engine asks the driver for the latest offset, plans
a micro-batch from the previous offset to it, checkpoints both before any task runs, and
replays the same range after a crash. So a range must read the same rows every time, and
consecutive ranges must give every row once. An offset names, per log, its place in log
order, its identity (:func:`~patchsync.logs.fingerprint.fingerprint`, the rule ``apply`` and
``tail`` use) and a byte position where a whole delimited frame ends (a frame still being
written is not counted: :func:`~patchsync.codec.framing.whole_frames`). A range
``[a, b)`` of one log gives the units that the frames of ``[a, b)`` complete
(:func:`~._sources.decode_change_batches` with ``start``/``end``): a unit still open at
``b`` is waited on and comes out whole in a later range, an aborted one with
``committed`` false, as in the batch source. A log cannot be decoded from the middle (its
lookup tables run through the file, docs/design.md §7), so a task decodes from byte 0
and leaves out what ``a`` covers, unless the source has a directory of decoder snapshots
(option ``decoderSnapshots``, :mod:`._resume`): a task then starts from the newest snapshot
at or before ``a`` and, when ``b`` falls between patches, leaves one there for the next.

The driver checks every known log on each poll, and a task checks its log before reading:
a log removed, cut below its position or whose first frame changed stops the query with
the line ``tail`` gives (:mod:`patchsync.logs.fingerprint`). New files in a directory are
new logs, taken in file-name order; one that sorts before a log already read is refused,
since its rows would have to come first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from patchsync.codec.framing import read_varint, whole_frames
from patchsync.errors import PatchsyncError, UsageError
from patchsync.logs.fingerprint import (
    FINGERPRINT_BYTES,
    fingerprint,
    jelly_start,
    log_removed,
    log_replaced,
    log_shrank,
)
from patchsync.options import Limits
from patchsync.spark import _resume
from patchsync.spark._errors import encode_error
from patchsync.spark._remote_stream import RemoteReader, RemoteStreamReader, address_of
from patchsync.spark._sources import (
    CHANGE_SCHEMA,
    ChangeReader,
    JellyDataSource,
    NQuadsDataSource,
    RdfDataSource,
    decode_change_batches,
    expand_paths,
    option_paths,
)

#: Bytes looked at per read when the driver finds where whole frames end.
SCAN_BYTES = 8 << 20
#: The largest frame the driver steps over; a longer one is left to the decoder to refuse.
MAX_FRAME_BYTES = Limits().max_frame_bytes

Offset = dict[str, Any]


def check_log(path: str, identity: str, position: int) -> int:
    """Stop on a log that is no longer the one read up to ``position``; its size if it is.

    The rule of ``tail`` (:mod:`patchsync.logs.fingerprint`): a log is appended to, never
    removed, cut back or replaced (a new first frame).
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, on every path
    except FileNotFoundError:
        raise log_removed(path) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < position:
            raise log_shrank(path, size, position)
        if fingerprint(f.read(FINGERPRINT_BYTES), "jellyp") != identity:
            raise log_replaced(path)
    return size


def frames_end(path: str, position: int, size: int) -> int:
    """Where the last whole frame after ``position`` ends (``size`` at most).

    Bytes that can never start a frame count as read up to ``size``, so that the task
    reading them fails with the decoder's own one-line error.
    """
    with open(path, "rb") as f:
        while position < size:
            buf = os.pread(f.fileno(), min(SCAN_BYTES, size - position), position)
            n, malformed = whole_frames(buf, MAX_FRAME_BYTES)
            if malformed:
                return size
            if n == 0:
                # One frame longer than a scan: step over it if it is all there.
                header = read_varint(buf, 0, len(buf))
                if header is None or header[1] + header[0] > size - position:
                    break
                n = header[1] + header[0]
            position += n
    return position


def first_position(path: str) -> Offset | None:
    """A new log's entry (identity, position 0), or ``None`` while its first frame is incomplete."""
    with open(path, "rb") as f:
        head = f.read(FINGERPRINT_BYTES)
    found = jelly_start(head)
    if found.framing == "single":
        raise UsageError(f"{path}, byte 0: a streaming source reads delimited logs; this is one bare frame")
    if found.first_frame_end is None:
        return None
    return {"path": path, "id": fingerprint(head, "jellyp"), "at": 0}


def advance(logs: Mapping[str, Offset], files: Sequence[str]) -> dict[str, Offset]:
    """The offsets after ``logs`` (index -> entry) given the files now listed, in log order."""
    out: dict[str, Offset] = {}
    known = {entry["path"]: int(i) for i, entry in logs.items()}
    for i, entry in logs.items():
        size = check_log(entry["path"], entry["id"], entry["at"])
        out[i] = {**entry, "at": frames_end(entry["path"], entry["at"], size)}
    listed = {path: n for n, path in enumerate(files)}
    last_known = max((listed[p] for p in known if p in listed), default=-1)
    for path in files:
        if path in known:
            continue
        if listed[path] < last_known:
            raise UsageError(
                f"{path}: a new log sorts before {files[last_known]}, already read; "
                "name segments so that they sort in log order"
            )
        new = first_position(path)
        if new is None:
            break  # the logs after it wait for it: they come later in log order
        size = check_log(path, new["id"], 0)
        out[str(len(out))] = {**new, "at": frames_end(path, 0, size)}
    return out


class StreamPartition(InputPartition):
    """The bytes ``[start, end)`` of one log, with its place in log order and its identity;
    ``snapshots``: a directory of decoder snapshots to start from and to add to (:mod:`._resume`)."""

    def __init__(
        self, index: int, path: str, identity: str, start: int, end: int, snapshots: str | None = None
    ) -> None:
        super().__init__(index)
        self.index = index
        self.path = path
        self.identity = identity
        self.start = start
        self.end = end
        self.snapshots = snapshots


def clamp(offset: Offset, limit: Offset) -> Offset:
    """``offset`` no further than ``limit``: logs ``limit`` lacks left out, positions capped."""
    capped = {}
    for i, entry in offset["logs"].items():
        if i in limit["logs"]:
            capped[i] = {**entry, "at": min(entry["at"], limit["logs"][i]["at"])}
    return {"logs": capped}


def plan(start: Offset, end: Offset, snapshots: str | None = None) -> list[StreamPartition]:
    """One partition per log that has whole frames between the two offsets, in log order."""
    before = start.get("logs", {})
    parts = []
    for i, entry in sorted(end.get("logs", {}).items(), key=lambda item: int(item[0])):
        at = before[i]["at"] if i in before else 0
        if entry["at"] > at:
            parts.append(StreamPartition(int(i), entry["path"], entry["id"], at, entry["at"], snapshots))
    return parts


def read_range(part: StreamPartition) -> Iterator[pa.RecordBatch]:
    """The change rows of the units the frames of one partition complete (runs in a worker)."""
    try:
        check_log(part.path, part.identity, part.end)
        folder = part.snapshots
        if folder is None:
            yield from decode_change_batches(part.path, part.index, start=part.start, end=part.end)
            return
        resume = _resume.restore(folder, part.path, part.identity, part.start) if part.start else None

        def at_end(decoder: Any, patch: int, row: int) -> None:
            with suppress(OSError):  # a snapshot only accelerates the next range
                _resume.keep(folder, part.path, part.identity, decoder, patch, row)

        yield from decode_change_batches(
            part.path, part.index, start=part.start, end=part.end, resume=resume, at_end=at_end
        )
    except PatchsyncError as exc:
        raise encode_error(exc) from None


class ChangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader of ``jelly-patch`` (see the module's docstring)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.paths = option_paths(options)
        self._files()  # a missing path fails when the query starts
        self._limit: Offset | None = None
        self.snapshots = options.get("decoderSnapshots")

    def prepareForTriggerAvailableNow(self) -> None:
        # ``trigger(availableNow=True)``: what is in the logs now, and nothing written later.
        self._limit = self.latestOffset(self.initialOffset(), None)

    def _files(self) -> list[str]:
        return expand_paths(self.paths, (".jellyp",))

    def initialOffset(self) -> Offset:
        return {"logs": {}}

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        try:
            latest = {"logs": advance(start.get("logs", {}), self._files())}
            return latest if self._limit is None else clamp(latest, self._limit)
        except PatchsyncError as exc:
            # This runs in a Python process of the driver; the query fails with its text.
            raise encode_error(exc) from None

    def partitions(self, start: Offset, end: Offset) -> Sequence[InputPartition]:
        return plan(start, end, self.snapshots)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(cast(StreamPartition, partition))

    def commit(self, end: Offset) -> None:
        """Nothing to release: the logs are only read."""


class RangeReader(DataSourceReader):
    """A batch read of given byte ranges of logs (the ``ranges`` option, see :func:`ranges_option`):
    the rows a streaming query would read for them, for an incremental replay."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.parts = [StreamPartition(*r) for r in json.loads(options["ranges"])]

    def partitions(self) -> Sequence[InputPartition]:
        return self.parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(cast(StreamPartition, partition))


def ranges_option(start: Offset, end: Offset, snapshots: str | None = None) -> str:
    """The ``ranges`` option of ``jelly-patch`` for the rows between two offsets (decoded
    from and adding to the decoder snapshots in the directory ``snapshots``, if given)."""
    return json.dumps([[p.index, p.path, p.identity, p.start, p.end, p.snapshots] for p in plan(start, end, snapshots)])


class JellyPatchDataSource(DataSource):
    """``spark.read.format("jelly-patch")`` and ``spark.readStream.format("jelly-patch")``:
    change rows of ``.jellyp`` logs, one partition per file.

    Columns: ``log`` (path), ``log_index`` (place in log order), ``patch`` (patch index in
    the file), ``row`` (row order in the file), ``op`` (``A``, ``D``, ``PA``, ``PD``,
    ``H``), ``s``/``p``/``o``/``g`` (N-Triples strings; ``g`` is ``""`` for the default graph
    of a QUADS log and null in a TRIPLES log), ``key`` (header key or prefix name; for
    ``PA``/``PD``/``H`` the IRI or header value is in ``o``) and ``committed``.

    As a stream it gives each unit once, when the log's whole frames complete it; the
    offsets Spark checkpoints are per log its identity and byte position (module docstring).

    ``load("nats://HOST:PORT/STREAM")`` (any address of a source kind that can be read from a
    position) reads the messages of that remote log instead, as a batch up to its head or as
    a stream: the same columns, the offset its last message read (:mod:`._remote_stream`).
    """

    @classmethod
    def name(cls) -> str:
        return "jelly-patch"

    def schema(self) -> StructType:
        return CHANGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        if "ranges" in self.options:
            return RangeReader(self.options)
        address = address_of(self.options)
        if address is not None:
            return RemoteReader(address, self.options)
        return ChangeReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        address = address_of(self.options)
        if address is not None:
            return RemoteStreamReader(address, self.options)
        return ChangeStreamReader(self.options)


def register(spark: Any) -> None:
    """Register the ``jelly-patch``, ``jelly``, ``patchsync-nquads`` and ``patchsync-rdf`` formats."""
    for source in (JellyPatchDataSource, JellyDataSource, NQuadsDataSource, RdfDataSource):
        spark.dataSource.register(source)
