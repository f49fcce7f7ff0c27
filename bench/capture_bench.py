"""Recording overhead: N ``Dataset.add`` calls recorded to a log vs the same calls unrecorded.

Run from the repository root::

    python -m bench.capture_bench [--adds N] [--patch-size K] [--fmt jellyp|rdfp] [--out DIR]

Both cases make the same calls (the same pre-built quads, 1 in 8 in a named graph, 1 in
16 a blank node object, a mix of literal types) on a fresh in-memory rdflib ``Dataset``;
the recorded case wraps it in a :class:`patchsync.capture.Recorder` writing a log file
(autocommit every K changes, so the log is a chain of patches) and includes closing the
log. Each case runs in its own child process so neither sees the other's garbage. Prints
wall and CPU times, the CPU-time ratio (target: at most 1.5; CPU time because wall time
on a shared machine mostly measures the neighbours), log bytes per change, and writes
JSON to ``DIR/capture_bench-N.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_RATIO = 1.5


def workload(n: int) -> list[tuple[Any, Any, Any, Any]]:
    from rdflib import BNode, Literal, URIRef
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    preds = [URIRef(f"http://example.org/vocab#p{i}") for i in range(20)]
    graphs = [URIRef(f"http://example.org/graph/{i}") for i in range(4)]
    quads = []
    for i in range(n):
        s = URIRef(f"http://example.org/resource/{i // 5}")
        p = preds[i % 20]
        if i % 16 == 0:
            o: Any = BNode(f"b{i}")
        elif i % 3 == 0:
            o = Literal(i)
        elif i % 3 == 1:
            o = Literal(f"value {i}", lang="en")
        else:
            o = URIRef(f"http://example.org/resource/{i * 7 % n}")
        g = graphs[i % 4] if i % 8 == 0 else DATASET_DEFAULT_GRAPH_ID
        quads.append((s, p, o, g))
    return quads


def run_case(case: str, n: int, patch_size: int, fmt: str) -> dict[str, Any]:
    from rdflib import Dataset

    from patchsync.capture import Recorder

    quads = workload(n)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / f"log.{fmt}"
        start = time.perf_counter()
        cpu_start = time.process_time()
        if case == "plain":
            ds = Dataset()
            add = ds.add
            for q in quads:
                add(q)
        else:
            rec = Recorder(Dataset(), log, autocommit=patch_size)
            add = rec.graph.add
            for q in quads:
                add(q)
            rec.close()
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        size = log.stat().st_size if log.exists() else 0
    return {"case": case, "seconds": seconds, "cpu_seconds": cpu, "log_bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=1_000_000)
    parser.add_argument("--patch-size", type=int, default=10_000, help="changes per autocommitted patch")
    parser.add_argument("--fmt", choices=["jellyp", "rdfp"], default="jellyp")
    parser.add_argument("--out", type=Path, default=Path("bench") / "out")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args.adds, args.patch_size, args.fmt)))
        return
    results = {}
    for case in ("plain", "recorded"):
        cmd = [sys.executable, "-m", "bench.capture_bench", "--child", case, "--adds", str(args.adds)]
        cmd += ["--patch-size", str(args.patch_size), "--fmt", args.fmt]
        results[case] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    # The ratio uses CPU time: on a shared machine wall time mostly measures the neighbours.
    plain, recorded = results["plain"]["cpu_seconds"], results["recorded"]["cpu_seconds"]
    ratio = recorded / plain
    per_change = results["recorded"]["log_bytes"] / args.adds
    print(f"{'case':10} {'adds':>10} {'wall s':>9} {'CPU s':>9} {'adds/CPU s':>11}")
    for case, r in results.items():
        cpu = r["cpu_seconds"]
        print(f"{case:10} {args.adds:>10} {r['seconds']:>9.2f} {cpu:>9.2f} {args.adds / cpu:>11.0f}")
    print(
        f"ratio recorded/plain: {ratio:.2f} ({'PASS' if ratio <= TARGET_RATIO else 'FAIL'}, target <= {TARGET_RATIO})"
    )
    print(f"log: {results['recorded']['log_bytes']} bytes ({args.fmt}), {per_change:.1f} bytes per change")
    args.out.mkdir(parents=True, exist_ok=True)
    report = {**results, "adds": args.adds, "patch_size": args.patch_size, "fmt": args.fmt, "ratio": ratio}
    report["bytes_per_change"] = per_change
    (args.out / f"capture_bench-{args.adds}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
