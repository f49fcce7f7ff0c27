"""Start-up time of each command, against a baseline tree, in one run.

Run from the repository root::

    .venv/bin/python -m bench.startup_bench                      # baseline: the commit before the layout work
    .venv/bin/python -m bench.startup_bench --baseline REV --runs 15

Each command is started ``--runs`` times with this checkout first on ``PYTHONPATH`` and
then with a ``git worktree`` of ``REV`` (made in a temporary folder and removed after), and
the median wall time of each is printed side by side. The commands work on a small log
made from ``examples/library.rdfp`` in a temporary folder, and ``status``/``dump`` on a
``file:state.nq`` target holding 2,000 quads applied from a log there (``status`` needs only
its sidecar); none touches a SQL target except the last row, which is there for comparison
(SQLAlchemy and Alembic load there by design).
Target (issue #16): every command that does not touch a SQL target starts in < 0.25 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "6fd62af"  # main before the layout redesign (issue #12)

COMMANDS: list[tuple[str, list[str]]] = [
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    ("inspect log.jellyp", ["inspect", "log.jellyp"]),
    ("convert jellyp -> rdfp", ["convert", "log.jellyp", "out.rdfp"]),
    ("status --target file:", ["status", "--target", "file:state.nq"]),
    ("dump --target file:", ["dump", "--target", "file:state.nq"]),
    ("status --target sqlite: (SQL)", ["status", "--target", "sqlite:///state.db"]),
]


def _time(tree: Path, args: list[str], cwd: Path, runs: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "patchsync", *args], cwd=cwd, env=env, capture_output=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: patchsync {' '.join(args)} failed: {done.stderr.decode()[-300:]}")
    return statistics.median(times)


def _file_target(work: Path, tree: Path, quads: int = 2000) -> None:
    """``state.nq`` and its sidecar in ``work``: ``quads`` statements applied from one patch."""
    ex = "http://example.org/"
    rows = [f'A <{ex}s{i % 211}> <{ex}p{i % 7}> "value {i}"@en <{ex}g{i % 3}> .' for i in range(quads)]
    (work / "state.rdfp").write_text("H id <urn:startup:1> .\n" + "\n".join(rows) + "\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", "--no-progress", "state.rdfp", "--target", "file:state.nq"],
        cwd=work,
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision to compare with (default {BASELINE})")
    parser.add_argument("--runs", type=int, default=11, help="starts per command and tree (median kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work, base = Path(tmp) / "work", Path(tmp) / "baseline"
        work.mkdir()
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline], check=True,
                       capture_output=True)  # fmt: skip
        try:
            subprocess.run(
                [sys.executable, "-m", "patchsync", "convert", str(ROOT / "examples" / "library.rdfp"), "log.jellyp"],
                cwd=work,
                check=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            # Each tree reads targets it wrote itself (a newer checkpoint format is not the
            # baseline's to read); status refuses a SQLite file that does not exist.
            base_work = Path(tmp) / "baseline-work"
            shutil.copytree(work, base_work)
            for tree, folder in ((ROOT, work), (base, base_work)):
                _file_target(folder, tree)
                subprocess.run(
                    [sys.executable, "-m", "patchsync", "apply", "log.jellyp", "--target", "sqlite:///state.db"],
                    cwd=folder,
                    check=True,
                    capture_output=True,
                    env={**os.environ, "PYTHONPATH": str(tree)},
                )
            load = os.getloadavg()[0]
            print(
                f"start-up, median of {args.runs} runs; baseline {args.baseline}; load {load:.2f}; {os.cpu_count()} cores"
            )
            print(f"{'command':32} {'baseline s':>11} {'now s':>8} {'speed-up':>9}  < 0.25 s")
            for label, command in COMMANDS:
                before = _time(base, command, base_work, args.runs)
                after = _time(ROOT, command, work, args.runs)
                sql = "(SQL)" in label
                verdict = "n/a" if sql else ("yes" if after < 0.25 else "NO")
                print(f"{label:32} {before:11.3f} {after:8.3f} {before / after:8.2f}x  {verdict}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
