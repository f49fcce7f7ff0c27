"""Stream replication benchmark (issue #15): publish-to-commit latency, catch-up from a stream.

    .venv/bin/python -m bench.stream_bench                                  # both measurements
    .venv/bin/python -m bench.stream_bench --seconds 4 --catchup-patches 500   # quicker

Needs NATS JetStream (``--nats``, default ``nats://127.0.0.1:4222``); every run uses
streams of its own, deleted at the end.

Latency: ``patchsync tail nats://…/STREAM --target sqlite:///…`` runs as a real daemon. A
producer publishes chained one-transaction patches (5 triples each, the patches of
``examples/producer.py``, encoded beforehand) at a fixed rate, one message each with the
headers of :meth:`NatsLog.publish_patch` (conditional on ``prev``, deduplicated by id),
without waiting for one acknowledgement before the next. A patch's latency is its
``applied_at`` in ``ps_patches`` (taken when the unit's commit is issued, in the
transaction that also writes the checkpoint, i.e. the stream sequence) minus the
wall-clock time just before it was sent.
The baseline, side by side in the same run: ``bench.tail_bench``'s append-to-commit
latency of ``patchsync tail`` on a local file at the same rate (same method).

Catch-up: one log of ``--catchup-patches`` patches of 50 triples, published to a fresh
stream, then applied to fresh SQLite databases by ``patchsync tail STREAM --once`` and,
as the baseline, ``patchsync tail LOG --once`` on the same log as a local file; both as
subprocesses, wall time (each twice, interleaved, best kept), rows/s (rows: the log's add
and delete rows).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from patchsync.events import Add, Delete
from patchsync.logs.patch_logs import read_events
from patchsync.logs.payloads import encode_patch
from patchsync.nats import NatsLog, publish_logs
from patchsync.nats.headers import EXPECTED_LAST_ID, MSG_ID
from patchsync.terms.ntriples import NTriplesTerms

from .tail_bench import _timed, _wait_patches
from .tail_bench import latency as file_latency

ROOT = Path(__file__).resolve().parent.parent
PATCHSYNC = [sys.executable, "-m", "patchsync"]

sys.path.insert(0, str(ROOT / "examples"))
import producer  # noqa: E402


def _stream(nats: str, tag: str) -> str:
    return f"{nats}/bench_{tag}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


def _summary(lat: list[float]) -> dict[str, Any]:
    return {
        "patches": len(lat),
        "p50_ms": round(statistics.median(lat), 2),
        "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
        "max_ms": round(lat[-1], 2),
    }


def stream_latency(nats: str, rate: int, seconds: float, work: Path) -> dict[str, Any]:
    """p50/p99 of publish-to-commit latency at ``rate`` patches/s through a stream.

    The producer runs on the connection's event loop and does not wait for one patch's
    acknowledgement before sending the next (on one connection the server receives them
    in order, so each conditional append still finds its ``prev`` as the stream's head);
    every acknowledgement is checked at the end.
    """
    url = _stream(nats, f"lat{rate}")
    db = work / f"stream-lat-{rate}.db"
    options = producer.OPTIONS
    count = 1 + int(rate * seconds)
    with NatsLog(url) as log:
        log.ensure_stream()
        log.publish_patch(encode_patch(producer.patch_events(1, stamp=True), options), "urn:patch:1", None)
        daemon = subprocess.Popen([*PATCHSYNC, "tail", url, "--target", f"sqlite:///{db}"], stderr=subprocess.DEVNULL)

        # Encoded beforehand: the producer's own encoding is not what is measured.
        payloads = {n: encode_patch(producer.patch_events(n), options) for n in range(2, count + 1)}
        sent_at: dict[str, float] = {}

        async def produce() -> float:
            loop = asyncio.get_running_loop()
            sent = []
            started = loop.time()
            for n in range(2, count + 1):
                delay = started + (n - 2) / rate - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                payload = payloads[n]
                headers = {MSG_ID: f"urn:patch:{n}", EXPECTED_LAST_ID: f"urn:patch:{n - 1}"}
                sent_at[f"urn:patch:{n}"] = time.time()
                publish = log.js.publish(log.subject, payload, stream=log.name, headers=headers, timeout=30)
                sent.append(asyncio.ensure_future(publish))
                await asyncio.sleep(0)  # let it go out before the next one
            acks = await asyncio.gather(*sent)
            assert [a.seq for a in acks] == list(range(2, count + 1)), "a patch was not appended in order"
            return (count - 1) / (loop.time() - started)

        try:
            _wait_patches(db, 1)
            achieved = log.run(produce)
            _wait_patches(db, count)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
            log.delete_stream()
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as c:
        applied = dict(c.execute(text("SELECT patch_id, applied_at FROM ps_patches")).all())
    engine.dispose()
    lat = sorted((applied[pid] - at) * 1000 for pid, at in sent_at.items())
    return {
        "rate": rate,
        "achieved_rate": round(achieved, 1),
        **_summary(lat),
        "exit_code": daemon.returncode,
    }


def catch_up(nats: str, patches: int, work: Path, repeat: int = 2, rows_per_patch: int = 50) -> dict[str, Any]:
    """Apply one log from a stream and from a local file (``tail --once``), wall time and rows/s."""
    log = work / f"catchup-{patches}-{rows_per_patch}.jellyp"
    producer.produce(log, count=patches, rate=0, rows=rows_per_patch)
    rows = sum(1 for e in read_events(log, adapter=NTriplesTerms()) if type(e) in (Add, Delete))
    url = _stream(nats, "catchup")
    try:
        started = time.perf_counter()
        publish_logs([log], url)
        t_publish = time.perf_counter() - started
        # Interleaved and repeated, best kept: on a shared machine the load moves between runs.
        t_stream = t_file = float("inf")
        for i in range(repeat):
            db_stream, db_file = work / f"cu-stream-{i}.db", work / f"cu-file-{i}.db"
            t_stream = min(t_stream, _timed([*PATCHSYNC, "tail", url, "--target", f"sqlite:///{db_stream}", "--once"]))
            t_file = min(t_file, _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{db_file}", "--once"]))
    finally:
        with NatsLog(url) as s:
            s.delete_stream()
    t_start = _timed([*PATCHSYNC, "--version"])
    return {
        "patches": patches,
        "rows_per_patch": rows_per_patch,
        "repeat": repeat,
        "rows": rows,
        "bytes": log.stat().st_size,
        "publish_s": round(t_publish, 2),
        "publish_patches_per_s": round(patches / t_publish, 1),
        "tail_stream_s": round(t_stream, 2),
        "tail_file_s": round(t_file, 2),
        "stream_rows_per_s": round(rows / t_stream),
        "file_rows_per_s": round(rows / t_file),
        "stream_of_file_pct": round(100 * t_file / t_stream, 1),
        "python_startup_s": round(t_start, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats", default=os.environ.get("PATCHSYNC_NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--rates", default="100,1000", help="patches/s for the latency runs")
    parser.add_argument("--seconds", type=float, default=8.0, help="producer run time per rate")
    parser.add_argument("--catchup-patches", type=int, default=2000, help="patches to catch up on")
    parser.add_argument("--catchup-rows", type=int, default=50, help="triples per patch of the catch-up log")
    parser.add_argument("--repeat", type=int, default=2, help="catch-up runs of each side (best kept)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the local-file latency baseline")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"load_before": os.getloadavg(), "latency": [], "catch_up": None}
    print(f"{'case':<28}{'patches':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}{'rate/s':>9}", flush=True)
    with tempfile.TemporaryDirectory(prefix="stream-bench-") as tmp:
        work = Path(tmp)
        for rate in (int(r) for r in args.rates.split(",") if r):
            res = stream_latency(args.nats, rate, args.seconds, work)
            row = {"case": f"stream @ {rate}/s", **res}
            results["latency"].append(row)
            print(
                f"{row['case']:<28}{res['patches']:>8}{res['p50_ms']:>10.2f}{res['p99_ms']:>10.2f}"
                f"{res['max_ms']:>10.2f}{res['achieved_rate']:>9.0f}",
                flush=True,
            )
            if not args.no_baseline:
                base = file_latency(rate, args.seconds, work)
                brow = {"case": f"file (baseline) @ {rate}/s", **base}
                results["latency"].append(brow)
                print(
                    f"{brow['case']:<28}{base['patches']:>8}{base['p50_ms']:>10.2f}{base['p99_ms']:>10.2f}"
                    f"{base['max_ms']:>10.2f}{'':>9}",
                    flush=True,
                )
        cu = catch_up(args.nats, args.catchup_patches, work, args.repeat, args.catchup_rows)
        results["catch_up"] = cu
        print(
            f"\ncatch-up of {cu['patches']} patches, {cu['rows']:,} rows ({cu['bytes'] / 1e6:.1f} MB):\n"
            f"  tail STREAM --once {cu['tail_stream_s']:>7.2f} s  {cu['stream_rows_per_s']:>9,} rows/s\n"
            f"  tail LOG --once    {cu['tail_file_s']:>7.2f} s  {cu['file_rows_per_s']:>9,} rows/s (baseline)\n"
            f"  stream at {cu['stream_of_file_pct']}% of the file's rate; publish {cu['publish_s']} s "
            f"({cu['publish_patches_per_s']:,} patches/s); python start {cu['python_startup_s']} s",
            flush=True,
        )
    results["load_after"] = os.getloadavg()
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    out = args.out / "stream_bench.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
