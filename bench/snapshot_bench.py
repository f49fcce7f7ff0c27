"""Starting a replica from a snapshot versus replaying the whole history (issue #15).

    .venv/bin/python -m bench.snapshot_bench                    # 2,000 patches of 100 rows
    .venv/bin/python -m bench.snapshot_bench --patches 200      # quick check

The workload is a history with churn, the case snapshots are for: ``--entities`` subjects
with two values each, and every patch replaces the values of 50 subjects (a delete and an
add per value), so the state stays at ``2 * entities`` quads while the log grows by 100
rows per patch. A primary SQLite target applies all patches but the last ``--tail``; its
snapshot is then taken. Cases, each into a fresh SQLite database, all in this run:

- **baseline: replay the whole log** — ``apply_file(full log)``.
- **snapshot** — ``write_snapshot`` of the primary (the cost paid once, on the primary).
- **base + whole log** — ``load_base(snapshot, [full log])`` then ``apply_file(full log)``:
  the log is read twice (finding the snapshot's patch, then the applier passing over what
  the snapshot holds), only the last ``--tail`` patches are applied.
- **base + the rest** — the same with a log holding only the patches after the snapshot
  (a rotated segment, or a stream read from the snapshot's sequence).

Every case's final state is checked equal to the baseline's.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchsync.apply.api import apply_file
from patchsync.apply.base import load_base
from patchsync.apply.registry import open_target
from patchsync.apply.snapshot_file import write_snapshot
from patchsync.apply.target import Target, dumpable
from patchsync.events import Add, Delete, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.terms.ntriples import NTriplesTerms
from tests.helpers import write_log

EX = "http://example.org/"


def history(first: int, count: int, entities: int) -> list[Event]:
    """Patches ``first .. first+count-1`` of the churn workload (terms as N-Triples strings)."""
    events: list[Event] = []
    for n in range(first, first + count):
        events.append(Header("id", f"<urn:bench:{n}>"))
        if n > 1:
            events.append(Header("prev", f"<urn:bench:{n - 1}>"))
        events.append(TxStart())
        for k in range(50):
            entity = ((n - 1) * 50 + k) % entities
            subject = f"<{EX}e{entity}>"
            # The patch that last set this entity's values (0: none yet).
            before = n - entities // 50 if n > entities // 50 else 0
            for prop in ("name", "size"):
                if before:
                    events.append(Delete(subject, f"<{EX}{prop}>", f'"{prop} {before}"', f"<{EX}g>"))
                events.append(Add(subject, f"<{EX}{prop}>", f'"{prop} {n}"', f"<{EX}g>"))
        events += [TxCommit(), PatchEnd()]
    return events


def timed(step: Callable[[], object]) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def fresh(work: Path, name: str) -> Target:
    return open_target(f"sqlite:///{work / name}.db")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patches", type=int, default=2000)
    parser.add_argument("--entities", type=int, default=5000)
    parser.add_argument("--tail", type=int, default=20, help="patches after the snapshot")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="snapshot_bench.") as tmp:
        work = Path(tmp)
        split = args.patches - args.tail
        nt = NTriplesTerms()
        full = write_log(work / "full.jellyp", history(1, args.patches, args.entities), adapter=nt)
        head = write_log(work / "head.jellyp", history(1, split, args.entities), adapter=nt)
        rest = write_log(work / "rest.jellyp", history(split + 1, args.tail, args.entities), adapter=nt)
        if args.entities % 50:
            parser.error("--entities must be a multiple of 50")
        rows = sum(1 for e in history(1, args.patches, args.entities) if type(e) in (Add, Delete))

        baseline = fresh(work, "baseline")
        t_replay = timed(lambda: apply_file(full, baseline))
        expected = sorted(dumpable(baseline).quads())
        baseline.close()

        primary = fresh(work, "primary")
        apply_file(head, primary)
        snap = work / "snap.jelly"
        t_snapshot = timed(lambda: write_snapshot(primary, snap))
        primary.close()

        results = [("baseline: replay the whole log", t_replay, args.patches)]
        results.append(("snapshot (on the primary)", t_snapshot, 0))
        for label, logs in (("base + whole log", [full]), ("base + the rest", [rest])):
            replica = fresh(work, label.replace(" ", "_").replace("+", ""))

            def start(replica: Target = replica, logs: list[Path] = logs) -> None:
                load_base(replica, snap, logs)
                for log in logs:
                    apply_file(log, replica)

            seconds = timed(start)
            assert sorted(dumpable(replica).quads()) == expected, label
            replica.close()
            results.append((label, seconds, args.tail))
        print(
            f"history {args.patches} patches, {rows:,} rows; state {len(expected):,} quads; "
            f"snapshot {snap.stat().st_size:,} bytes, {args.tail} patches after it"
        )
        print(f"{'case':<34}{'seconds':>9}{'patches applied':>17}{'vs baseline':>13}")
        for label, seconds, applied in results:
            print(f"{label:<34}{seconds:>9.3f}{applied:>17}{t_replay / seconds:>12.1f}x")


if __name__ == "__main__":
    main()
