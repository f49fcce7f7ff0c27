"""Reading a Spark replay's base in each RDF format: quads per second, N-Quads as the baseline.

    .venv/bin/python -m bench.spark_base_bench                       # 4 files x 100,000 quads
    .venv/bin/python -m bench.spark_base_bench --files 2 --quads 20000   # quick check

One :mod:`tests.workloads.rdf_data` dataset is split over ``--files`` files and written in every
format with the ``convert`` role (by ``convert_rdf``, as ``patchsync convert`` writes them).
Each case reads the files with ``patchsync.spark.snapshot`` and discards the quads
(``write.format("noop")``) on one session (JVM start excluded); the rate is quads per
second of wall time, the same numerator for every format. Jelly-RDF and N-Quads are the
streamed readers; TriG, Turtle, RDF Thrift and RDF Protobuf are read whole on the worker
by ``read_rdf_quads``. The single-process column is ``read_rdf_quads`` of the same files in
this process, one after the other, for comparison.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
from pathlib import Path

from patchsync import formats
from patchsync.logs.rdf_files import convert_rdf, read_rdf_quads
from tests.workloads.rdf_data import generate_quads


def write_files(out: Path, files: int, quads: int) -> dict[str, list[Path]]:
    """The dataset in every convert format: format name -> its files."""
    every = list(generate_quads(quads))
    made: dict[str, list[Path]] = {}
    for f in formats.with_role(formats.RDF_CONVERT):
        # N-Triples and Turtle hold one graph: they get the same statements in the default graph.
        rows = every if f.graphs else [(s, p, o, None) for s, p, o, _ in every]
        made[f.name] = []
        for i in range(files):
            part = rows[i::files]
            text = "".join(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n" for s, p, o, g in part)
            path = out / f"{i}{f.suffixes[0]}"
            buffer = io.BytesIO()
            convert_rdf(text.encode(), "nq", buffer, f.name, source="bench.nq")
            path.write_bytes(buffer.getvalue())
            made[f.name].append(path)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--quads", type=int, default=100_000, help="quads in all the files together")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    import patchsync.spark as ps

    with tempfile.TemporaryDirectory(prefix="spark-base-bench-") as tmp:
        made = write_files(Path(tmp), args.files, args.quads)
        started = time.perf_counter()
        spark = ps.session(args.master, app_name="spark-base-bench", quiet=True)
        print(f"JVM start {time.perf_counter() - started:.1f} s; {args.files} files, {args.quads:,} quads, "
              f"{args.master}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
        ps.snapshot(spark, made["nq"]).write.format("noop").mode("overwrite").save()  # warm-up
        print(f"{'format':<14}{'MB':>8}{'spark s':>10}{'quads/s':>12}{'vs nq':>8}{'1-process s':>13}")
        base_rate = 0.0
        try:
            for name in ["nq", *(n for n in made if n != "nq")]:  # the baseline first
                paths = made[name]
                size = sum(p.stat().st_size for p in paths) / 1e6
                t0 = time.perf_counter()
                ps.snapshot(spark, paths).write.format("noop").mode("overwrite").save()
                took = time.perf_counter() - t0
                t0 = time.perf_counter()
                for p in paths:
                    read_rdf_quads(p)
                single = time.perf_counter() - t0
                rate = args.quads / took
                base_rate = base_rate or rate
                ratio = f"{rate / base_rate:.2f}x"
                print(f"{name:<14}{size:>8.1f}{took:>10.2f}{rate:>12,.0f}{ratio:>8}{single:>13.2f}")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
