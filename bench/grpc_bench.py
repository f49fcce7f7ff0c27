"""gRPC door benchmark: catch-up through SubscribePatch, publish-to-commit, memory with a stalled subscriber.

    .venv/bin/python -m bench.grpc_bench                         # every measurement
    .venv/bin/python -m bench.grpc_bench --catchup-patches 200 --seconds 3   # quicker

Each measurement runs ``patchsync serve`` on a free loopback port and prints its baseline
from the same run beside it:

- Catch-up: one log of ``--catchup-patches`` patches of 50 triples, published to a topic,
  then applied to fresh SQLite databases by ``patchsync tail grpc://…/TOPIC --once`` and,
  as the baseline, ``patchsync tail LOG --once`` on the same log as a local file (each
  twice, interleaved, best kept); rows/s.
- Publish-to-commit: ``patchsync tail grpc://…`` runs as a daemon into SQLite; a producer
  sends chained patches (``examples/producer.py``, encoded beforehand) at a fixed rate on
  one ``PublishPatch`` stream; a patch's latency is its ``applied_at`` in ``ps_patches``
  minus the time just before it was sent. Baseline: ``bench.tail_bench``'s append-to-commit
  latency of ``tail`` on a local file at the same rate.
- Memory: the server's RSS after ``--stalled-rows`` rows are published while one
  subscriber follows the topic and reads nothing, against the same publish with no
  subscriber.
- SubscribeRdf: ``patchsync snapshot --target grpc://…/db`` of a SQLite target of
  ``--rdf-quads`` quads (fetched through the door to a ``.jelly`` file), against
  ``patchsync dump --target sqlite:///… -o FILE.jelly`` of the same target.

``--only catch_up|latency|memory|rdf`` (repeatable) runs only those.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from sqlalchemy import create_engine, text

from patchsync._proto import patch_service_pb2, patch_service_pb2_grpc
from patchsync.events import Add, Delete
from patchsync.logs.patch_logs import read_events
from patchsync.logs.payloads import encode_patch
from patchsync.remote.grpc_client import publish_logs
from patchsync.terms.ntriples import NTriplesTerms

from .stream_bench import _summary
from .tail_bench import _timed, _wait_patches
from .tail_bench import latency as file_latency

ROOT = Path(__file__).resolve().parent.parent
PATCHSYNC = [sys.executable, "-m", "patchsync"]

sys.path.insert(0, str(ROOT / "examples"))
import producer  # noqa: E402


class Server:
    """``patchsync serve --listen 127.0.0.1:0 --topic t=DIR``."""

    def __init__(self, work: Path, name: str) -> None:
        self.proc = subprocess.Popen(
            [*PATCHSYNC, "serve", "--listen", "127.0.0.1:0", "--topic", f"t={work / name}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.port = int(line.rsplit(":", 1)[1])
        self.url = f"grpc://127.0.0.1:{self.port}/t"

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=60)


def catch_up(patches: int, work: Path, repeat: int = 2) -> dict[str, Any]:
    log = work / f"catchup-{patches}.jellyp"
    producer.produce(log, count=patches, rate=0, rows=50)
    rows = sum(1 for e in read_events(log, adapter=NTriplesTerms()) if type(e) in (Add, Delete))
    server = Server(work, "catchup")
    try:
        started = time.perf_counter()
        publish_logs([log], server.url)
        t_publish = time.perf_counter() - started
        t_grpc = t_file = float("inf")
        for i in range(repeat):
            db_grpc, db_file = work / f"cu-grpc-{i}.db", work / f"cu-file-{i}.db"
            t_grpc = min(t_grpc, _timed([*PATCHSYNC, "tail", server.url, "--target", f"sqlite:///{db_grpc}", "--once"]))
            t_file = min(t_file, _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{db_file}", "--once"]))
    finally:
        server.stop()
    return {
        "patches": patches,
        "rows": rows,
        "publish_patches_per_s": round(patches / t_publish, 1),
        "tail_grpc_s": round(t_grpc, 2),
        "tail_file_s": round(t_file, 2),
        "grpc_rows_per_s": round(rows / t_grpc),
        "file_rows_per_s": round(rows / t_file),
        "grpc_of_file": round(t_file / t_grpc, 2),
    }


def _publisher(port: int, requests: queue.Queue[Any]) -> tuple[threading.Thread, list[Any]]:
    stub = patch_service_pb2_grpc.PatchServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    result: list[Any] = []

    def stream() -> Any:
        while (item := requests.get()) is not None:
            yield item

    thread = threading.Thread(target=lambda: result.append(stub.PublishPatch(stream())), daemon=True)
    thread.start()
    return thread, result


def grpc_latency(rate: int, seconds: float, work: Path) -> dict[str, Any]:
    server = Server(work, f"lat{rate}")
    db = work / f"grpc-lat-{rate}.db"
    options = producer.OPTIONS
    count = 1 + int(rate * seconds)
    payloads = {n: encode_patch(producer.patch_events(n), options) for n in range(1, count + 1)}
    requests: queue.Queue[Any] = queue.Queue()
    thread, result = _publisher(server.port, requests)
    requests.put(patch_service_pb2.PublishPatchRequest(topic="t", patch=payloads[1]))
    daemon = subprocess.Popen(
        [*PATCHSYNC, "tail", server.url, "--target", f"sqlite:///{db}"], stderr=subprocess.DEVNULL
    )
    sent_at: dict[str, float] = {}
    try:
        _wait_patches(db, 1)
        started = time.monotonic()
        for n in range(2, count + 1):
            delay = started + (n - 2) / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent_at[f"urn:patch:{n}"] = time.time()
            requests.put(patch_service_pb2.PublishPatchRequest(patch=payloads[n]))
        achieved = (count - 1) / (time.monotonic() - started)
        requests.put(None)
        thread.join(60)
        _wait_patches(db, count)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        server.stop()
    assert result and result[0].appended == count, "a patch was not appended"
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as c:
        applied = dict(c.execute(text("SELECT patch_id, applied_at FROM ps_patches")).all())
    engine.dispose()
    lat = sorted((applied[pid] - at) * 1000 for pid, at in sent_at.items())
    return {"rate": rate, "achieved_rate": round(achieved, 1), **_summary(lat)}


def stalled(rows: int, work: Path, stall: bool) -> dict[str, Any]:
    server = Server(work, f"stall{int(stall)}")
    patches = rows // 50
    log = work / f"stall-{rows}.jellyp"
    if not log.exists():
        producer.produce(log, count=patches, rate=0, rows=50)
    call = None
    try:
        before = server.rss_mib()
        if stall:
            stub = patch_service_pb2_grpc.PatchServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.port}"))
            call = stub.SubscribePatch(patch_service_pb2.SubscribePatchRequest(topic="t"))  # never read
            time.sleep(0.5)
        publish_logs([log], server.url)
        time.sleep(1.0)
        after = server.rss_mib()
    finally:
        if call is not None:
            call.cancel()
        server.stop()
    return {
        "stalled_subscriber": stall,
        "rows": patches * 50,
        "rss_before_mib": round(before, 1),
        "rss_after_mib": round(after, 1),
    }


def snapshot_rdf(quads: int, work: Path, repeat: int = 2) -> dict[str, Any]:
    """``patchsync snapshot --target grpc://…/db`` (SubscribeRdf) against ``patchsync dump``
    of the same SQLite target to a ``.jelly`` file; each ``repeat`` times, interleaved, best kept."""
    rows = 1000
    log = work / f"rdf-{quads}.jellyp"
    producer.produce(log, count=max(1, quads // rows), rate=0, rows=rows)
    db = work / f"rdf-{quads}.db"
    started = time.perf_counter()
    subprocess.run([*PATCHSYNC, "apply", str(log), "--target", f"sqlite:///{db}", "--no-progress"], check=True)
    t_build = time.perf_counter() - started
    server = subprocess.Popen(
        [*PATCHSYNC, "serve", "--listen", "127.0.0.1:0", "--topic", f"db=sqlite:///{db}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline().rsplit(":", 1)[1])
    t_grpc = t_dump = float("inf")
    try:
        for i in range(repeat):
            out = work / f"rdf-grpc-{i}.jelly"
            t_grpc = min(
                t_grpc, _timed([*PATCHSYNC, "snapshot", "--target", f"grpc://127.0.0.1:{port}/db", "-o", str(out)])
            )
            size_grpc = out.stat().st_size
            out.unlink()
            out = work / f"rdf-dump-{i}.jelly"
            t_dump = min(t_dump, _timed([*PATCHSYNC, "dump", "--target", f"sqlite:///{db}", "-o", str(out)]))
            size_dump = out.stat().st_size
            out.unlink()
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    return {
        "rows_applied": max(1, quads // rows) * rows,
        "build_s": round(t_build, 1),
        "subscribe_rdf_s": round(t_grpc, 2),
        "dump_s": round(t_dump, 2),
        "subscribe_rdf_bytes": size_grpc,
        "dump_bytes": size_dump,
        "grpc_of_dump": round(t_dump / t_grpc, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catchup-patches", type=int, default=1000)
    parser.add_argument("--rates", default="100,1000")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--stalled-rows", type=int, default=200_000)
    parser.add_argument("--rdf-quads", type=int, default=1_000_000, help="quads of the SubscribeRdf target")
    parser.add_argument(
        "--only", choices=["catch_up", "latency", "memory", "rdf"], action="append", help="run only these"
    )
    args = parser.parse_args(argv)
    only = set(args.only or ["catch_up", "latency", "memory", "rdf"])
    with tempfile.TemporaryDirectory(prefix="grpc-bench-") as tmp:
        work = Path(tmp)
        results: dict[str, Any] = {"load": os.getloadavg()}
        if "catch_up" in only:
            results["catch_up"] = catch_up(args.catchup_patches, work)
            print(json.dumps({"catch_up": results["catch_up"]}), flush=True)
        if "latency" in only:
            results["latency"] = []
            for rate in (int(r) for r in args.rates.split(",")):
                row = {"grpc": grpc_latency(rate, args.seconds, work), "file": file_latency(rate, args.seconds, work)}
                results["latency"].append(row)
                print(json.dumps(row), flush=True)
        if "memory" in only:
            results["memory"] = [stalled(args.stalled_rows, work, False), stalled(args.stalled_rows, work, True)]
            print(json.dumps({"memory": results["memory"]}), flush=True)
        if "rdf" in only:
            results["rdf"] = snapshot_rdf(args.rdf_quads, work)
            print(json.dumps({"rdf": results["rdf"]}), flush=True)
        results["load_end"] = os.getloadavg()
    print()
    if "catch_up" in results:
        c = results["catch_up"]
        print(f"{'catch-up':<32}{'rows/s':>12}")
        print(f"{'tail grpc:// (SubscribePatch)':<32}{c['grpc_rows_per_s']:>12}")
        print(f"{'tail LOG (baseline)':<32}{c['file_rows_per_s']:>12}   ratio {c['grpc_of_file']}x")
    if "latency" in results:
        print(f"\n{'publish-to-commit':<32}{'p50 ms':>10}{'p99 ms':>10}")
        for row in results["latency"]:
            for kind, r in (("grpc", row["grpc"]), ("file (baseline)", row["file"])):
                print(f"{kind + ' @ ' + str(r['rate']) + '/s':<32}{r['p50_ms']:>10}{r['p99_ms']:>10}")
    if "memory" in results:
        print(f"\n{'server RSS after publish':<32}{'before MiB':>12}{'after MiB':>12}")
        for m in results["memory"]:
            label = "stalled subscriber" if m["stalled_subscriber"] else "no subscriber (baseline)"
            print(f"{label:<32}{m['rss_before_mib']:>12}{m['rss_after_mib']:>12}")
    if "rdf" in results:
        r = results["rdf"]
        print(f"\n{'snapshot, ' + str(r['rows_applied']) + ' rows applied':<32}{'seconds':>12}{'bytes':>14}")
        print(f"{'snapshot grpc:// (SubscribeRdf)':<32}{r['subscribe_rdf_s']:>12}{r['subscribe_rdf_bytes']:>14}")
        print(f"{'dump -o .jelly (baseline)':<32}{r['dump_s']:>12}{r['dump_bytes']:>14}   ratio {r['grpc_of_dump']}x")
    print(f"\nload average at start: {results['load']}, at end: {results['load_end']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
