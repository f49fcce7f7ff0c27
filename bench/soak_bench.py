"""Load and soak: a steady producer, ``patchsync tail`` into PostgreSQL, ``kill -9`` every ~30 s.

    .venv/bin/python -m bench.soak_bench                          # 10 min at 1000 patches/s, kill every ~30 s
    .venv/bin/python -m bench.soak_bench --minutes 1 --rate 200   # a quick run
    .venv/bin/python -m bench.soak_bench --pg postgresql+psycopg://postgres@127.0.0.1:5432/test

Run it from the repository root. The method (producer, daemon, sampler, the checks at the
end) is in the docstring of :mod:`tests.workloads.soak`, the harness ``tests/test_soak.py``
also runs, CI-sized.

The PostgreSQL target is a fresh schema in the database of ``--pg`` (default: database
``test`` on 127.0.0.1), dropped at the end. It prints a table per minute (produced,
applied, lag p50/p99/max in patches and max in seconds, RSS min/max, restarts) and the
totals, and writes everything (every sample, every kill) to
``bench/out/soak-<minutes>m-<rate>.json`` (the daemon's log beside it). "Memory flat"
compares the daemon's RSS once warmed up (``--warmup`` seconds after each start) in the
first and the last minute of the kill -9 period; the longest incarnation (the catch-up)
is reported on its own. With ``--race``, a second daemon tails hard links of the same
segments in another directory (the same log under two file names: another source per
segment, the same patches) beside the first: every patch must still be applied once
(docs/design.md §3), and it must exit 0 on ``SIGTERM`` too.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.workloads.soak import drop_schema, fresh_schema, ok, report, run_soak

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _exit_on_sigterm(_signum: int, _frame: Any) -> None:
    # Unwind (stop the producer and the daemon, drop the schema) instead of dying outright.
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="producer run time (default 10)")
    parser.add_argument("--rate", type=float, default=1000.0, help="patches per second (default 1000)")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between kill -9, ±30%% (default 30)")
    parser.add_argument(
        "--pg", default=DEFAULT_PG, help=f"PostgreSQL database for a fresh schema (default {DEFAULT_PG})"
    )
    parser.add_argument("--rotate", type=int, default=10_000, help="patches per log segment (default 10000)")
    parser.add_argument("--entities", type=int, default=20_000, help="resources the patches update (default 20000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds after a start before RSS counts")
    parser.add_argument("--no-state-dir", action="store_true", help="run the daemon without --state-dir (no snapshots)")
    parser.add_argument(
        "--apply-check",
        choices=["memory", "sqlite", "none"],
        default="memory",
        help="also compare with the logs applied into MemoryTarget (default), by patchsync apply into SQLite "
        "(slow: ~500 patches/s), or not",
    )
    parser.add_argument(
        "--catch-up-timeout", type=float, default=3600.0, help="seconds the daemon may take to catch up at the end"
    )
    parser.add_argument(
        "--race",
        action="store_true",
        help="also run a second daemon on hard links of the same segments (the same patches from other sources)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    schema, url = fresh_schema(args.pg)
    try:
        with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
            print(
                f"soak: {args.rate:g} patches/s for {args.minutes:g} min, kill -9 every ~{args.kill_every:g}s, "
                f"schema {schema}, work {tmp}",
                flush=True,
            )
            result = run_soak(
                url,
                Path(tmp),
                rate=args.rate,
                seconds=args.minutes * 60,
                kill_every=args.kill_every,
                rotate=args.rotate,
                entities=args.entities,
                seed=args.seed,
                warmup=args.warmup,
                state_dir=not args.no_state_dir,
                apply_check=None if args.apply_check == "none" else args.apply_check,
                catch_up_timeout=args.catch_up_timeout,
                race=args.race,
                echo=lambda line: print(line, flush=True),
            )
            daemon_log = (Path(tmp) / "daemon.log").read_text(errors="replace")
            stem = f"soak-{args.minutes:g}m-{args.rate:g}"
            (args.out / f"{stem}-daemon.log").write_text(daemon_log)
    finally:
        drop_schema(args.pg, schema)
    for line in report(result):
        print(line)
    verdict = ok(result)
    print("PASS" if verdict else "FAIL")
    out = args.out / f"{stem}.json"
    data = result.as_dict()
    data["pass"] = verdict
    data["daemon_log_tail"] = daemon_log[-20000:]
    data["git"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    out.write_text(json.dumps(data, indent=1))
    print(f"wrote {out}")
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
