"""The memory bound of decoding (issue #13): a decoder holds a few frames' worth, whatever the log's length.

A log of many frames (every subject new, distinct literals, long texts, blank nodes: what
fills lookups and caches) is decoded to the end with every event dropped, under
``tracemalloc``; the peak of traced memory must stay below a bound made of a multiple of
the log's largest frame plus a fixed part (the caches' own limits), far below what the
log's decoded content takes. The last test shows the measure catches a consumer, or a
decoder, that keeps what it decoded. ``bench/memory_bench.py`` measures the same at 1 GB,
as peak RSS of a process.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.options import PatchOptions
from patchsync.terms import default_adapter
from patchsync.terms.ntriples import NTriplesTerms

from .workloads.memory_log import frame_sizes, write_churn_log

# Tens of seconds a test (a 16 MiB log decoded under tracemalloc): not in `make check`.
pytestmark = pytest.mark.slow

LOG_BYTES = 16 << 20
FRAME_BYTES = 256 << 10  # the encoder's frame limit for this log: its largest frames
#: What a decoder may hold besides its frames: lookups, term caches, the queue of a batch.
FIXED = 12 << 20
FRAMES = 20

ADAPTERS: dict[str, Callable[[], Any]] = {"nt": NTriplesTerms, "rdflib": default_adapter}


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("memory") / "log.jellyp"
    with open(path, "wb") as f:
        write_churn_log(f, LOG_BYTES, 5, max_frame_bytes=FRAME_BYTES)
    return path, max(frame_sizes(path))


def _decode(path: Path, decoder: PatchDecoder[Any], keep: list[Any] | None = None) -> int:
    """Decode the file in 1 MiB pieces; the peak of traced memory meanwhile."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                decoder.feed(chunk)
                del chunk
                for event in decoder:
                    if keep is not None:
                        keep.append(event)
        decoder.close()
        for event in decoder:
            if keep is not None:
                keep.append(event)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _warm(adapter: Any, log: tuple[Path, int]) -> None:
    # Lazy imports (rdflib's) and module caches are filled before memory is traced.
    with open(log[0], "rb") as f:
        PurePatchDecoder(adapter).feed(f.read(1 << 16))
    decoder: PatchDecoder[Any] = PatchDecoder(adapter)
    with open(log[0], "rb") as f:
        decoder.feed(f.read(1 << 20))
    for _ in decoder:
        pass


@pytest.mark.parametrize("terms", sorted(ADAPTERS))
@pytest.mark.parametrize("cls", [PatchDecoder, PurePatchDecoder], ids=["default", "pure"])
def test_decoding_holds_a_bounded_multiple_of_the_largest_frame(
    log: tuple[Path, int], cls: type[PatchDecoder[Any]], terms: str
) -> None:
    path, largest = log
    assert largest > FRAME_BYTES // 2  # the log has large frames, and many of them
    assert path.stat().st_size > 40 * largest
    adapter = ADAPTERS[terms]()
    _warm(adapter, log)
    peak = _decode(path, cls(adapter, source=str(path)))
    bound = FRAMES * largest + FIXED
    assert peak < bound, f"peak {peak / 2**20:.1f} MiB above {bound / 2**20:.1f} MiB (largest frame {largest} bytes)"


def test_the_bound_catches_a_decoder_that_keeps_what_it_decoded(log: tuple[Path, int]) -> None:
    path, largest = log
    adapter = NTriplesTerms()
    _warm(adapter, log)
    kept: list[Any] = []
    peak = _decode(path, PatchDecoder(adapter, source=str(path)), kept)
    assert kept
    assert peak > FRAMES * largest + FIXED


@pytest.fixture(scope="module")
def tag_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A log whose literals carry 120,000 distinct language tags (and as many datatypes)."""
    path = tmp_path_factory.mktemp("memory") / "tags.jellyp"
    nt = NTriplesTerms()
    encoder: PatchEncoder[str] = PatchEncoder(PatchOptions(), nt)
    with open(path, "wb") as f:
        for i in range(120_000):
            o = nt.literal("v", f"x-{i:x}") if i % 2 else nt.literal("v", None, f"http://example.org/dt{i}")
            encoder.add("<http://example.org/s>", "<http://example.org/p>", o, "")
            if i % 1000 == 999:
                encoder.end_patch()
                f.write(encoder.take())
        encoder.end_patch()
        encoder.finish()
        f.write(encoder.take())
    return path, max(frame_sizes(path))


@pytest.mark.parametrize("cls", [PatchDecoder, PurePatchDecoder], ids=["default", "pure"])
def test_distinct_language_tags_and_datatypes_do_not_pile_up(
    tag_log: tuple[Path, int], cls: type[PatchDecoder[Any]]
) -> None:
    # Each tag or datatype gets a cache of its own: their number must be bounded too.
    path, largest = tag_log
    adapter = NTriplesTerms()
    _warm(adapter, tag_log)
    peak = _decode(path, cls(adapter, source=str(path)))
    bound = FRAMES * largest + FIXED
    assert peak < bound, f"peak {peak / 2**20:.1f} MiB above {bound / 2**20:.1f} MiB (largest frame {largest} bytes)"


def test_inspect_streams_the_log(log: tuple[Path, int]) -> None:
    # patchsync inspect read the whole log, then copied it twice (2 GB of RSS for a 1 GB log).
    from patchsync.logs.convert import summarize_log

    path, largest = log
    _warm(NTriplesTerms(), log)
    whole = summarize_log(path.read_bytes(), "jellyp", str(path))
    tracemalloc.start()
    try:
        with open(path, "rb") as f:
            streamed = summarize_log(f, "jellyp", str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert streamed == whole
    assert whole["bytes"] == path.stat().st_size and whole["frames"] == len(frame_sizes(path))
    assert peak < FRAMES * largest + FIXED


def test_inspect_of_a_cut_log_reports_the_decoder_error(log: tuple[Path, int], tmp_path: Path) -> None:
    from patchsync.errors import DecodeError
    from patchsync.logs.convert import summarize_log

    cut = tmp_path / "cut.jellyp"
    cut.write_bytes(log[0].read_bytes()[: 3 << 20])
    with open(cut, "rb") as f, pytest.raises(DecodeError, match="truncated frame") as info:
        summarize_log(f, "jellyp", str(cut))
    assert info.value.source == str(cut)
