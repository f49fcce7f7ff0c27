"""Replay a folder of patch logs with Spark and check the result against the single-process applier.

Run from the repository root (needs ``pip install 'patchsync[spark]'`` and Java 17+)::

    python examples/spark_replay.py [DIR]

DIR defaults to a temporary folder. The script writes three small ``.jellyp`` logs there
(library loans: a committed transaction, an aborted one, deletes, a blank node, a named
graph), reads their change rows with ``spark.read.format("jelly-patch")``, replays them
with :func:`patchsync.spark.replay` into Parquet, writes the net patch with
:func:`patchsync.spark.compact`, and checks that Spark's state equals what
``patchsync apply`` leaves in the in-memory reference target.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from patchsync.apply import MemoryTarget, apply_file
from patchsync.events import Add, Delete, Event, Header, PatchEnd, TxAbort, TxCommit, TxStart
from patchsync.logs.patch_logs import write_events
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms

NT = NTriplesTerms()
EX = "http://example.org/library/"
LOANS = NT.iri(EX + "loans")


def iri(name: str) -> str:
    return NT.iri(EX + name)


def write_logs(folder: Path) -> list[Path]:
    """Three days of changes to a small library dataset, one log per day."""
    days: list[list[Event]] = [
        [
            Header("creator", NT.literal("desk")),
            TxStart(),
            Add(iri("book1"), iri("title"), NT.literal("Dune", "en"), ""),
            Add(iri("book2"), iri("title"), NT.literal("Solaris", "pl"), ""),
            Add(iri("book1"), iri("borrowedBy"), NT.bnode("reader7"), LOANS),
            TxCommit(),
            PatchEnd(),
        ],
        [
            TxStart(),
            Delete(iri("book1"), iri("borrowedBy"), NT.bnode("reader7"), LOANS),
            Add(iri("book2"), iri("borrowedBy"), NT.bnode("reader7"), LOANS),
            TxCommit(),
            # A loan keyed in by mistake and cancelled: aborted units change nothing.
            TxStart(),
            Add(iri("book1"), iri("borrowedBy"), NT.bnode("reader9"), LOANS),
            TxAbort(),
            PatchEnd(),
        ],
        [
            TxStart(),
            Delete(iri("book2"), iri("borrowedBy"), NT.bnode("reader7"), LOANS),
            Add(iri("book3"), iri("title"), NT.literal("Ficciones", "es"), ""),
            TxCommit(),
            PatchEnd(),
        ],
    ]
    paths = []
    for day, events in enumerate(days, start=1):
        path = folder / f"day-{day:02d}.jellyp"
        with open(path, "wb") as f:
            write_events(events, f, "jellyp", options=PatchOptions(), adapter=NT)
        paths.append(path)
    return paths


def main() -> int:
    import patchsync.spark as ps

    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="spark-replay-"))
    folder.mkdir(parents=True, exist_ok=True)
    logs_dir = folder / "logs"
    logs_dir.mkdir(exist_ok=True)
    logs = write_logs(logs_dir)

    spark = ps.session("local[2]", app_name="patchsync example", quiet=True)
    try:
        print("change rows:")
        ps.change_rows(spark, logs_dir).select("log_index", "row", "op", "s", "o", "g", "committed").orderBy(
            "log_index", "row"
        ).show(truncate=40)

        ps.write_replay(spark, logs_dir, folder / "state.parquet")
        state = spark.read.parquet(str(folder / "state.parquet"))
        print(f"replayed state ({state.count()} quads) in {folder / 'state.parquet'}:")
        state.orderBy("g", "s", "p", "o").show(truncate=60)
        got = {(r["s"], r["p"], r["o"], r["g"]) for r in state.collect()}

        n = ps.write_compact(ps.compact(spark, logs_dir), folder / "net.jellyp")
        print(f"net patch: {n} rows in {folder / 'net.jellyp'}")
    finally:
        spark.stop()

    reference = MemoryTarget()
    for log in logs:
        apply_file(log, reference, chain="ignore")
    assert got == set(reference.quads()), "Spark and the single-process applier disagree"
    print("Spark's replay equals the single-process applier's state.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
