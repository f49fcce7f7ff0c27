"""Starting a replica from a base (``--base FILE``): ``load_base`` of a large Jelly-RDF file
into a fresh SQL target, with the code before side by side.

    .venv/bin/python -m bench.base_load_bench --baseline /path/to/old/checkout
    .venv/bin/python -m bench.base_load_bench --quads 200000 --repeat 1   # quick check

The base (seeded, built here once per size in ``--out``): ``--quads`` statements of
``tests.workloads.rdf_data`` (every term kind, named and default graphs, subject bursts), encoded as
Jelly-RDF. Each case loads it into a fresh SQLite database or PostgreSQL schema, opening
and migrating the target on the clock; module imports are outside it. Each case runs in a
fresh process; ``--baseline PATH`` runs it again with the patchsync package of PATH (a
detached worktree of main, say). Rounds alternate the two checkouts, so a drift in the
machine's speed falls on both; the table shows medians.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

CASES = ("sqlite", "postgresql")
#: The checkout this module belongs to.
HERE = Path(__file__).resolve().parent.parent


def write_base(path: Path, quads: int) -> None:
    from patchsync.codec.rdf_encoder import encode_statements
    from patchsync.terms.ntriples import NTriplesTerms
    from tests.workloads.rdf_data import generate_quads

    path.write_bytes(encode_statements(generate_quads(quads), None, NTriplesTerms()))


def load_seconds(case: str, base: Path, work: Path) -> list[float]:
    """[seconds, quads loaded] of ``load_base`` of ``base`` into a fresh target of kind ``case``."""
    # Imported here, after in_checkout put the checkout measured first on the path.
    from bench.apply_workload import fresh_spec, warm_imports
    from patchsync.apply import open_target
    from patchsync.apply.base import load_base

    warm_imports(work)
    with fresh_spec(case, work, "bl") as spec:
        start = time.perf_counter()
        target = open_target(spec)
        report = load_base(target, base)
        target.close()
        return [time.perf_counter() - start, float(report.quads)]


def in_checkout(checkout: str, call: str) -> Any:
    """Evaluate ``call`` over this module with the patchsync of ``checkout``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    # This module is imported from here (a baseline's checkout may not have it), then the
    # checkout goes first on the path for patchsync, which nothing imported yet.
    code = (
        "import json, sys; from pathlib import Path; from bench.base_load_bench import *;"
        f"assert 'patchsync' not in sys.modules; sys.path.insert(0, {checkout!r}); print(json.dumps({call}))"
    )
    # -P: keep the working directory off sys.path, so the baseline imports its own patchsync.
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quads", type=int, default=1_000_000)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated: sqlite,postgresql")
    ap.add_argument("--baseline", metavar="PATH", help="a checkout whose patchsync runs the baseline column")
    ap.add_argument("--repeat", type=int, default=3, metavar="N", help="rounds of every case, reported as medians")
    ap.add_argument("--out", default="bench/out")
    args = ap.parse_args(argv)
    from bench.apply_workload import PG_URL

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / f"base-{args.quads}.jelly"
    if not base.exists():
        print(f"writing a base of {args.quads:,} quads ...", flush=True)
        write_base(base, args.quads)
    work = Path(tempfile.mkdtemp(prefix="base-load-"))
    cases = [c for c in CASES if c in args.cases.split(",") and (c != "postgresql" or PG_URL)]
    checkouts = [("current", str(HERE))] + ([("baseline", args.baseline)] if args.baseline else [])
    seconds: dict[tuple[str, str], list[float]] = {}
    loaded = 0.0
    for r in range(args.repeat):
        for case in cases:
            # Alternate which checkout goes first, so neither always follows the other.
            order = checkouts if r % 2 == 0 else checkouts[::-1]
            for name, checkout in order:
                took, loaded = in_checkout(
                    checkout, f"load_seconds({case!r}, Path({str(base)!r}), Path({str(work)!r}))"
                )
                seconds.setdefault((case, name), []).append(took)
                print(f"  round {r + 1}: {case} {name}: {took:.2f} s, {loaded / took:,.0f} quads/s", flush=True)
    print()
    print(f"load_base of {base.stat().st_size:,} bytes, {loaded:,.0f} quads; medians of {args.repeat} rounds")
    print(f"{'target':12} {'seconds':>9} {'quads/s':>10} {'baseline s':>11} {'quads/s':>10} {'speed-up':>9}")
    report: dict[str, Any] = {"quads": loaded, "seconds": {f"{c}/{n}": v for (c, n), v in seconds.items()}}
    for case in cases:
        new = median(seconds[(case, "current")])
        old = median(seconds[(case, "baseline")]) if args.baseline else None
        old_cols = f"{old:>11.2f} {loaded / old:>10,.0f} {old / new:>8.2f}x" if old else f"{'-':>11} {'-':>10} {'-':>9}"
        print(f"{case:12} {new:>9.2f} {loaded / new:>10,.0f} {old_cols}")
    (out / "base_load_bench.json").write_text(json.dumps(report, indent=2))
    for leftover in work.glob("*"):
        leftover.unlink()
    work.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
