"""Where ``patchsync apply`` into PostgreSQL spends the workload's time: per statement, client, total.

    .venv/bin/python -m bench.pg_statements [--patches 4000] [--runs 3] [--workload small-tx]
    PATCHSYNC_BENCH_PG=postgresql+psycopg://postgres@127.0.0.1:5432/test  (default)

The log is issue #14's workload (:mod:`bench.apply_workload`), or another of its
``--workloads`` named by ``--workload``. Each run applies it into a
fresh schema with every psycopg ``execute``/``executemany`` timed from the call to its
return (statement wall time: sending, the server's work, the reply), and the process's
CPU time over the apply (the client's own work: decoding, the applier, building batches).
rdflib's parser on the same log runs first, for the ratio. The table shows the median run
and what the issue's 3x target leaves for the whole apply, so a bound can be read off: if
the statements alone take longer than that budget, no client-side work reaches it. When the
server runs on this machine, the CPU time of each server process the apply talked to is read
from ``/proc`` as well (the target's connection and the term dictionary's), so the client's
CPU, the server's CPU and the wall can be set side by side.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .apply_workload import PG_URL, WORKLOADS, command_pacing, fresh_spec, save_log, warm_imports
from .workload import simple_text

TARGET = 3.0


def _statement_name(query: Any) -> str:
    """The statement's verb and the first patchsync table it names ("insert ps_quads")."""
    if isinstance(query, bytes):
        text = query.decode()
    elif isinstance(query, str):
        text = query
    else:  # psycopg.sql.Composed: SQLAlchemy's catalogue queries, not the write path
        return "(composed)"
    verb = text.split(None, 1)[0].lower() if text.strip() else "?"
    if text.startswith("WITH ins AS"):
        verb = "insert-or-read"
    found = [(text.find(t), t) for t in ("ps_quads", "ps_terms", "ps_patches", "ps_sources", "ps_namespaces")]
    tables = sorted((at, t) for at, t in found if at >= 0)
    return f"{verb} {tables[0][1]}" if tables else f"{verb} (other)"


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """Seconds during which at least one of ``intervals`` (start, end) was open: statements
    on the dictionary's connection run beside those on the unit's (PostgresTerms.keys_beside),
    so their times overlap and their sum overstates the wait."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def backend_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of the server process ``pid`` so far, or None when it is
    not a process of this machine (a remote server) or has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def apply_clocks(log: Path, work: Path) -> tuple[float, float]:
    """(wall, CPU of this process) of ``patchsync apply`` of ``log`` into a fresh PostgreSQL
    schema, both over the span :func:`bench.apply_workload.apply_seconds` times: the imports
    :func:`~bench.apply_workload.warm_imports` makes are outside both."""
    from patchsync.apply import apply_file, open_target

    warm_imports(work)
    with fresh_spec("postgresql", work, "wl") as spec:
        gc.collect()
        with command_pacing():
            start, cpu = time.perf_counter(), time.process_time()
            target = open_target(spec)
            apply_file(log, target, source="workload")
            target.close()
            return time.perf_counter() - start, time.process_time() - cpu


Run = tuple[float, float, dict[str, list[float]], float, dict[int, list[float]]]


def timed_run(log: Path, work: Path) -> Run:
    """(wall, client CPU, statement name -> [count, seconds], seconds with any statement
    in flight, server process id -> [CPU at its first statement, CPU after its last]) of
    one apply into PostgreSQL."""
    import psycopg

    spent: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    intervals: list[tuple[float, float]] = []
    servers: dict[int, list[float]] = {}

    def server_cpu(cursor: Any) -> None:
        pid = cursor.connection.info.backend_pid
        now = backend_cpu(pid)
        if now is not None:
            servers.setdefault(pid, [now, now])[1] = now

    originals: dict[str, Callable[..., Any]] = {
        "execute": psycopg.Cursor.execute,
        "executemany": psycopg.Cursor.executemany,
    }

    def wrap(name: str) -> Callable[..., Any]:
        original = originals[name]

        def call(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            server_cpu(self)
            start = time.perf_counter()
            try:
                return original(self, query, *args, **kwargs)
            finally:
                end = time.perf_counter()
                entry = spent[_statement_name(query)]
                entry[0] += 1
                entry[1] += end - start
                intervals.append((start, end))
                server_cpu(self)

        return call

    for name in originals:
        setattr(psycopg.Cursor, name, wrap(name))
    try:
        wall, cpu = apply_clocks(log, work)
    finally:
        for name, original in originals.items():
            setattr(psycopg.Cursor, name, original)
    return wall, cpu, dict(spent), busy_seconds(intervals), servers


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patches", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workload", default="chain", choices=sorted(WORKLOADS))
    args = ap.parse_args(argv)
    if not PG_URL:
        print("PATCHSYNC_BENCH_PG is empty: nothing to measure")
        return 1
    work = Path(tempfile.mkdtemp(prefix="pg-statements-"))
    events = WORKLOADS[args.workload](args.patches)
    log = work / "workload.jellyp"
    save_log(events, log)
    rows = sum(1 for e in events if type(e).__name__ in ("Add", "Delete"))
    units = sum(1 for e in events if type(e).__name__ in ("TxCommit", "TxAbort"))
    text = simple_text(events, for_rdflib=True)
    from rdflib import Dataset

    gc.collect()
    start = time.perf_counter()
    Dataset().parse(data=text, format="patch")
    rdflib_seconds = time.perf_counter() - start
    runs = sorted((timed_run(log, work) for _ in range(args.runs)), key=lambda run: run[0])
    wall, cpu, spent, busy, servers = runs[len(runs) // 2]
    statements = sum(seconds for _, seconds in spent.values())
    budget = rdflib_seconds / TARGET
    print(f"{rows:,} add/delete rows; median of {args.runs} runs (walls {', '.join(f'{r[0]:.2f}' for r in runs)} s)")
    print()
    print(f"{'statement':44} {'calls':>6} {'seconds':>8}")
    for name, (count, seconds) in sorted(spent.items(), key=lambda kv: -kv[1][1]):
        if seconds >= 0.001:
            print(f"{name:44} {count:>6,.0f} {seconds:>8.3f}")
    calls = sum(count for count, _ in spent.values())
    print(f"{'all statements':44} {calls:>6,.0f} {statements:>8.3f}  ({calls / units:.2f} per TC/TA unit)")
    print()
    print(
        f"{'rdflib Dataset.parse(format=patch)':44} {'':>6} {rdflib_seconds:>8.3f}  {rows / rdflib_seconds:>9,.0f} rows/s"
    )
    print(f"{'patchsync apply -> postgresql (wall)':44} {'':>6} {wall:>8.3f}  {rows / wall:>9,.0f} rows/s")
    print(f"{'  statements (wall, server and transfer), sum':44} {'':>6} {statements:>8.3f}")
    print(f"{'  any statement in flight (overlaps once)':44} {'':>6} {busy:>8.3f}")
    print(f"{'  client CPU (decode, applier, batches)':44} {'':>6} {cpu:>8.3f}")
    used = sorted((last - first for first, last in servers.values()), reverse=True)
    if used:
        split = " + ".join(f"{seconds:.2f}" for seconds in used if seconds >= 0.005)
        print(f"{'  server CPU (its processes, from /proc)':44} {'':>6} {sum(used):>8.3f}  ({split})")
        print(f"{'  client + server CPU':44} {'':>6} {cpu + sum(used):>8.3f}  on {os.cpu_count()} cores")
    print(f"{'budget for the 3x target':44} {'':>6} {budget:>8.3f}")
    print(f"x rdflib: {rdflib_seconds / wall:.2f}; statements alone would allow at most {rdflib_seconds / busy:.2f}x")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    log.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
