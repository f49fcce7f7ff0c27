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
