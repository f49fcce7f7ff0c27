"""PySpark data sources: ``jelly-patch`` (change rows), ``jelly`` / ``patchsync-nquads`` and
``patchsync-rdf`` (quads).

Theory of operation. A patch log cannot be split: its lookup tables, repeated terms and open
transaction run through the whole file (docs/design.md §7). So each file is one input partition, and
a worker decodes it from its first byte with the sans-I/O :class:`PatchDecoder` and the
:class:`NTriplesTerms` adapter, whose terms are already the N-Triples strings stored in the
columns. Rows are gathered into plain column lists and handed to Spark as Arrow record
batches of :data:`BATCH_ROWS` rows, which crosses the Python/JVM boundary once per batch
instead of once per row.

Change rows of one unit (docs/design.md §2) are held back until the unit ends, because whether they
are committed is only known then: ``TC`` and the end of an implicit unit commit, ``TA``
does not. Units are read with the one unit reader (:mod:`patchsync.units`), as the applier
reads them. A file that breaks a codec rule fails its task with :class:`DecodeError`; the
driver turns that back into the codec's one-line message (see :mod:`._errors`).

RDF files (base snapshots) are not split either. ``patchsync-rdf`` reads every format the
format registry gives the ``convert`` role: Jelly-RDF and N-Quads/N-Triples with the readers
of ``jelly`` and ``patchsync-nquads``, the others (TriG, Turtle, Jena's RDF Thrift and RDF
Protobuf, which have no streaming reader here) whole on the worker through
:func:`~patchsync.logs.rdf_files.read_rdf_quads`, the one reader of RDF files, so every
format gives the same N-Triples strings and blank node labels for the same data.

Paths are read with ``open``: local or mounted file systems (on a cluster, a path every
executor sees). A directory stands for its files with the format's suffix, in file-name
order (docs/design.md §6).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from patchsync import formats
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.errors import DecodeError, PatchsyncError, UsageError
from patchsync.events import ROW_CODES, Add, Delete, Header, PrefixAdd, PrefixDelete, Statement
from patchsync.sources import directory_logs, is_address
from patchsync.spark._errors import encode_decode_error
from patchsync.spark._resume import Resumed
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import ENDS_PATCH, QUIET, Kind, Mark, UnitReader

#: Rows per Arrow record batch handed to Spark.
BATCH_ROWS = 65536
#: Bytes read from a file per ``feed``.
CHUNK_BYTES = 1 << 20

_HEADER_QUIET = QUIET[Kind.HEADER]
_OUTSIDE, _ABORT = Mark.OUTSIDE, Mark.ABORT

#: Suffixes of the RDF files ``patchsync-rdf`` reads: the formats with the ``convert`` role.
RDF_SUFFIXES = tuple(formats.suffixes(formats.RDF_CONVERT))

#: Columns of a change row (docs/design.md §7). ``log_index`` is the file's place in log order.
CHANGE_SCHEMA = StructType(
    [
        StructField("log", StringType(), False),
        StructField("log_index", IntegerType(), False),
        StructField("patch", IntegerType(), False),
        StructField("row", LongType(), False),
        StructField("op", StringType(), False),
        StructField("s", StringType(), True),
        StructField("p", StringType(), True),
        StructField("o", StringType(), True),
        StructField("g", StringType(), True),
        StructField("key", StringType(), True),
        StructField("committed", BooleanType(), False),
    ]
)

#: Columns of a quad read from a snapshot; ``g`` is ``""`` for the default graph.
QUAD_SCHEMA = StructType(
    [
        StructField("s", StringType(), False),
        StructField("p", StringType(), False),
        StructField("o", StringType(), False),
        StructField("g", StringType(), False),
        StructField("log_index", IntegerType(), False),
        StructField("row", LongType(), False),
    ]
)

_ARROW_CHANGE = pa.schema(
    [
        pa.field("log", pa.string(), False),
        pa.field("log_index", pa.int32(), False),
        pa.field("patch", pa.int32(), False),
        pa.field("row", pa.int64(), False),
        pa.field("op", pa.string(), False),
        pa.field("s", pa.string()),
        pa.field("p", pa.string()),
        pa.field("o", pa.string()),
        pa.field("g", pa.string()),
        pa.field("key", pa.string()),
        pa.field("committed", pa.bool_(), False),
    ]
)
_ARROW_QUAD = pa.schema(
    [
        pa.field("s", pa.string(), False),
        pa.field("p", pa.string(), False),
        pa.field("o", pa.string(), False),
        pa.field("g", pa.string(), False),
        pa.field("log_index", pa.int32(), False),
        pa.field("row", pa.int64(), False),
    ]
)


def expand_paths(paths: Sequence[str], suffixes: tuple[str, ...]) -> list[str]:
    """Files in log order: each file as given, each directory's matching files by name."""
    out: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            out.extend(map(str, directory_logs(p, suffixes)))
        elif p.is_file():
            out.append(str(p))
        elif is_address(path):
            raise UsageError(f"{path}: an address is read alone, as load({path!r}), not among paths")
        else:
            raise UsageError(f"{path}: no such file or directory")
    return out


def option_paths(options: Mapping[str, str]) -> list[str]:
    # ``load(path)`` arrives as the "path" option; several paths are passed as a JSON list in
    # "paths", because Python data sources get a single path from DataFrameReader.load.
    if "paths" in options:
        value = json.loads(options["paths"])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError('the "paths" option must be a JSON list of strings')
        return value
    if "path" in options:
        return [options["path"]]
    raise UsageError("no input: load(path) or option('paths', json.dumps([...]))")


class FilePartition(InputPartition):
    """One file, with its place in log order."""

    def __init__(self, index: int, path: str) -> None:
        super().__init__(index)
        self.index = index
        self.path = path


class FileReader(DataSourceReader):
    """A batch reader of files: one partition per file, in log order."""

    suffixes: tuple[str, ...] = ()

    def __init__(self, options: Mapping[str, str]) -> None:
        self.files = expand_paths(option_paths(options), self.suffixes)

    def partitions(self) -> Sequence[InputPartition]:
        return [FilePartition(i, path) for i, path in enumerate(self.files)]


def chunks(path: str, end: int | None = None, cut: int = 0, begin: int = 0) -> Iterator[bytes]:
    """The file's bytes from ``begin`` (up to ``end`` if given) in pieces of at most
    :data:`CHUNK_BYTES`, one of them ending at byte ``cut``."""
    pos = begin
    with open(path, "rb") as f:
        f.seek(begin)
        while True:
            size = CHUNK_BYTES
            if end is not None:
                size = min(size, end - pos)
            if pos < cut:
                size = min(size, cut - pos)
            chunk = f.read(size) if size > 0 else b""
            if not chunk:
                return
            pos += len(chunk)
            yield chunk


# -- change rows ----------------------------------------------------------------------


class _ChangeColumns:
    """Column lists of the rows decoded so far, with the current unit's rows held back."""

    def __init__(self, log: str, index: int) -> None:
        self.log = log
        self.index = index
        self.patch: list[int] = []
        self.row: list[int] = []
        self.op: list[str] = []
        self.s: list[str | None] = []
        self.p: list[str | None] = []
        self.o: list[str | None] = []
        self.g: list[str | None] = []
        self.key: list[str | None] = []
        self.committed: list[bool] = []
        self.unit_start = 0  # index of the first row of the open unit

    def __len__(self) -> int:
        return len(self.op)

    def end_unit(self, committed: bool) -> None:
        n = len(self.op) - self.unit_start
        self.committed.extend([committed] * n)
        self.unit_start = len(self.op)

    def take(self) -> pa.RecordBatch:
        """The rows of the closed units as a record batch; the open unit's rows stay."""
        cut = n = self.unit_start
        whole = cut == len(self.op)
        columns = []
        for column, kind in (
            (self.patch, pa.int32()),
            (self.row, pa.int64()),
            (self.op, pa.string()),
            (self.s, pa.string()),
            (self.p, pa.string()),
            (self.o, pa.string()),
            (self.g, pa.string()),
            (self.key, pa.string()),
        ):
            # No slice copy when every row is taken (a batch usually ends at a unit's end).
            columns.append(pa.array(column if whole else column[:cut], kind))
            del column[:cut]
        batch = pa.RecordBatch.from_arrays(
            [
                # The file's two constant columns, without a list of n items to convert.
                pa.repeat(pa.scalar(self.log, pa.string()), n),
                pa.repeat(pa.scalar(self.index, pa.int32()), n),
                *columns,
                pa.array(self.committed, pa.bool_()),
            ],
            schema=_ARROW_CHANGE,
        )
        self.committed = []
        self.unit_start = 0
        return batch


class ChangeRows:
    """Change rows of decoded events, unit by unit: the one place events become change rows.

    :meth:`batches` takes events of any source (a log's decoder, or the messages of a stream
    decoded one by one) and gives the rows of the units they complete as record batches of
    about ``batch_rows`` rows; the rows of a unit still open stay in :attr:`cols`. ``patch``
    and ``row`` are the numbers the next patch and row get: a caller that places rows
    itself (a stream's sequence) sets them between calls.
    """

    def __init__(self, log: str, index: int, batch_rows: int = BATCH_ROWS) -> None:
        self.cols = _ChangeColumns(log, index)
        # Units as the applier sees them: the one unit reader (patchsync.units).
        self.reader = UnitReader()
        self.batch_rows = batch_rows
        self.patch = 0
        self.row = 0
        # Rows and headers are read only where they can change the reader's state
        # (units.QUIET): the first row after a boundary (it may open an implicit unit; the
        # rows after it are inside a unit), a header outside a patch. The chain ids the
        # reader keeps are not used here.
        self.fresh = True

    def batches(self, events: Iterable[Any]) -> Iterator[pa.RecordBatch]:
        """The record batches of the units ``events`` complete (see the class docstring)."""
        cols, reader, batch_rows = self.cols, self.reader, self.batch_rows
        # Bound methods and locals: this loop runs once per row of every log.
        patch_l, row_l, op_l, s_l, p_l, o_l, g_l, key_l = (
            cols.patch,
            cols.row,
            cols.op,
            cols.s,
            cols.p,
            cols.o,
            cols.g,
            cols.key,
        )
        read = reader.read
        patch, seq, fresh = self.patch, self.row, self.fresh
        event: Any
        try:
            for event in events:
                kind = type(event)
                if kind is Add or kind is Delete:
                    if fresh:
                        read(event)
                        fresh = False
                    s, p, o, g = event[0], event[1], event[2], event[3]
                    key = None
                elif kind is PrefixAdd or kind is PrefixDelete:
                    if fresh:
                        read(event)
                        fresh = False
                    key, s, p, o, g = event[0], None, None, event[1], event[2]
                elif kind is Header:
                    if reader.state not in _HEADER_QUIET:
                        read(event)
                    key, s, p, o, g = event[0], None, None, event[1], None
                else:
                    mark = read(event)
                    fresh = True
                    if mark is not _OUTSIDE:
                        # TX, a unit's end or a patch end: the rows held so far (an implicit
                        # unit's, a transaction's, headers) count unless a TA ended them.
                        cols.end_unit(mark is not _ABORT)
                        if mark in ENDS_PATCH:
                            patch += 1
                            if cols.unit_start >= batch_rows:
                                yield cols.take()
                    continue
                patch_l.append(patch)
                row_l.append(seq)
                op_l.append(ROW_CODES[kind])
                s_l.append(s)
                p_l.append(p)
                o_l.append(o)
                g_l.append(g)
                key_l.append(key)
                seq += 1
                if cols.unit_start >= batch_rows:
                    yield cols.take()
        finally:
            self.patch, self.row, self.fresh = patch, seq, fresh


def decode_change_batches(
    path: str,
    index: int,
    *,
    batch_rows: int = BATCH_ROWS,
    start: int = 0,
    end: int | None = None,
    resume: Resumed | None = None,
    at_end: Callable[[PatchDecoder[str], int, int], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Decode one ``.jellyp`` log into record batches of change rows (runs in a worker).

    Raises :class:`DecodeError` for a file that breaks a codec rule, including one that
    ends inside a unit; the batches of the units before it have been handed out by then.

    With ``end`` (a byte offset where a whole frame ends, for a log still being written),
    only the bytes before it are read and only the units they complete are given: a unit
    still open there is left for a later read. With ``start`` (another such offset), the
    units completed before it are left out, so that the reads of ``[0, a)``, ``[a, b)``, ...
    give every unit once. The log is decoded from its first byte (its lookup tables run
    through the whole file), or with ``resume`` (a decoder restored at or before ``start``,
    :mod:`._resume`) from there, with the same rows. ``at_end`` is called with the decoder and
    the file's patch and row counts when the read ends at ``end`` between patches.
    """
    rows = ChangeRows(path, index, batch_rows)
    cols = rows.cols
    decoder: PatchDecoder[str] = resume.decoder if resume else PatchDecoder(NTriplesTerms(), source=path)
    # A resumed decoder stands between patches, where a fresh unit reader's state is the one
    # it would have; its rows are numbered on from where the snapshot was taken.
    begin = 0
    if resume:
        begin, rows.patch, rows.row = resume.offset, resume.patch, resume.row

    # Units complete in row order, so the units completed before ``start`` are the rows
    # taken out of the columns once its bytes are decoded: those are dropped, the rows of the
    # unit open there stay and are given with the rest of it.
    reached, fed = begin >= start, begin
    for chunk in chunks(path, end, cut=start, begin=begin):
        decoder.feed(chunk)
        fed += len(chunk)
        for batch in rows.batches(decoder):
            if reached:
                yield batch
        if not reached and fed >= start:
            if cols.unit_start:
                cols.take()
            reached = True
    if end is None:
        decoder.close()
        yield from rows.batches(decoder)
        # The decoder fails a stream that ends inside a unit, so nothing is left open here.
        cols.end_unit(False)
    if cols.unit_start:
        yield cols.take()
    if at_end is not None and end is not None and fed == end and decoder.resumable:
        at_end(decoder, rows.patch, rows.row)


class ChangeReader(FileReader):
    """The batch reader of ``jelly-patch``: each file whole, one partition per file."""

    suffixes = (".jellyp",)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = cast(FilePartition, partition)
        try:
            yield from decode_change_batches(part.path, part.index)
        except DecodeError as exc:
            raise encode_decode_error(exc) from None


# -- snapshots ------------------------------------------------------------------------


def _quad_batch(s: list[str], p: list[str], o: list[str], g: list[str], index: int, start: int) -> pa.RecordBatch:
    n = len(s)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(s, pa.string()),
            pa.array(p, pa.string()),
            pa.array(o, pa.string()),
            pa.array(g, pa.string()),
            pa.array([index] * n, pa.int32()),
            pa.array(range(start, start + n), pa.int64()),
        ],
        schema=_ARROW_QUAD,
    )


def decode_jelly_batches(path: str, index: int, *, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Decode one Jelly-RDF file into record batches of quads (runs in a worker)."""
    decoder: RdfDecoder[str] = RdfDecoder(NTriplesTerms(), source=path)
    s: list[str] = []
    p: list[str] = []
    o: list[str] = []
    g: list[str] = []
    done = 0

    def drain() -> Iterator[pa.RecordBatch]:
        nonlocal s, p, o, g, done
        for event in decoder:
            if type(event) is Statement:
                s.append(event.s)
                p.append(event.p)
                o.append(event.o)
                g.append(event.g or "")
                if len(s) >= batch_rows:
                    yield _quad_batch(s, p, o, g, index, done)
                    done += len(s)
                    s, p, o, g = [], [], [], []

    for chunk in chunks(path):
        decoder.feed(chunk)
        yield from drain()
    decoder.close()
    yield from drain()
    if s:
        yield _quad_batch(s, p, o, g, index, done)


def decode_nquads_batches(path: str, index: int, *, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Read one N-Quads / N-Triples file into record batches of quads (runs in a worker)."""
    from patchsync.codec.nquads import read_statements

    with open(path, encoding="utf-8") as f:
        statements = read_statements(f.read(), NTriplesTerms(), source=path)
    for start in range(0, len(statements), batch_rows):
        part = statements[start : start + batch_rows]
        yield _quad_batch(
            [t[0] for t in part], [t[1] for t in part], [t[2] for t in part], [t[3] or "" for t in part], index, start
        )


def decode_rdf_file_batches(path: str, index: int, *, batch_rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Read one RDF file of a format without a streaming reader here, whole, into record
    batches of quads (runs in a worker; the file's quads are held in memory)."""
    from patchsync.logs.rdf_files import read_rdf_quads

    quads = read_rdf_quads(path).quads
    for start in range(0, len(quads), batch_rows):
        part = quads[start : start + batch_rows]
        yield _quad_batch(
            [q[0] for q in part], [q[1] for q in part], [q[2] for q in part], [q[3] or "" for q in part], index, start
        )


Decoder = Callable[[str, int], Iterator[pa.RecordBatch]]

#: The reader of each RDF format that streams (or needs no parser beyond patchsync's own);
#: every other ``convert`` format is read by :func:`decode_rdf_file_batches`.
RDF_DECODERS: dict[str, Decoder] = {
    "jelly": decode_jelly_batches,
    "nq": decode_nquads_batches,
    "nt": decode_nquads_batches,
}


def decode_any_rdf_batches(path: str, index: int) -> Iterator[pa.RecordBatch]:
    """Quads of one RDF file of any ``convert`` format, by its suffix (runs in a worker)."""
    found = formats.require(path, None, formats.RDF_CONVERT, "RDF", nameable=False)
    return RDF_DECODERS.get(found.name, decode_rdf_file_batches)(path, index)


class _JellyReader(FileReader):
    suffixes = (".jelly",)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = cast(FilePartition, partition)
        try:
            yield from decode_jelly_batches(part.path, part.index)
        except DecodeError as exc:
            raise encode_decode_error(exc) from None


class _NQuadsReader(FileReader):
    suffixes = (".nq", ".nt")

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = cast(FilePartition, partition)
        try:
            yield from decode_nquads_batches(part.path, part.index)
        except DecodeError as exc:
            raise encode_decode_error(exc) from None


class _RdfReader(FileReader):
    suffixes = RDF_SUFFIXES

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part = cast(FilePartition, partition)
        try:
            yield from decode_any_rdf_batches(part.path, part.index)
        except DecodeError as exc:
            raise encode_decode_error(exc) from None
        except PatchsyncError as exc:
            # Another refusal of the file's content (a blank node label TriG cannot keep, an
            # unreadable file) travels the same way, so the user still gets one line.
            rule = str(exc).removeprefix(f"{part.path}: ")
            raise encode_decode_error(DecodeError(rule, source=part.path)) from None


class JellyDataSource(DataSource):
    """``spark.read.format("jelly")``: quads of Jelly-RDF files, one partition per file.

    Columns ``s``, ``p``, ``o``, ``g`` (N-Triples strings, ``g`` is ``""`` for the default
    graph), ``log_index`` and ``row`` (the file's place in the input and the quad's order).
    """

    @classmethod
    def name(cls) -> str:
        return "jelly"

    def schema(self) -> StructType:
        return QUAD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _JellyReader(self.options)


class NQuadsDataSource(DataSource):
    """``spark.read.format("patchsync-nquads")``: quads of N-Quads / N-Triples files (base snapshots)."""

    @classmethod
    def name(cls) -> str:
        return "patchsync-nquads"

    def schema(self) -> StructType:
        return QUAD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _NQuadsReader(self.options)


class RdfDataSource(DataSource):
    """``spark.read.format("patchsync-rdf")``: quads of RDF files of any ``convert`` format
    (by suffix, mixed freely; a directory stands for its files with those suffixes), one
    partition per file. Columns as in :class:`JellyDataSource`; ``log_index`` is the file's
    place among all the inputs."""

    @classmethod
    def name(cls) -> str:
        return "patchsync-rdf"

    def schema(self) -> StructType:
        return QUAD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _RdfReader(self.options)


def paths_option(paths: Sequence[str | os.PathLike[str]]) -> str:
    """The ``paths`` option value for several inputs, in log order."""
    return json.dumps([os.fspath(p) for p in paths])
