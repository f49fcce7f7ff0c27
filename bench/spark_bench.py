"""Spark replay benchmark: the compiled codec core against the pure-Python codec on ``local[1]``,
``local[1]`` vs ``local[2]``, and the single-process apply into SQLite.

    .venv/bin/python -m bench.spark_bench                               # 8 files x 1,250,000 rows
    .venv/bin/python -m bench.spark_bench --files 4 --rows-per-file 500000  # 2M rows, ~5 min
    .venv/bin/python -m bench.spark_bench --files 8 --rows-per-file 20000   # quick check

The logs are :mod:`bench.workload` logs, one seed per file (so each file is a complete,
independent stream; chains are not checked, by Spark or by the baseline). Rates are
content rows of the logs (``H``, ``TX``, ``TC``, ``A``, ``D``, ``PA``, ``PD``) per second of
wall time, the same numerator for every case. Each Spark case is measured in two runs on
the same session, after a warm-up replay of one file (JVM start and warm-up excluded,
reported apart):

* decode: every change row produced and discarded (``write.format("noop")``): the workers'
  decoding, Arrow batches and the JVM import of them;
* replay: ``write_replay`` to Parquet: decode again + the shuffle of the group-by on the
  quad + writing the result.

Issue #13's target is the ``local[1]`` replay rate at least twice "today's": the code the
issue started from, run on the same logs in the same run with ``--baseline CHECKOUT`` (a
worktree of that commit; ``spark-replay local[1] baseline``: its patchsync package drives
the driver and the workers, this checkout's benchmark drives it). The pure-Python codec of
this checkout (``spark-replay local[1] pure``, workers with ``PATCHSYNC_PURE=1``) shows the
codec's share apart from the rest of the replay's changes. Each case asks a worker which
codec its decoder uses, so a baseline that silently ran the compiled core (or a missing
build) shows in the ``codec`` column.

    git worktree add --detach /tmp/base13 5b87345     # main before issue #13's work
    .venv/bin/python -m bench.spark_bench --baseline /tmp/base13

The SQLite baseline is ``apply_file`` (what ``patchsync apply`` runs) into a fresh SQLite
file, on the first ``--sqlite-files`` files (it is the slowest case; its rate does not
depend on how many files it is given).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from patchsync.logs.patch_logs import write_events
from patchsync.options import PatchOptions

from .workload import DEFAULT_SEED, GENERATOR_VERSION, iter_events


def _generate(job: tuple[str, int, int]) -> str:
    path, rows, seed = job
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        write_events(iter_events(rows, seed), f, "jellyp", options=PatchOptions())
    os.replace(tmp, path)
    return path


def make_logs(out: Path, files: int, rows_per_file: int, procs: int) -> list[Path]:
    """The benchmark's logs, generated once and cached by size and generator version."""
    folder = out / f"spark-logs-{files}x{rows_per_file}-g{GENERATOR_VERSION}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"log-{i:03d}.jellyp" for i in range(files)]
    todo = [(str(p), rows_per_file, DEFAULT_SEED + i) for i, p in enumerate(paths) if not p.exists()]
    if todo:
        started = time.monotonic()
        with multiprocessing.Pool(procs) as pool:
            for done in pool.imap_unordered(_generate, todo):
                print(f"  generated {done}", flush=True)
        print(f"  generation: {time.monotonic() - started:.1f}s", flush=True)
    return paths


def _worker_codec(spark: Any) -> str:
    """The codec the Python workers' decoder uses: ``native`` (compiled core) or ``pure``."""

    def probe(_: object) -> Any:
        from patchsync.codec.patch_decoder import PatchDecoder

        # getattr: a baseline from before the compiled core has no such attribute.
        yield "native" if getattr(PatchDecoder, "_native", None) is not None else "pure"

    codec: str = spark.sparkContext.parallelize([0], 1).mapPartitions(probe).first()
    return codec


def spark_case(master: str, logs: list[Path], rows: int, work: Path, *, label: str) -> dict[str, Any]:
    import patchsync.spark as ps

    started = time.monotonic()
    spark = ps.session(master, app_name=f"spark_bench {master}", quiet=True)
    startup = time.monotonic() - started
    try:
        codec = _worker_codec(spark)
        # The first jobs of a session pay the JVM's warm-up (class loading, JIT of the decode,
        # shuffle, aggregate and Parquet paths) and the Python worker's imports: seconds
        # that are no part of either codec's rate. A replay of the smallest file, untimed
        # in the rates, reported apart.
        t0 = time.monotonic()
        ps.write_replay(spark, min(logs, key=lambda p: p.stat().st_size), work / "warmup")
        warmup = time.monotonic() - t0
        t0 = time.monotonic()
        with ps.codec_errors():
            ps.change_rows(spark, logs).write.format("noop").mode("overwrite").save()
        decode = time.monotonic() - t0
        out = work / f"replay-{master.replace('[', '').replace(']', '')}"
        t0 = time.monotonic()
        ps.write_replay(spark, logs, out)
        replay = time.monotonic() - t0
        quads = spark.read.parquet(str(out)).count()
    finally:
        spark.stop()
    return {
        "case": label,
        "codec": codec,
        "session_start_s": round(startup, 2),
        "warmup_s": round(warmup, 2),
        "decode_s": round(decode, 2),
        "decode_rows_per_s": round(rows / decode),
        "replay_s": round(replay, 2),
        "rows_per_s": round(rows / replay),
        "shuffle_and_write_s_est": round(replay - decode, 2),
        "quads_out": quads,
    }


def _spark_in_child(
    master: str, logs: list[Path], rows: int, work: Path, *, pure: bool, baseline: Path | None = None
) -> dict[str, Any]:
    # One process (and JVM) per case, so that no case runs on a JVM warmed by another. The
    # JVM and its Python workers inherit this environment, PATCHSYNC_PURE included.
    label = f"spark-replay {master}" + (" pure" if pure else "") + (" baseline" if baseline else "")
    result = work / f"{label.replace(' ', '_')}.json"
    env = dict(os.environ)
    env.pop("PATCHSYNC_PURE", None)
    if pure:
        env["PATCHSYNC_PURE"] = "1"
    if baseline is not None:
        # The baseline checkout's patchsync package alone (this checkout's bench drives it):
        # a directory holding a link to it goes first on the path of the driver and of the
        # workers, which inherit the environment in local mode; -P keeps the working
        # directory (this checkout) off the path.
        shim = work / "baseline-path"
        shim.mkdir(exist_ok=True)
        link = shim / "patchsync"
        if not link.exists():
            link.symlink_to(baseline.resolve() / "patchsync")
        here = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = f"{shim}{os.pathsep}{here}"
    cmd = [
        sys.executable,
        *(["-P"] if baseline is not None else []),
        "-m",
        "bench.spark_bench",
        "--child",
        master,
        "--child-out",
        str(result),
        "--child-rows",
        str(rows),
        "--child-label",
        label,
        *(str(log.resolve()) for log in logs),
    ]
    # The workers put their working directory first on their path: for the baseline that
    # must not be this checkout.
    subprocess.run(cmd, check=True, env=env, cwd=work / "baseline-path" if baseline is not None else None)
    value: dict[str, Any] = json.loads(result.read_text())
    return value


def sqlite_case(logs: list[Path], rows: int, work: Path) -> dict[str, Any]:
    from patchsync.apply import apply_file, open_target

    url = f"sqlite:///{work / 'bench.db'}"
    target = open_target(url)
    t0 = time.monotonic()
    try:
        for log in logs:
            apply_file(log, target, chain="ignore")
    finally:
        target.close()
    seconds = time.monotonic() - t0
    return {
        "case": "patchsync apply -> SQLite",
        "files": len(logs),
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows-per-file", type=int, default=1_250_000)
    parser.add_argument("--sqlite-files", type=int, default=1, help="files applied by the SQLite baseline")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--procs", type=int, default=2, help="processes generating logs")
    parser.add_argument("--masters", default="local[1],local[2]", help="masters run with the compiled core")
    parser.add_argument(
        "--pure-masters",
        default="local[1]",
        help="masters run with the pure-Python codec (PATCHSYNC_PURE=1); '' for none",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="also replay on local[1] with the patchsync package of CHECKOUT (e.g. a worktree of the code "
        "issue #13 started from), the same logs in the same run",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-label", help=argparse.SUPPRESS)
    parser.add_argument("child_logs", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        work = Path(tempfile.mkdtemp(prefix="spark_bench-"))
        try:
            value = spark_case(args.child, args.child_logs, args.child_rows, work, label=args.child_label)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        args.child_out.write_text(json.dumps(value))
        return 0

    logs = make_logs(args.out, args.files, args.rows_per_file, args.procs)
    rows = args.files * args.rows_per_file
    results: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="spark_bench-"))
    try:
        cases = [(m, True) for m in args.pure_masters.split(",") if m] + [
            (m, False) for m in args.masters.split(",") if m
        ]
        for master, pure in cases:
            print(f"running spark-replay on {master} with the {'pure' if pure else 'compiled'} codec ...", flush=True)
            results.append(_spark_in_child(master, logs, rows, work, pure=pure))
            print("  ", results[-1], flush=True)
        if args.baseline:
            print(f"running spark-replay on local[1] with the patchsync of {args.baseline} ...", flush=True)
            results.append(_spark_in_child("local[1]", logs, rows, work, pure=False, baseline=args.baseline))
            print("  ", results[-1], flush=True)
        if args.sqlite_files > 0:
            subset = logs[: args.sqlite_files]
            print(f"running patchsync apply into SQLite on {len(subset)} file(s) ...", flush=True)
            results.append(sqlite_case(subset, len(subset) * args.rows_per_file, work))
            print("  ", results[-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    by_case = {r["case"]: r for r in results}
    one, two = by_case.get("spark-replay local[1]"), by_case.get("spark-replay local[2]")
    pure_one = by_case.get("spark-replay local[1] pure")
    base_one = by_case.get("spark-replay local[1] baseline")
    summary: dict[str, Any] = {
        "files": args.files,
        "rows": rows,
        "bytes": sum(p.stat().st_size for p in logs),
        "results": results,
        "env": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_at_end": os.getloadavg(),
        },
    }
    if one and pure_one:
        summary["native_over_pure_local1"] = round(pure_one["replay_s"] / one["replay_s"], 2)
        summary["decode_native_over_pure_local1"] = round(pure_one["decode_s"] / one["decode_s"], 2)
    if one and base_one:
        summary["over_baseline_local1"] = round(base_one["replay_s"] / one["replay_s"], 2)
        summary["decode_over_baseline_local1"] = round(base_one["decode_s"] / one["decode_s"], 2)
    if one and two:
        summary["scaling_local2_over_local1"] = round(one["replay_s"] / two["replay_s"], 2)
        summary["decode_scaling_local2_over_local1"] = round(one["decode_s"] / two["decode_s"], 2)
    out = args.out / f"spark_bench-{args.files}x{args.rows_per_file}.json"
    out.write_text(json.dumps(summary, indent=2))
    print(f"\n{rows:,} rows in {args.files} files; load average at the end {os.getloadavg()[0]:.2f}")
    print(f"{'case':32} {'codec':>7} {'seconds':>9} {'rows/s':>10} {'decode s':>9} {'decode rows/s':>14}")
    for r in results:
        decode = (r["decode_s"], f"{r['decode_rows_per_s']:,}") if "decode_s" in r else ("", "")
        print(
            f"{r['case']:32} {r.get('codec', ''):>7} {r.get('replay_s', r.get('seconds')):>9} "
            f"{r['rows_per_s']:>10,} {decode[0]:>9} {decode[1]:>14}"
        )
    if "native_over_pure_local1" in summary:
        ratio = summary["native_over_pure_local1"]
        print(f"local[1] compiled / pure: {ratio}x (decode only: {summary['decode_native_over_pure_local1']}x)")
    if "over_baseline_local1" in summary:
        ratio = summary["over_baseline_local1"]
        print(
            f"local[1] now / baseline {args.baseline}: {ratio}x (decode only: "
            f"{summary['decode_over_baseline_local1']}x); target >= 2x: {'PASS' if ratio >= 2 else 'FAIL'}"
        )
    if "scaling_local2_over_local1" in summary:
        print(
            f"local[2] / local[1]: {summary['scaling_local2_over_local1']}x (decode only: "
            f"{summary['decode_scaling_local2_over_local1']}x)"
        )
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
