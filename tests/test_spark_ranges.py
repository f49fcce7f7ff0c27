"""Byte ranges of a growing log, as the streaming source and incremental replay read them (no JVM).

Two readers answer the same question: which units do the whole frames before byte ``e``
complete? ``decode_change_batches(end=e)`` (Spark's worker) and :func:`read_units` over the
decoder's events for those bytes (the unit reader the applier uses, docs/design.md §2). And
ranges ``[0, a)``, ``[a, b)``, ``[b, end)`` together give the whole log's rows, each once.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import DecodeError
from patchsync.events import Add, Delete, PrefixAdd, PrefixDelete
from patchsync.options import StreamType
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import Unit, read_units

from .test_spark import generate_log, typed_log


def _rows(path: Path, start: int = 0, end: int | None = None) -> list[tuple[Any, ...]]:
    from patchsync.spark._sources import decode_change_batches

    out: list[tuple[Any, ...]] = []
    for batch in decode_change_batches(str(path), 0, batch_rows=5, start=start, end=end):
        out.extend(zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)), strict=True))
    return out


def _unit_rows(path: Path, end: int) -> list[tuple[Any, ...]]:
    """(op, s, p, o, g, key, committed) of the complete units in the bytes before ``end``."""
    decoder: PatchDecoder[str] = PatchDecoder(NTriplesTerms(), source=str(path))
    decoder.feed(path.read_bytes()[:end])
    out = []
    try:
        for item in read_units(iter(decoder)):
            if isinstance(item, Unit):
                for e in item.rows:
                    if type(e) in (Add, Delete):
                        out.append(("A" if type(e) is Add else "D", e[0], e[1], e[2], e[3], None, item.committed))
                    elif type(e) in (PrefixAdd, PrefixDelete):
                        out.append(
                            ("PA" if type(e) is PrefixAdd else "PD", None, None, e[1], e[2], e[0], item.committed)
                        )
    except DecodeError:
        pass  # the events ran out inside a unit: that one is not complete
    return out


@pytest.mark.parametrize("kind", [StreamType.PUNCTUATED, StreamType.FRAME])
def test_ranges_give_the_complete_units_once(tmp_path: Path, kind: StreamType) -> None:
    from patchsync.spark._stream import frames_end

    rng = random.Random(31 + kind.value)
    log = typed_log(tmp_path / "a.jellyp", generate_log(rng, 40), kind)
    size = log.stat().st_size
    ends = sorted({frames_end(str(log), 0, cut) for cut in rng.sample(range(1, size), 12)})
    assert len(ends) > 3
    for end in ends:
        got = [(r[4], r[5], r[6], r[7], r[8], r[9], r[10]) for r in _rows(log, end=end) if r[4] != "H"]
        assert got == _unit_rows(log, end)
    whole = _rows(log)
    bounds = [0, *ends, size]
    pieces = [row for a, b in itertools.pairwise(bounds) for row in _rows(log, a, b)]
    assert pieces == whole


@pytest.mark.parametrize("kind", [StreamType.PUNCTUATED, StreamType.FRAME])
def test_ranges_resumed_from_decoder_snapshots_equal_decoding_from_byte_0(tmp_path: Path, kind: StreamType) -> None:
    """Differential: each range read from the snapshot the ranges before it left gives the rows
    (``patch`` and ``row`` numbers included) that a decode from byte 0 gives for it."""
    from patchsync.spark._resume import restore
    from patchsync.spark._stream import StreamPartition, frames_end, read_range

    rng = random.Random(41 + kind.value)
    log = typed_log(tmp_path / "a.jellyp", generate_log(rng, 60), kind)
    size = log.stat().st_size
    ends = sorted({frames_end(str(log), 0, cut) for cut in rng.sample(range(1, size), 20)} | {size})
    snaps = tmp_path / "snaps"
    resumed = 0
    for a, b in itertools.pairwise([0, *ends]):
        point = restore(str(snaps), str(log), "id", a) if a else None
        resumed += point is not None and point.offset > 0
        part = StreamPartition(0, str(log), "id", a, b, str(snaps))
        got = [row for batch in read_range_unchecked(part, read_range) for row in batch]
        assert got == _rows(log, a, b), (a, b, point and point.offset)
    assert resumed >= 5  # most ranges started near their start, not at byte 0
    # A snapshot of another log (other identity) or of other bytes before it is not used.
    assert restore(str(snaps), str(log), "other", size) is None
    newest = restore(str(snaps), str(log), "id", size)
    assert newest is not None
    data = bytearray(log.read_bytes())
    data[newest.offset - 1] ^= 0xFF  # the log is not the one the snapshot was taken of
    log.write_bytes(bytes(data))
    point = restore(str(snaps), str(log), "id", size)
    assert point is None or point.offset < newest.offset


def read_range_unchecked(part: Any, read_range: Any) -> list[list[tuple[Any, ...]]]:
    """``read_range`` without its identity check (the test names its log ``id``)."""
    from unittest import mock

    with mock.patch("patchsync.spark._stream.check_log", lambda *_: 0):
        return [
            list(zip(*(batch.column(i).to_pylist() for i in range(batch.num_columns)), strict=True))
            for batch in read_range(part)
        ]


def test_the_streaming_source_plans_its_ranges_with_its_snapshot_directory(tmp_path: Path) -> None:
    from patchsync.spark._stream import ChangeStreamReader, StreamPartition

    log = typed_log(tmp_path / "a.jellyp", generate_log(random.Random(43), 10), StreamType.PUNCTUATED)
    for options, folder in (({"path": str(log), "decoderSnapshots": str(tmp_path / "s")}, str(tmp_path / "s")),
                            ({"path": str(log)}, None)):  # fmt: skip
        reader = ChangeStreamReader(options)
        start = reader.initialOffset()
        parts = reader.partitions(start, reader.latestOffset(start, None))
        assert [(p.end, p.snapshots) for p in parts if isinstance(p, StreamPartition)] == [(log.stat().st_size, folder)]
