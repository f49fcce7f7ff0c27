"""Spark replay onto a base of any RDF format (issue #17), on a real local Spark.

A base is a plain starting state in every format the format registry gives the ``convert``
role (docs/design.md §7 and §10, "a base without position ... is a starting state"). The
tests are differential: one dataset written as ``.nq`` and, by patchsync's own writers, as
TriG, RDF Thrift, RDF Protobuf and Jelly-RDF must replay to the same quads, equal to the
single-process applier's ``--base`` load (``load_base``) into SQLite, dumped. Blank node
labels are system identifiers (docs/design.md §1), so they must come through every format as
written.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.base import load_base
from patchsync.apply.registry import open_target
from patchsync.apply.snapshot_file import read_position, write_snapshot
from patchsync.apply.target import dumpable
from patchsync.errors import DecodeError, UsageError
from patchsync.logs.rdf_files import convert_rdf
from patchsync.options import StreamType

from .test_spark import EX, NT, Quad, generate_log, reference, spark_state, typed_log

#: Formats a base is written in, by suffix, as ``convert`` names them.
WRITTEN = {".nq": "nq", ".trig": "trig", ".rt": "rdf-thrift", ".rpb": "rdf-protobuf", ".jelly": "jelly"}
XSD = "http://www.w3.org/2001/XMLSchema#"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    rng = random.Random(17)
    root = tmp_path_factory.mktemp("baselogs")
    return [typed_log(root / f"{i}.jellyp", generate_log(rng, 12), StreamType.PUNCTUATED) for i in range(3)]


def base_quads(logs: list[Path]) -> list[Quad]:
    """The state after the first log (so the other logs delete and re-add some of it) and
    quads whose terms a careless reader would change: blank nodes in every position, escapes,
    a lexical form rdflib would normalize, language tags."""
    extra = [
        (NT.bnode("s1"), NT.iri(EX + "p"), NT.literal("01", None, XSD + "integer"), ""),
        (NT.bnode("s1"), NT.iri(EX + "p"), NT.bnode("o1"), NT.iri(EX + "g1")),
        (NT.iri(EX + "s"), NT.iri(EX + "p"), NT.literal('tab\t"q"\nü\\'), NT.bnode("g9")),
        (NT.iri(EX + "s"), NT.iri(EX + "p"), NT.literal("chat", "fr-BE"), NT.bnode("g9")),
        (NT.bnode("o1"), NT.iri(EX + "p"), NT.literal("2026-11-23", None, XSD + "date"), ""),
    ]
    return sorted(reference(logs[:1]) | set(extra))


def nquads(quads: list[Quad]) -> str:
    return "".join(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n" for s, p, o, g in quads)


def write_base(path: Path, quads: list[Quad]) -> Path:
    data = nquads(quads).encode()
    with open(path, "wb") as f:
        convert_rdf(data, "nq", f, {**WRITTEN, ".ttl": "ttl"}[path.suffix], source="base.nq")
    return path


def applier_state(base: Path, logs: list[Path], db: Path) -> set[Quad]:
    """What the single-process applier makes of ``base`` and ``logs`` (``apply --base``), dumped."""
    target = open_target(f"sqlite:///{db}")
    try:
        load_base(target, base, logs)
        for log in logs:
            apply_file(log, target, chain="ignore")
        return set(dumpable(target).quads())
    finally:
        target.close()


def test_every_base_format_replays_to_the_same_quads(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps

    quads = base_quads(logs)
    memory = MemoryTarget()
    memory.begin()
    memory.add(quads)
    for log in logs[1:]:
        apply_file(log, memory, chain="ignore")
    expected = set(memory.quads())
    bases = [write_base(tmp_path / f"base{suffix}", quads) for suffix in WRITTEN]
    # The bases as read (one job): the terms of the .nq lines, labels and lexical forms included.
    read: dict[int, list[Quad]] = {i: [] for i in range(len(bases))}
    for r in ps.snapshot(spark, bases).collect():
        read[r["log_index"]].append((r["s"], r["p"], r["o"], r["g"]))
    for base in bases:
        assert sorted(read[bases.index(base)]) == quads, base.name
        got = spark_state(ps.replay(spark, logs[1:], base=base))
        assert got == expected, base.name
        assert got == applier_state(base, logs[1:], tmp_path / f"{base.suffix[1:]}.db"), base.name


def test_a_mixed_list_of_base_files_and_directories(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps

    quads = base_quads(logs)
    parts = [quads[i::4] for i in range(4)]
    folder = tmp_path / "more"
    folder.mkdir()
    bases = [write_base(tmp_path / "a.trig", parts[0]), write_base(tmp_path / "b.rt", parts[1]), folder]
    write_base(folder / "c.rpb", parts[2])
    write_base(folder / "d.nq", [q for q in parts[3] if q[3]])
    # Turtle holds the default graph only; the directory mixes three formats.
    write_base(folder / "e.ttl", [q for q in parts[3] if not q[3]])
    (folder / "notes.txt").write_text("not RDF: left out of the directory's files")
    rows = ps.snapshot(spark, bases).collect()
    assert sorted((r["s"], r["p"], r["o"], r["g"]) for r in rows) == quads
    # log_index is the file's place among all the base files.
    assert {r["log_index"] for r in rows} == {0, 1, 2, 3, 4}
    memory = MemoryTarget()
    memory.begin()
    memory.add(quads)
    for log in logs[1:]:
        apply_file(log, memory, chain="ignore")
    expected = set(memory.quads())
    assert spark_state(ps.replay(spark, logs[1:], base=bases)) == expected


def test_a_patchsync_snapshot_is_a_plain_starting_state(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    # docs/design.md §10: the position rides in the first frame's metadata, which Jelly
    # readers treat as a comment; Spark takes the quads and replays the logs given.
    import patchsync.spark as ps

    source = MemoryTarget()
    apply_file(logs[0], source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap, name="a")
    assert read_position(snap) is not None
    assert spark_state(ps.replay(spark, logs[1:], base=snap)) == reference(logs)


def test_bad_bases_fail_with_one_line_naming_the_file(spark: Any, logs: list[Path], tmp_path: Path) -> None:
    import patchsync.spark as ps

    rt = write_base(tmp_path / "base.rt", base_quads(logs))
    cut = tmp_path / "cut.rt"
    cut.write_bytes(rt.read_bytes()[:-7])
    with pytest.raises(DecodeError) as info:
        spark_state(ps.replay(spark, logs[1:], base=[rt, cut]))
    assert info.value.source == str(cut) and str(info.value).startswith(f"{cut}, byte ")
    trig = tmp_path / "bad.trig"
    trig.write_text(f"<{EX}a> <{EX}b> <{EX}c> .\n<{EX}a> <{EX}b> {{ .\n")
    with pytest.raises(DecodeError) as info:
        spark_state(ps.replay(spark, logs[1:], base=trig))
    assert str(info.value).startswith(f"{trig}, line 2: not valid trig: ") and "\n" not in str(info.value)
    # A label the TriG reader cannot keep (it names unlabelled nodes anon<n>) is refused in one line too.
    clash = tmp_path / "clash.trig"
    clash.write_text(f"_:anon1 <{EX}p> [ <{EX}q> <{EX}o> ] .\n")
    with pytest.raises(DecodeError) as info:
        spark_state(ps.replay(spark, logs[1:], base=clash))
    assert str(info.value).startswith(f"{clash}: the label _:anon1 is written in the file and is also")
    # Checked on the driver, before any task runs.
    other = tmp_path / "base.json"
    other.write_text("{}")
    with pytest.raises(UsageError, match=r"base\.json: a base snapshot is an RDF file: .*\.rt, \.rpb"):
        ps.replay(spark, logs[1:], base=other)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="none here"):
        ps.replay(spark, logs[1:], base=empty)


@pytest.mark.slow
def test_cli_bad_base_is_one_line_without_traceback(logs: list[Path], tmp_path: Path) -> None:
    rpb = write_base(tmp_path / "base.rpb", base_quads(logs))
    cut = tmp_path / "cut.rpb"
    cut.write_bytes(rpb.read_bytes()[:-3])
    args = [str(logs[1]), "--base", str(rpb), "--base", str(cut), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "spark-replay", *args, "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    ours = [line for line in done.stderr.splitlines() if line.startswith("patchsync:")]
    assert len(ours) == 1 and ours[0].startswith(f"patchsync: {cut}, byte "), done.stderr
    assert "Traceback" not in done.stderr and "at org.apache" not in done.stderr
    # A base of no RDF format is refused before Spark starts.
    other = tmp_path / "base.json"
    other.write_text("{}")
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "spark-replay", str(logs[1]), "--base", str(other), "--out", "x"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and done.stderr.startswith(f"patchsync: {other}: a base snapshot is an RDF file: ")
    assert len(done.stderr.splitlines()) == 1, done.stderr
