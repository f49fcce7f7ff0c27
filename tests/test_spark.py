"""The Spark pipeline against the single-process applier, on a real local Spark.

One session-scoped ``local[2]`` SparkSession (the ``spark`` fixture, tests/conftest.py) serves
every test (starting a JVM costs seconds); logs are tiny and generated. The differential test
is docs/design.md §7: Spark's replay must equal what ``apply_file`` leaves in the reference
:class:`MemoryTarget`.
"""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.apply import MemoryTarget, apply_file
from patchsync.errors import DecodeError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import write_log

NT = NTriplesTerms()
EX = "http://example.org/"
Quad = tuple[str, str, str, str]


# -- generated logs -------------------------------------------------------------------


def _terms(rng: random.Random) -> tuple[list[str], list[str], list[str], list[str]]:
    subjects = [NT.iri(f"{EX}s{i}") for i in range(12)] + [NT.bnode(f"b{i}") for i in range(4)]
    predicates = [NT.iri(f"{EX}p{i}") for i in range(4)]
    objects = (
        [NT.iri(f"{EX}o{i}") for i in range(6)]
        + [NT.literal(f"v{i}") for i in range(4)]
        + [NT.literal("chat", "fr"), NT.literal("7", None, "http://www.w3.org/2001/XMLSchema#integer")]
        + [NT.literal('line\n"quoted" ünï'), NT.bnode("b1")]
    )
    graphs = ["", NT.iri(f"{EX}g1"), NT.iri(f"{EX}g2"), NT.bnode("g3")]
    return subjects, predicates, objects, graphs


def generate_log(rng: random.Random, patches: int, *, quads: bool = True) -> list[Event]:
    """A log mixing committed, aborted and implicit units, adds, deletes, prefixes and headers."""
    subjects, predicates, objects, graphs = _terms(rng)
    seen: list[Quad] = []
    events: list[Event] = []

    def statement() -> Event:
        if seen and rng.random() < 0.35:
            s, p, o, g = rng.choice(seen)
            return Delete(s, p, o, g if quads else None)
        q = (rng.choice(subjects), rng.choice(predicates), rng.choice(objects), rng.choice(graphs) if quads else "")
        seen.append(q)
        return Add(q[0], q[1], q[2], q[3] if quads else None)

    for _ in range(patches):
        events.append(Header("creator", NT.literal(f"gen{rng.randrange(3)}")))
        for _ in range(rng.randrange(1, 4)):
            kind = rng.random()
            if kind < 0.2:
                # An implicit unit: rows outside any transaction.
                events.extend(statement() for _ in range(rng.randrange(1, 4)))
                continue
            events.append(TxStart())
            if rng.random() < 0.2:
                events.append(
                    PrefixAdd(f"ex{rng.randrange(3)}", NT.iri(f"{EX}ns{rng.randrange(5)}/"), "" if quads else None)
                )
            if rng.random() < 0.05:
                events.append(PrefixDelete(f"ex{rng.randrange(3)}", None, "" if quads else None))
            events.extend(statement() for _ in range(rng.randrange(1, 6)))
            events.append(TxAbort() if kind > 0.8 else TxCommit())
        events.append(PatchEnd())
    return events


def typed_log(path: Path, events: list[Event], stream_type: StreamType, *, quads: bool = True) -> Path:
    """A log of ``stream_type`` in frames of 7 rows, so that Spark has frames to split."""
    options = PatchOptions(
        stream_type=stream_type, statement_type=StatementType.QUADS if quads else StatementType.TRIPLES
    )
    if stream_type is StreamType.FLAT:
        # A FLAT stream is one patch: drop the inner patch ends.
        events = [e for e in events if type(e) is not PatchEnd]
    return write_log(path, events, options=options, adapter=NT, max_frame_rows=7)


def reference(paths: list[Path]) -> set[Quad]:
    target = MemoryTarget()
    for path in paths:
        apply_file(path, target, chain="ignore")
    return set(target.quads())


def spark_state(df: Any) -> set[Quad]:
    import patchsync.spark as ps

    return set(ps.iter_quads(df))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rng = random.Random(7)
    root = tmp_path_factory.mktemp("logs")
    kinds = [StreamType.PUNCTUATED, StreamType.FRAME, StreamType.PUNCTUATED, StreamType.FLAT]
    paths = [typed_log(root / f"{i:02d}.jellyp", generate_log(rng, 25), kinds[i % 4]) for i in range(4)]
    # A TRIPLES log: its statements go to the default graph.
    paths.append(typed_log(root / "04.jellyp", generate_log(rng, 10, quads=False), StreamType.PUNCTUATED, quads=False))
    return paths


# -- tests ----------------------------------------------------------------------------


@pytest.mark.slow
def test_replay_equals_single_process_applier(spark: Any, logs: list[Path]) -> None:
    import patchsync.spark as ps

    expected = reference(logs)
    got = spark_state(ps.replay(spark, logs))
    assert got == expected
    assert any(q[3] == "" for q in got) and any(q[3] for q in got)
    assert any(q[0].startswith("_:") for q in got)


def test_replay_of_a_directory_reads_files_in_name_order(spark: Any, logs: list[Path]) -> None:
    import patchsync.spark as ps

    assert spark_state(ps.replay(spark, logs[0].parent)) == reference(sorted(logs))


def test_change_rows_flag_aborted_units(spark: Any, tmp_path: Path) -> None:
    import patchsync.spark as ps

    s, p = NT.iri(EX + "s"), NT.iri(EX + "p")
    events: list[Event] = [
        Add(s, p, NT.literal("implicit"), ""),
        TxStart(),
        Add(s, p, NT.literal("aborted"), ""),
        TxAbort(),
        TxStart(),
        Delete(s, p, NT.literal("implicit"), NT.iri(EX + "g")),
        TxCommit(),
        PatchEnd(),
    ]
    path = typed_log(tmp_path / "a.jellyp", events, StreamType.PUNCTUATED)
    rows = ps.change_rows(spark, path).orderBy("row").collect()
    assert [(r["op"], r["o"], r["committed"], r["patch"], r["row"]) for r in rows] == [
        ("A", '"implicit"', True, 0, 0),
        ("A", '"aborted"', False, 0, 1),
        ("D", '"implicit"', True, 0, 2),
    ]
    assert rows[0]["log"] == str(path) and rows[0]["g"] == "" and rows[2]["g"] == NT.iri(EX + "g")


def test_replay_with_base_snapshot(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps
    from patchsync.logs.rdf_files import convert_rdf

    base = {
        (NT.iri(EX + "s0"), NT.iri(EX + "p0"), NT.iri(EX + f"base{i}"), NT.iri(EX + "g1") if i % 2 else "")
        for i in range(20)
    } | set(list(reference(logs[:1]))[:5])
    nq = tmp_path / "base.nq"
    nq.write_text("".join(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n" for s, p, o, g in sorted(base)))
    target = MemoryTarget()
    target.begin()
    target.add(sorted(base))
    for path in logs[1:3]:
        apply_file(path, target, chain="ignore")
    expected = set(target.quads())
    assert spark_state(ps.replay(spark, logs[1:3], base=nq)) == expected
    jelly = tmp_path / "base.jelly"
    with jelly.open("wb") as f:
        convert_rdf(nq.read_bytes(), "nq", f, "jelly", source=str(nq))
    assert spark_state(ps.replay(spark, logs[1:3], base=jelly)) == expected


def test_compact_is_equivalent_to_the_logs(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps

    out = tmp_path / "net.jellyp"
    n = ps.write_compact(ps.compact(spark, logs), out)
    assert n > 0
    # Applied to a state where every touched quad already holds, the net patch still gives
    # the same result as the logs (deletes are kept, not dropped).
    start = reference(logs[:1])
    via_logs = MemoryTarget()
    via_logs.begin()
    via_logs.add(sorted(start))
    via_net = MemoryTarget()
    via_net.begin()
    via_net.add(sorted(start))
    for path in logs:
        apply_file(path, via_logs, chain="ignore")
    apply_file(out, via_net, chain="ignore")
    assert set(via_net.quads()) == set(via_logs.quads())
    assert via_net.namespaces() == via_logs.namespaces()


def test_bad_file_fails_with_the_codec_message(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps

    data = logs[0].read_bytes()
    bad = tmp_path / "bad.jellyp"
    bad.write_bytes(data[: len(data) - 5])  # cut inside the last frame
    with pytest.raises(DecodeError) as info:
        spark_state(ps.replay(spark, [logs[1], bad]))
    assert info.value.source == str(bad)
    assert str(info.value).startswith(f"{bad}, byte ")


def test_jelly_source_reads_quads(spark: Any, tmp_path: Path) -> None:
    from patchsync.logs.rdf_files import convert_rdf

    text = f'<{EX}a> <{EX}b> _:x <{EX}g> .\n<{EX}a> <{EX}b> "c"@en .\n'
    out = io.BytesIO()
    convert_rdf(text.encode(), "nq", out, "jelly", source="t.nq")
    path = tmp_path / "t.jelly"
    path.write_bytes(out.getvalue())
    rows = spark.read.format("jelly").load(str(path)).orderBy("row").collect()
    assert [(r["s"], r["p"], r["o"], r["g"]) for r in rows] == [
        (f"<{EX}a>", f"<{EX}b>", "_:x", f"<{EX}g>"),
        (f"<{EX}a>", f"<{EX}b>", '"c"@en', ""),
    ]


# -- the workers' reader, without Spark ----------------------------------------------------


def reference_rows(path: Path) -> list[tuple[Any, ...]]:
    """Change rows of a log as the data source defines them, from the pure decoder's events."""
    from patchsync.codec.patch_decoder import PurePatchDecoder

    decoder: PurePatchDecoder[str] = PurePatchDecoder(NT, source=str(path))
    decoder.feed(path.read_bytes())
    decoder.close()
    rows: list[tuple[Any, ...]] = []
    unit: list[tuple[Any, ...]] = []
    patch = 0

    def close(committed: bool) -> None:
        rows.extend((*r, committed) for r in unit)
        unit.clear()

    for e in decoder:
        kind = type(e)
        row = len(rows) + len(unit)
        if kind is Add or kind is Delete:
            unit.append((patch, row, "A" if kind is Add else "D", e[0], e[1], e[2], e[3], None))
        elif kind is PrefixAdd or kind is PrefixDelete:
            unit.append((patch, row, "PA" if kind is PrefixAdd else "PD", None, None, e[1], e[2], e[0]))
        elif kind is Header:
            unit.append((patch, row, "H", None, None, e[1], None, e[0]))
        elif kind in (TxStart, TxCommit, TxAbort, PatchEnd):
            close(kind is not TxAbort)
            patch += kind is PatchEnd
    close(False)
    return rows


def reader_rows(path: Path, index: int, batch_rows: int) -> list[tuple[Any, ...]]:
    from patchsync.spark import decode_change_batches

    rows: list[tuple[Any, ...]] = []
    for batch in decode_change_batches(str(path), index, batch_rows=batch_rows):
        table = batch.to_pydict()
        assert set(table["log"]) == {str(path)} and set(table["log_index"]) == {index}
        names = ("patch", "row", "op", "s", "p", "o", "g", "key", "committed")
        rows.extend(zip(*(table[n] for n in names), strict=True))
    return rows


@pytest.mark.parametrize("batch_rows", [1, 5, 65536])
@pytest.mark.parametrize("codec", ["native", "pure"])
def test_reader_gives_the_reference_rows_on_either_codec(
    logs: list[Path], codec: str, batch_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workers' reader on the compiled core and on the pure codec (what PATCHSYNC_PURE=1
    # gives them) against rows built from the pure decoder's events, in any batch size.
    from patchsync.codec.patch_decoder import PatchDecoder

    if codec == "pure":
        monkeypatch.setattr(PatchDecoder, "_native", None)
    elif PatchDecoder._native is None:
        pytest.skip("the compiled core is not built (or PATCHSYNC_PURE is set)")
    for index, path in enumerate(logs):
        assert reader_rows(path, index, batch_rows) == reference_rows(path)


@pytest.mark.parametrize("codec", ["native", "pure"])
def test_reader_hands_out_the_units_before_a_bad_frame(
    logs: list[Path], codec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchsync.codec.patch_decoder import PatchDecoder
    from patchsync.spark import decode_change_batches

    if codec == "pure":
        monkeypatch.setattr(PatchDecoder, "_native", None)
    elif PatchDecoder._native is None:
        pytest.skip("the compiled core is not built (or PATCHSYNC_PURE is set)")
    data = logs[0].read_bytes()
    bad = tmp_path / "bad.jellyp"
    bad.write_bytes(data[: len(data) - 5])
    got: list[Any] = []
    with pytest.raises(DecodeError, match="truncated frame"):
        for batch in decode_change_batches(str(bad), 0, batch_rows=1):
            got.extend(batch.column("row").to_pylist())
    whole = reference_rows(logs[0])
    assert got and got == [r[1] for r in whole[: len(got)]]
