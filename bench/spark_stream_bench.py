"""Continuous Spark pipeline benchmark: incremental replay against a full replay, and the lag of
a streaming query, on ``local[1]`` and ``local[2]``.

    .venv/bin/python -m bench.spark_stream_bench                              # 4 x 250,000 rows
    .venv/bin/python -m bench.spark_stream_bench --rows-per-file 20000 --stream-seconds 10   # quick
    .venv/bin/python -m bench.spark_stream_bench --lag-only --nats nats://127.0.0.1:4222 --stream-seconds 30

Per master, in a process (and JVM) of its own, the session start and a warm-up replay of
the 1% segment reported apart:

* full: ``replay_into(..., full=True)`` of the :mod:`bench.workload` logs (the baseline, in
  the same run);
* incremental: a new segment of 1% more rows is added to the log directory, then
  ``replay_into`` folds only it into the previous version (a delta on the full version);
  issue #50's target is at most 15% of the full replay's time; reading the resulting state
  (``read_state``, the full version with the delta applied: a count) is reported apart, and
  so are the driver's scan of the logs, the Spark jobs the run starts and an empty job's time;
* lag: a writer appends one patch (a transaction adding one quad that names it) every
  ``1/rate`` seconds to a growing log, flushed after each (with ``--nats SERVER``, then
  again publishing each patch as a message to a new stream of that server, the file's lag
  being the baseline in the same run); a streaming query
  (``readStream.format("jelly-patch")``, trigger ``--trigger`` seconds, each micro-batch
  appended to a Parquet sink) records when each patch's row is in the sink. Lag is that
  time minus the time its bytes were written; the target is p99 at most 10 s at 100
  patches/s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.logs.patch_logs import write_events
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms

from .spark_bench import make_logs
from .workload import DEFAULT_SEED, iter_events

NT = NTriplesTerms()
EX = "http://example.org/lag/"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def incremental_case(spark: Any, logs: list[Path], extra: Path, work: Path) -> dict[str, Any]:
    import patchsync.spark as ps
    from patchsync.spark._sources import expand_paths
    from patchsync.spark._stream import advance

    live, state = work / "logs", work / "state"
    live.mkdir()
    for log in logs:
        os.symlink(log.resolve(), live / log.name)
    t0 = time.monotonic()
    ps.replay_into(spark, extra, work / "warmup", full=True)  # JVM warm-up: the 1% segment alone
    warmup = time.monotonic() - t0
    t0 = time.monotonic()
    ps.replay_into(spark, live, state, full=True)
    full = time.monotonic() - t0
    os.symlink(extra.resolve(), live / "zz-extra.jellyp")
    # Profile of the incremental run: the driver's scan of the logs (no Spark), the Spark jobs
    # it runs, and the time of an empty job on this session (the per-job floor).
    previous = ps.current_version(state)
    assert previous is not None
    t0 = time.monotonic()
    advance(previous.logs, expand_paths([str(live)], (".jellyp",)))
    scan = time.monotonic() - t0
    floors = []
    for _ in range(3):
        t0 = time.monotonic()
        spark.range(1).count()
        floors.append(time.monotonic() - t0)
    spark.sparkContext.setJobGroup("incremental", "the incremental run")
    t0 = time.monotonic()
    version = ps.replay_into(spark, live, state)
    incremental = time.monotonic() - t0
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup("incremental"))
    spark.sparkContext.setJobGroup("other", "after the incremental run")
    t0 = time.monotonic()
    quads = ps.read_state(spark, version).count()  # the full version with its delta applied
    read = time.monotonic() - t0
    return {
        "warmup_s": round(warmup, 2),
        "full_s": round(full, 2),
        "incremental_s": round(incremental, 2),
        "incremental_over_full": round(incremental / full, 3),
        "incremental_wrote": version.layers[-1].kind,
        "incremental_jobs": jobs,
        "empty_job_s": round(sorted(floors)[1], 2),
        "driver_scan_s": round(scan, 3),
        "read_state_s": round(read, 2),
        "quads_out": quads,
    }


class FileWriter:
    """Appends each patch to a growing log, flushed after each (the file source's lag)."""

    def __init__(self, work: Path, name: str = "stream") -> None:
        live = work / name
        live.mkdir()
        self.source = str(live)
        self._file = open(live / "growing.jellyp", "wb")  # noqa: SIM115 - closed by close()
        self._encoder: PatchEncoder[str] = PatchEncoder(PatchOptions(), NT)

    def write(self, n: int, name: str) -> None:
        encoder = self._encoder
        encoder.tx_start()
        encoder.add(NT.iri(f"{EX}s{n % 1000}"), NT.iri(f"{EX}p"), NT.literal(name), "")
        encoder.tx_commit()
        encoder.end_patch()
        self._file.write(encoder.take())
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class StreamWriter:
    """Publishes each patch as one message to a new stream of ``server`` (the NATS source's lag)."""

    def __init__(self, server: str) -> None:
        from patchsync.nats import NatsLog

        self.source = f"{server.rstrip('/')}/spark_lag_{os.getpid()}_{int(time.time())}"
        self._log = NatsLog(self.source)
        self._log.ensure_stream()
        self._prev: str | None = None

    def write(self, n: int, name: str) -> None:
        from patchsync.events import Add, Header, PatchEnd, TxCommit, TxStart
        from patchsync.logs.payloads import encode_patch, message_options

        patch_id = f"urn:lag:{n}"
        events: list[Any] = [Header("id", NT.iri(patch_id))]
        if self._prev is not None:
            events.append(Header("prev", NT.iri(self._prev)))
        events += [TxStart(), Add(NT.iri(f"{EX}s{n % 1000}"), NT.iri(f"{EX}p"), NT.literal(name), ""), TxCommit()]
        self._log.publish_patch(encode_patch([*events, PatchEnd()], message_options(None)), patch_id, self._prev)
        self._prev = patch_id

    def close(self) -> None:
        self._log.delete_stream()
        self._log.close()


def lag_case(
    spark: Any, out: FileWriter | StreamWriter, work: Path, seconds: float, rate: float, trigger: float
) -> dict[str, Any]:
    sink = work / f"sink-{len(list(work.glob('sink-*')))}"
    written: dict[str, float] = {}
    arrived: dict[str, float] = {}
    stop = threading.Event()
    elapsed = [0.0]

    def writer() -> None:
        n, started = 0, time.monotonic()
        while not stop.is_set():
            name = f"patch-{n}"
            # Timed from just before the write: a publish waits for the server's answer.
            written[name] = time.monotonic()
            out.write(n, name)
            n += 1
            # Paced to the rate from the start, so a slow write does not lower it.
            time.sleep(max(0.0, started + n / rate - time.monotonic()))
        elapsed[0] = time.monotonic() - started

    def batch(rows: Any, _batch_id: int) -> None:
        rows = rows.persist()
        names = [r["o"] for r in rows.where("op = 'A'").select("o").collect()]
        rows.write.mode("append").parquet(str(sink))
        now = time.monotonic()
        rows.unpersist()
        for literal in names:
            arrived[literal[1:-1]] = now

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    query = (
        spark.readStream.format("jelly-patch")
        .load(out.source)
        .writeStream.foreachBatch(batch)
        .trigger(processingTime=f"{trigger} seconds")
        .start()
    )
    try:
        time.sleep(seconds)
        stop.set()
        thread.join()
        last = f"patch-{len(written) - 1}"
        # Until the last patch is in the sink (a query that fell behind is measured too).
        while last not in arrived and query.isActive:
            time.sleep(0.1)
        failure = query.exception()
    finally:
        query.stop()
        out.close()
    if failure is not None:
        raise RuntimeError(f"the streaming query failed: {failure}")
    lags = [arrived[k] - t for k, t in written.items() if k in arrived]
    return {
        "patches": len(written),
        "rate_per_s": round(len(written) / elapsed[0], 1),
        "in_sink": len(lags),
        "lag_p50_s": round(_percentile(lags, 0.50), 2),
        "lag_p99_s": round(_percentile(lags, 0.99), 2),
        "lag_max_s": round(max(lags), 2) if lags else None,
    }


def child(master: str, logs: list[Path], extra: Path, args: argparse.Namespace) -> dict[str, Any]:
    import patchsync.spark as ps

    work = Path(tempfile.mkdtemp(prefix="spark_stream_bench-"))
    try:
        t0 = time.monotonic()
        spark = ps.session(master, app_name=f"spark_stream_bench {master}", quiet=True)
        startup = time.monotonic() - t0
        try:
            result = {"master": master, "session_start_s": round(startup, 2)}
            if not args.lag_only:
                result |= incremental_case(spark, logs, extra, work)
            else:
                # The replays warm the JVM and the Python workers up otherwise: without them,
                # the first lag case measured would pay for it alone.
                warm = lag_case(spark, FileWriter(work, "warmup"), work, 10.0, args.rate, args.trigger)
                result["warmup_lag_p99_s"] = warm["lag_p99_s"]
            result |= lag_case(spark, FileWriter(work), work, args.stream_seconds, args.rate, args.trigger)
            if args.nats:
                nats = lag_case(spark, StreamWriter(args.nats), work, args.stream_seconds, args.rate, args.trigger)
                result |= {f"nats_{k}": v for k, v in nats.items()}
        finally:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--stream-seconds", type=float, default=30.0, help="how long the writer writes")
    parser.add_argument("--rate", type=float, default=100.0, help="patches per second written")
    parser.add_argument("--trigger", type=float, default=1.0, help="trigger interval of the streaming query")
    parser.add_argument(
        "--nats", metavar="SERVER", help="also measure the lag from a stream of this server (nats://HOST:PORT)"
    )
    parser.add_argument("--lag-only", action="store_true", help="only the lag (no replays: a short run)")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--procs", type=int, default=2, help="processes generating logs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = args.files * args.rows_per_file
    extra = args.out / f"spark-stream-extra-{rows // 100}.jellyp"
    logs = [] if args.lag_only else make_logs(args.out, args.files, args.rows_per_file, args.procs)
    if not args.lag_only and not extra.exists():
        with open(extra, "wb") as f:
            write_events(iter_events(rows // 100, DEFAULT_SEED + 1000), f, "jellyp", options=PatchOptions())
    if args.child:
        args.child_out.write_text(json.dumps(child(args.child, logs, extra, args)))
        return 0

    results = []
    for master in args.masters.split(","):
        print(f"running on {master} ...", flush=True)
        out = args.out / f"spark_stream_bench-{master.replace('[', '').replace(']', '')}.json"
        # One process (and JVM) per master, so that neither runs on a JVM warmed by the other.
        subprocess.run(
            [sys.executable, "-m", "bench.spark_stream_bench", *(argv or sys.argv[1:]), "--child", master,
             "--child-out", str(out)],
            check=True,
        )  # fmt: skip
        results.append(json.loads(out.read_text()))
        print("  ", results[-1], flush=True)
    summary = {
        "files": args.files,
        "rows": rows,
        "extra_rows": rows // 100,
        "results": results,
        "env": {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count(),
                "loadavg_at_end": os.getloadavg()},
    }  # fmt: skip
    (args.out / f"spark_stream_bench-{args.files}x{args.rows_per_file}.json").write_text(json.dumps(summary, indent=2))
    what = "lag only" if args.lag_only else f"{rows:,} rows in {args.files} files + {rows // 100:,} (1%)"
    print(f"\n{what}; load average {os.getloadavg()[0]:.2f}")
    columns = ["session_start_s", "full_s", "incremental_s", "incremental_over_full", "lag_p50_s", "lag_p99_s"]
    columns += ["rate_per_s", "nats_lag_p50_s", "nats_lag_p99_s", "nats_rate_per_s"]
    shown = [c for c in columns if any(c in r for r in results)]
    print(f"{'master':10} " + " ".join(f"{c.removesuffix('_s'):>10}" for c in shown))
    for r in results:
        print(f"{r['master']:10} " + " ".join(f"{r.get(c, '-'):>10}" for c in shown))
    for r in results:
        if "incremental_wrote" in r:
            print(
                f"{r['master']}: incremental run wrote a {r['incremental_wrote']}, {r['incremental_jobs']} Spark jobs "
                f"(an empty job: {r['empty_job_s']} s), driver scan {r['driver_scan_s']} s; "
                f"reading the state after it: {r['read_state_s']} s"
            )
    for r in results:
        for prefix, what in (("", "a file"), ("nats_", "a stream")):
            if f"{prefix}lag_p99_s" in r:
                lag = "PASS" if r[f"{prefix}lag_p99_s"] <= 10 else "FAIL"
                print(f"{r['master']}: lag p99 <= 10 s at {args.rate:g}/s from {what}: {lag}")
        if "incremental_over_full" in r:
            inc = "PASS" if r["incremental_over_full"] <= 0.15 else "FAIL"
            print(f"{r['master']}: incremental <= 15% of full: {inc}")
    by = {r["master"]: r for r in results}
    if "full_s" in by.get("local[1]", {}) and "full_s" in by.get("local[2]", {}):
        print(f"local[2] / local[1] full replay: {by['local[1]']['full_s'] / by['local[2]']['full_s']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
