"""Incremental ``spark-replay`` (a state directory of versions) against a full replay.

Differential (docs/design.md §7): a state brought up to date run after run, while the logs
grow (cut at random bytes, inside frames and units), gain segments and delete quads added
in earlier runs, must equal a full replay of the same logs and what the single-process
applier makes of them. Blank nodes, named graphs and aborted units are in the generated logs.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.errors import CheckpointError, UsageError
from patchsync.events import Add, Delete, Event, PatchEnd, TxAbort, TxCommit, TxStart
from patchsync.options import StreamType

from .test_spark import generate_log, reference, spark_state, typed_log


def deletes_of(quads: set[tuple[str, str, str, str]], rng: random.Random) -> list[Event]:
    """A patch deleting some of ``quads`` (added by earlier logs, so in earlier runs)."""
    chosen = rng.sample(sorted(quads), max(1, len(quads) // 3))
    return [TxStart(), *(Delete(*q) for q in chosen), TxCommit(), PatchEnd()]


def state_of(spark: Any, version: Any) -> set[tuple[str, str, str, str]]:
    import patchsync.spark as ps

    return spark_state(ps.read_state(spark, version))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "nq"])
def test_incremental_runs_equal_a_full_replay(spark: Any, tmp_path: Path, fmt: str) -> None:
    import patchsync.spark as ps

    rng = random.Random(500 + len(fmt))
    src = tmp_path / "src"
    src.mkdir()
    a = typed_log(src / "a.jellyp", generate_log(rng, 30), StreamType.PUNCTUATED)
    b = typed_log(src / "b.jellyp", generate_log(rng, 20), StreamType.FRAME)
    c = typed_log(src / "c.jellyp", deletes_of(reference([a]), rng), StreamType.PUNCTUATED)
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    live = logs / "a.jellyp"
    data = a.read_bytes()
    cuts = sorted(rng.sample(range(1, len(data)), 2))

    live.write_bytes(data[: cuts[0]])
    first = ps.replay_into(spark, logs, state, fmt=fmt, keep=2)
    assert first.written and first.logs["0"]["at"] <= cuts[0]
    with open(live, "ab") as f:
        f.write(data[cuts[0] : cuts[1]])
    second = ps.replay_into(spark, logs, state, fmt=fmt, keep=2)
    assert second.number == first.number + 1
    with open(live, "ab") as f:
        f.write(data[cuts[1] :])
    for seg in (b, c):
        (logs / seg.name).write_bytes(seg.read_bytes())
    third = ps.replay_into(spark, logs, state, fmt=fmt, keep=2)

    expected = reference([a, b, c])
    assert state_of(spark, third) == expected == spark_state(ps.replay(spark, [a, b, c]))
    # Nothing new: the current version stands; --keep 2 left two versions and their layers.
    again = ps.replay_into(spark, logs, state, fmt=fmt, keep=2)
    assert not again.written and again.path == third.path == ps.current_version(state).path
    kept = {layer.name for v in (second, third) for layer in v.layers}
    assert sorted(p.name for p in state.iterdir() if p.name.startswith("v")) == sorted(kept)
    assert [layer.kind for layer in second.layers] == ["full", "delta"]


def readds_of(
    gone: set[tuple[str, str, str, str]], there: set[tuple[str, str, str, str]], rng: random.Random
) -> list[Event]:
    """A patch adding again some quads deleted earlier, then an aborted unit deleting present ones."""
    back = rng.sample(sorted(gone), max(1, len(gone) // 2))
    aborted = rng.sample(sorted(there), min(3, len(there)))
    return [
        TxStart(), *(Add(*q) for q in back), TxCommit(),
        TxStart(), *(Delete(*q) for q in aborted), TxAbort(),
        PatchEnd(),
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "nq"])
def test_runs_of_deltas_and_full_versions_equal_a_full_replay(
    spark: Any, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run after run, each a new segment: deltas on a full version, deletes of quads added by
    earlier deltas, adds again of quads deleted, aborted units; the deltas cross the bound, so
    full versions are written again between them. Every version equals the applier's state."""
    import patchsync.spark as ps
    from patchsync.spark import _incremental

    monkeypatch.setattr(_incremental, "DELTA_BOUND", 0.6)
    rng = random.Random(53 + len(fmt))
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    segments: list[Path] = []
    ever: set[tuple[str, str, str, str]] = set()
    versions = []
    for run in range(9):
        there = reference(segments) if segments else set()
        ever |= there
        if run % 3 == 1:
            events = deletes_of(there, rng)
        elif run % 3 == 2 and ever - there:
            events = readds_of(ever - there, there, rng)
        else:
            events = generate_log(rng, 5)
        segments.append(typed_log(logs / f"{run:02d}.jellyp", events, StreamType.PUNCTUATED))
        version = ps.replay_into(spark, logs, state, fmt=fmt, keep=2)
        assert state_of(spark, version) == reference(segments), f"run {run}: {version.layers}"
        versions.append(version)
    kinds = [v.layers[-1].kind for v in versions]
    assert "full" in kinds[1:] and max(len(v.layers) for v in versions) >= 3, kinds  # the bound was crossed
    assert state_of(spark, versions[-1]) == spark_state(ps.replay(spark, segments))


@pytest.mark.slow
def test_replaced_or_cut_log_is_refused_unless_full(spark: Any, tmp_path: Path) -> None:
    import patchsync.spark as ps

    rng = random.Random(51)
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    log = typed_log(logs / "a.jellyp", generate_log(rng, 12), StreamType.PUNCTUATED)
    done = ps.replay_into(spark, logs, state)
    size = log.stat().st_size
    assert done.logs["0"]["at"] == size
    with open(log, "r+b") as f:
        f.truncate(size - 3)
    with pytest.raises(CheckpointError, match=rf"^{log}, byte {size - 3}: the log shrank below .*--full replays"):
        ps.replay_into(spark, logs, state)
    typed_log(log, generate_log(rng, 40), StreamType.PUNCTUATED)  # longer: not seen as cut
    with pytest.raises(CheckpointError, match=rf"^{log}, byte 0: the log's first frame changed: it was replaced"):
        ps.replay_into(spark, logs, state)
    with pytest.raises(UsageError, match=r"holds parquet; --format nq needs --full"):
        ps.replay_into(spark, logs, state, fmt="nq")
    # What a run killed while writing leaves: a version without its positions file.
    (state / "v000002").mkdir()
    (state / "v000002" / "part-00000.parquet").write_bytes(b"cut short")
    full = ps.replay_into(spark, logs, state, full=True)
    assert state_of(spark, full) == reference([log])
    assert full.path.name == "v000003" and not (state / "v000002").exists()
    other = typed_log(tmp_path / "b.jellyp", generate_log(rng, 3), StreamType.PUNCTUATED)
    with pytest.raises(UsageError, match=r"a.jellyp: replayed into .* but not among the logs given"):
        ps.replay_into(spark, [other], state)


@pytest.mark.slow
@pytest.mark.parametrize("few", [True, False])
def test_fold_onto_a_state_equals_the_group_by(spark: Any, tmp_path: Path, few: bool) -> None:
    import patchsync.spark as ps
    from patchsync.spark._replay import fold, fold_onto

    rng = random.Random(52)
    a = typed_log(tmp_path / "a.jellyp", generate_log(rng, 15), StreamType.PUNCTUATED)
    b = typed_log(tmp_path / "b.jellyp", deletes_of(reference([a]), rng) + generate_log(rng, 10), StreamType.PUNCTUATED)
    state = ps.replay(spark, [a])
    rows = ps.change_rows(spark, [b])
    expected = reference([a, b])
    assert spark_state(fold_onto(state, rows, few=few)) == expected == spark_state(fold(rows, state))


@pytest.mark.slow
def test_a_log_growing_in_place_is_read_from_decoder_snapshots(spark: Any, tmp_path: Path) -> None:
    """Runs over one log grown in place: each run's range starts from the snapshot the run
    before left (``STATE/.decoders``, one per log after pruning) and the state stays equal to
    the applier's on the bytes so far."""
    import patchsync.spark as ps
    from patchsync.spark._stream import frames_end

    rng = random.Random(54)
    whole = typed_log(tmp_path / "whole.jellyp", generate_log(rng, 60), StreamType.PUNCTUATED)
    data = whole.read_bytes()
    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    live = logs / "a.jellyp"
    ends = sorted({frames_end(str(whole), 0, cut) for cut in rng.sample(range(1, len(data)), 5)} | {len(data)})
    snapshots_seen = 0
    for end in ends:
        live.write_bytes(data[:end])
        version = ps.replay_into(spark, logs, state)
        prefix = tmp_path / "prefix.jellyp"
        prefix.write_bytes(data[:end])
        assert state_of(spark, version) == reference_upto(prefix), end
        snaps = list((state / ".decoders").glob("*.snap"))
        assert len(snaps) <= 1
        snapshots_seen += bool(snaps)
    assert snapshots_seen >= 2


def reference_upto(path: Path) -> set[tuple[str, str, str, str]]:
    """The state after the complete committed units of a log that may end inside a unit (the
    applier's unit reader over the pure decoder's events, not the Spark worker's decode)."""
    from patchsync.codec.patch_decoder import PurePatchDecoder
    from patchsync.errors import DecodeError
    from patchsync.terms.ntriples import NTriplesTerms
    from patchsync.units import Unit, read_units

    decoder: PurePatchDecoder[str] = PurePatchDecoder(NTriplesTerms(), source=str(path))
    decoder.feed(path.read_bytes())
    quads: set[tuple[str, str, str, str]] = set()
    try:
        for item in read_units(iter(decoder)):
            if isinstance(item, Unit) and item.committed:
                for e in item.rows:
                    if type(e) is Add:
                        quads.add((e[0], e[1], e[2], e[3] or ""))
                    elif type(e) is Delete:
                        quads.discard((e[0], e[1], e[2], e[3] or ""))
    except DecodeError:
        pass  # the bytes ran out inside a unit: that one is not complete
    return quads
