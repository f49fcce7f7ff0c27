"""Tail daemon benchmark: append-to-commit latency, backlog drain, restart-to-caught-up.

    .venv/bin/python -m bench.tail_bench                       # the three measurements
    .venv/bin/python -m bench.tail_bench --drain-rows 100000   # quicker drain/restart case

Latency: ``patchsync tail LOG --target sqlite:///…`` runs as a real daemon (inotify). A
producer appends chained one-transaction patches (5 triples each) with
:class:`LogAppender` at 10, 100 and 1000 patches/s; each patch carries the wall-clock time
of its write in a ``ts`` header. The latency of a patch is the daemon's ``applied_at`` in
``ps_patches`` (taken when the unit's commit is issued; the SQLite commit follows within
the same pass) minus that time.

Drain: the codec benchmark's seeded workload log (``bench/out/workload-N-….jellyp``,
built by ``bench.codec_bench`` / ``bench.workload``) applied to a fresh SQLite database by
``patchsync apply`` and by ``patchsync tail --once``; both as subprocesses, wall time.

Restart: after the drain, ``patchsync tail --once`` again (nothing new to apply) with the
daemon's decoder snapshot, and without it (the log is decoded from the start and the
applier passes over everything up to the checkpoint), on two log lengths.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

ROOT = Path(__file__).resolve().parent.parent
PATCHSYNC = [sys.executable, "-m", "patchsync"]

sys.path.insert(0, str(ROOT / "examples"))
import producer  # noqa: E402


def _wait_patches(db: Path, n: int, timeout: float = 60.0) -> None:
    engine = create_engine(f"sqlite:///{db}")
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                with engine.connect() as c:
                    got = c.execute(text("SELECT count(*) FROM ps_patches")).scalar() or 0
            except Exception:
                got = 0
            if got >= n:
                return
            time.sleep(0.2)
    finally:
        engine.dispose()
    raise RuntimeError(f"daemon did not apply {n} patches in {timeout}s")


def latency(rate: int, seconds: float, work: Path) -> dict[str, Any]:
    """p50/p99 of append-to-commit latency at ``rate`` patches/s."""
    log = work / f"lat-{rate}.jellyp"
    db = work / f"lat-{rate}.db"
    producer.produce(log, count=1, rate=0, stamp=True)  # the first frame, so the daemon starts
    daemon = subprocess.Popen(
        [*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{db}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_patches(db, 1)
        count = producer.produce(log, count=int(rate * seconds), rate=rate, stamp=True)  # the last patch number
        _wait_patches(db, count)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as c:
        rows = c.execute(text("SELECT applied_at, headers FROM ps_patches ORDER BY seq")).all()
    engine.dispose()
    lat = []
    for applied_at, headers in rows[1:]:
        ts = next(float(v.strip('"')) for k, v in json.loads(headers) if k == "ts")
        lat.append((applied_at - ts) * 1000)
    lat.sort()
    return {
        "rate": rate,
        "patches": len(lat),
        "p50_ms": round(statistics.median(lat), 2),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
        "max_ms": round(lat[-1], 2),
        "exit_code": daemon.returncode,
    }


def _timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr[-2000:]}")
    return time.perf_counter() - started


def drain_and_restart(log: Path, work: Path) -> dict[str, Any]:
    """Backlog drain of ``log``: apply vs tail --once; then restart times with and without a snapshot."""
    apply_db = work / f"apply-{log.stem}.db"
    tail_db = work / f"tail-{log.stem}.db"
    t_apply = _timed([*PATCHSYNC, "apply", str(log), "--target", f"sqlite:///{apply_db}", "--no-progress"])
    t_tail = _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{tail_db}", "--once"])
    state_dir = Path(f"{tail_db}.tail")
    t_snap = _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{tail_db}", "--once"])
    shutil.rmtree(state_dir)
    t_full = _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{tail_db}", "--once"])
    t_start = _timed([*PATCHSYNC, "--version"])
    return {
        "log": log.name,
        "bytes": log.stat().st_size,
        "apply_s": round(t_apply, 2),
        "tail_once_s": round(t_tail, 2),
        "drain_of_apply_pct": round(100 * t_apply / t_tail, 1),
        "restart_with_snapshot_s": round(t_snap, 3),
        "restart_full_redecode_s": round(t_full, 3),
        "python_startup_s": round(t_start, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100,1000", help="patches/s for the latency runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="producer run time per rate")
    parser.add_argument("--drain-rows", default="1000000,100000", help="workload sizes for drain/restart")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"latency": [], "drain": []}
    with tempfile.TemporaryDirectory(prefix="tail-bench-") as tmp:
        work = Path(tmp)
        for rate in (int(r) for r in args.rates.split(",") if r):
            res = latency(rate, args.seconds if rate < 1000 else args.seconds / 2, work)
            results["latency"].append(res)
            print(
                f"latency @ {rate:>4}/s: p50 {res['p50_ms']:7.2f} ms  p99 {res['p99_ms']:7.2f} ms  "
                f"max {res['max_ms']:7.2f} ms  ({res['patches']} patches)",
                flush=True,
            )
        for rows in (int(r) for r in args.drain_rows.split(",") if r):
            logs = sorted((ROOT / "bench" / "out").glob(f"workload-{rows}-*.jellyp"))
            if not logs:
                print(f"drain {rows}: no workload log; run bench.codec_bench --rows {rows} first", flush=True)
                continue
            res = drain_and_restart(logs[0], work)
            res["rows"] = rows
            results["drain"].append(res)
            print(
                f"drain {rows:>8} rows ({res['bytes'] / 1e6:.1f} MB): apply {res['apply_s']} s, "
                f"tail --once {res['tail_once_s']} s ({res['drain_of_apply_pct']}% of apply's rate); "
                f"restart with snapshot {res['restart_with_snapshot_s']} s, without "
                f"{res['restart_full_redecode_s']} s (python start {res['python_startup_s']} s)",
                flush=True,
            )
    out = args.out / "tail_bench.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
