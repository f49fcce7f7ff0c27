"""HTTP door benchmark: appends/s through ``patchsync serve --http``, and catch-up through the change feed.

    .venv/bin/python -m bench.http_bench                                  # both measurements
    .venv/bin/python -m bench.http_bench --appends 300 --catchup-patches 500   # quicker

Appends: ``patchsync serve --http 127.0.0.1:0 --log-root DIR`` runs as a real process; one
client, then 8 concurrent clients (threads, each its own keep-alive connection and its own
data source, so no append waits for another's conflict), post chained small patches (5
triples, one transaction) as RDF Patch text and as Jelly-Patch, each request waiting for
its answer. The baseline, in the same run: the same Jelly-Patch patches appended in this
process straight to a segment-directory log topic (:class:`FileLogTopic.append`, no HTTP),
one after another.

Catch-up: one log of ``--catchup-patches`` patches of 50 triples, published to the server,
then applied to fresh SQLite databases by ``patchsync tail http://…/NAME --once`` (the
binary change feed) and, as the baseline, ``patchsync tail LOG --once`` on the same log as
a local file; both as subprocesses, wall time (interleaved, best of ``--repeat``), rows/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from patchsync.codec.rdfp import write_rdfp
from patchsync.events import Add, Delete
from patchsync.logs.patch_logs import read_events
from patchsync.logs.payloads import NT_TERMS, encode_patch, text_options
from patchsync.remote.http_client import publish_logs
from patchsync.serve.file_topic import FileLogTopic
from patchsync.terms.ntriples import NTriplesTerms

from .tail_bench import _timed

ROOT = Path(__file__).resolve().parent.parent
PATCHSYNC = [sys.executable, "-m", "patchsync"]

sys.path.insert(0, str(ROOT / "examples"))
import producer  # noqa: E402


def _patches(tag: str, count: int) -> tuple[list[bytes], list[bytes]]:
    """``count`` chained patches of 5 triples as (RDF Patch text, Jelly-Patch) bodies."""
    texts, jelly = [], []
    for n in range(1, count + 1):
        events = [e for e in producer.patch_events(n, rows=5)]
        events = [_retag(e, tag) for e in events]
        texts.append(write_rdfp(events, NT_TERMS, segments=False).encode())
        jelly.append(encode_patch(events, text_options(events)))
    return texts, jelly


def _retag(event: Any, tag: str) -> Any:
    if type(event).__name__ == "Header":
        return event._replace(value=event.value.replace("urn:patch:", f"urn:patch:{tag}:"))
    return event


def _serve(root: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*PATCHSYNC, "serve", "--http", "127.0.0.1:0", "--log-root", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving http on "):
            return proc, "http://" + line.split()[-1]
    raise RuntimeError(f"serve did not start: {proc.stderr.read() if proc.stderr else ''}")


def _create(url: str, name: str) -> None:
    r = httpx.post(url + "/$/rpc", json={"operation": "create_datasource", "arg": {"name": name}})
    r.raise_for_status()


def appends(url: str, count: int, clients: int, kind: str) -> float:
    """Appends/s of ``clients`` concurrent clients posting ``count`` patches each."""
    media = "application/rdf-patch" if kind == "text" else "application/x-jelly-rdf-patch"
    bodies = []
    for c in range(clients):
        name = f"a-{kind}-{clients}-{c}"
        _create(url, name)
        texts, jelly = _patches(name, count)
        bodies.append((name, texts if kind == "text" else jelly))
    barrier = threading.Barrier(clients + 1)

    def run(name: str, items: list[bytes]) -> None:
        with httpx.Client() as client:
            barrier.wait()
            for body in items:
                r = client.post(f"{url}/{name}", content=body, headers={"Content-Type": media})
                if r.status_code != 200:
                    raise RuntimeError(r.text)

    threads = [threading.Thread(target=run, args=b) for b in bodies]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join()
    return clients * count / (time.perf_counter() - started)


def baseline_appends(root: Path, count: int) -> float:
    """Appends/s straight to a log topic in this process (no HTTP)."""
    _, jelly = _patches("base", count)

    async def run() -> float:
        topic = FileLogTopic("base", str(root / "base"), root / "base")
        await topic.open()
        started = time.perf_counter()
        for payload in jelly:
            await topic.append(payload)
        elapsed = time.perf_counter() - started
        await topic.close()
        return count / elapsed

    return asyncio.run(run())


def catch_up(url: str, patches: int, work: Path, repeat: int, rows_per_patch: int) -> dict[str, Any]:
    log = work / f"catchup-{patches}.jellyp"
    producer.produce(log, count=patches, rate=0, rows=rows_per_patch)
    rows = sum(1 for e in read_events(log, adapter=NTriplesTerms()) if type(e) in (Add, Delete))
    _create(url, "catchup")
    started = time.perf_counter()
    publish_logs([log], f"{url}/catchup")
    t_publish = time.perf_counter() - started
    t_http = t_file = float("inf")
    for i in range(repeat):
        db_http, db_file = work / f"cu-http-{i}.db", work / f"cu-file-{i}.db"
        t_http = min(
            t_http, _timed([*PATCHSYNC, "tail", f"{url}/catchup", "--target", f"sqlite:///{db_http}", "--once"])
        )
        t_file = min(t_file, _timed([*PATCHSYNC, "tail", str(log), "--target", f"sqlite:///{db_file}", "--once"]))
    return {
        "patches": patches,
        "rows": rows,
        "publish_s": round(t_publish, 2),
        "tail_http_s": round(t_http, 2),
        "tail_file_s": round(t_file, 2),
        "http_rows_per_s": round(rows / t_http),
        "file_rows_per_s": round(rows / t_file),
        "http_of_file": round(t_file / t_http, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=1000, help="patches per client")
    parser.add_argument("--catchup-patches", type=int, default=2000)
    parser.add_argument("--catchup-rows", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"load_before": os.getloadavg(), "appends": []}
    with tempfile.TemporaryDirectory(prefix="http-bench-") as tmp:
        work = Path(tmp)
        proc, url = _serve(work / "logs")
        try:
            print(f"{'appends (5-triple patches)':<40}{'patches':>9}{'appends/s':>12}", flush=True)
            base = baseline_appends(work, args.appends)
            results["appends"].append({"case": "topic.append in process (baseline)", "rate": base})
            print(f"{'topic.append in process (baseline)':<40}{args.appends:>9}{base:>12.0f}", flush=True)
            for clients in (1, 8):
                for kind in ("text", "jelly"):
                    per_client = max(1, args.appends // clients)
                    rate = appends(url, per_client, clients, kind)
                    case = f"HTTP {clients} client{'s' if clients > 1 else ''}, {kind}"
                    results["appends"].append({"case": case, "rate": rate})
                    print(f"{case:<40}{per_client * clients:>9}{rate:>12.0f}", flush=True)
            cu = catch_up(url, args.catchup_patches, work, args.repeat, args.catchup_rows)
            results["catch_up"] = cu
            print(
                f"\ncatch-up of {cu['patches']} patches, {cu['rows']:,} rows into SQLite:\n"
                f"  tail http://…/NAME --once {cu['tail_http_s']:>7.2f} s  {cu['http_rows_per_s']:>9,} rows/s\n"
                f"  tail LOG --once           {cu['tail_file_s']:>7.2f} s  {cu['file_rows_per_s']:>9,} rows/s "
                f"(baseline)\n  change feed at {cu['http_of_file']}x the file's rate (target >= 0.8x); "
                f"publish {cu['publish_s']} s",
                flush=True,
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    results["load_after"] = os.getloadavg()
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    out = args.out / "http_bench.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
