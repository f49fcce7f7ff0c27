"""The CPU of one fetch by version at a random place, in process (no HTTP, no load's wall
time): a checkpoint's restore, the decoding from it to the patch, and the patch's RDF Patch
text (docs/decisions/0030-compact-checkpoints-and-text-fetch.md).

    .venv/bin/python -m bench.fetch_cpu_bench [--log LOG.jellyp] [--every 128 64 32]

The log is ``--log``, or a file of ``--patches`` patches written by ``examples/producer.py``
(5 triples a patch, one stream: every fetch restores a checkpoint), kept under ``--data``.
For each checkpoint interval the log's version index is built in a temporary directory
(its size and build time printed), then ``--fetches`` random versions are read, each from
a fresh decoder. The text is made both ways in the same run: from the decoded events (what
``serve`` does) and, the baseline, by encoding the patch as a one-patch Jelly message and
decoding that again (what it did before).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from patchsync.logs.indexed_log import KEPT, IndexedLog, _restored
from patchsync.logs.payloads import encode_patch, events_text, message_options, payload_text

CPU = time.thread_time
ROOT = Path(__file__).resolve().parent.parent


def measure(log_path: Path, every: int, fetches: int, seed: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "log.idx"
        started, cpu = time.perf_counter(), time.process_time()
        log = IndexedLog([log_path], index, every=every)
        log.open()
        build, build_cpu = time.perf_counter() - started, time.process_time() - cpu
        log.close()
        size = index.stat().st_size
        log = IndexedLog([log_path], index, every=every)
        log.open()
        print(
            f"info every {every}: index {size / 1e6:.1f} MB (log {log_path.stat().st_size / 1e6:.1f} MB), "
            f"built in {build:.2f} s ({build_cpu:.2f} s CPU)"
        )
        head = log.head()
        assert head is not None
        rng = random.Random(seed)
        out: dict[str, list[float]] = {"restore": [], "decode": [], "text": [], "text by Jelly": [], "fetch": []}
        try:
            for _ in range(fetches):
                version = rng.randint(1, head.version)
                log.close_cursors()  # each fetch from a checkpoint, as at a random place
                a = CPU()
                cp = log.index.checkpoint_at(version)
                assert cp is not None
                _restored(cp, log_path, None)
                b = CPU()
                [stored] = list(log.read(version, version))  # its own restore, then the decoding
                c = CPU()
                if stored.raw is not None:
                    payload_text(stored.raw)
                    d = e = CPU()
                else:
                    assert stored.events is not None
                    events_text(stored.events)
                    d = CPU()
                    payload_text(encode_patch(stored.events, message_options(stored.options)))
                    e = CPU()
                out["restore"].append(b - a)
                out["decode"].append((c - b) - (b - a))
                out["text"].append(d - c)
                out["text by Jelly"].append(e - d)
                out["fetch"].append(c - b + d - c)
        finally:
            KEPT.drop(log._kept_id)
            log.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="a .jellyp file (default: a producer log of --patches)")
    parser.add_argument("--patches", type=int, default=20_000)
    parser.add_argument("--data", default=str(ROOT / "bench" / "out" / "fetch_cpu"))
    parser.add_argument("--every", type=int, nargs="+", default=[128, 64, 32])
    parser.add_argument("--fetches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    log = args.log or producer_log(Path(args.data), args.patches)
    rows = []
    for every in args.every:
        figures = measure(log, every, args.fetches, args.seed)
        cells = []
        for name in ("restore", "decode", "text", "text by Jelly", "fetch"):
            ordered = sorted(figures[name])
            p50, p99 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            cells.append(f"{p50 * 1e3:.2f} / {p99 * 1e3:.2f}")
        rows.append(f"| every {every} | " + " | ".join(cells) + " |")
    print(f"\n## A random fetch's CPU, in process ({log.name}, {args.fetches} fetches, p50 / p99 ms)\n")
    print("| checkpoints | restore | decode | text | text by Jelly (before) | fetch (restore, decode, text) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))


def producer_log(data: Path, patches: int) -> Path:
    """A file of ``patches`` patches of ``examples/producer.py``, written if missing."""
    sys.path.insert(0, str(ROOT / "examples"))
    from producer import produce  # examples/producer.py

    data.mkdir(parents=True, exist_ok=True)
    log, done = data / f"one-{patches}.jellyp", data / f"one-{patches}.done"
    if not done.exists():
        log.unlink(missing_ok=True)
        produce(log, count=patches, rate=0, rotate=patches)
        done.write_text("written\n")
    return log


if __name__ == "__main__":
    main()
