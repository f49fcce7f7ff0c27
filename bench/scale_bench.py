"""Scaling benchmark: does the apply rate hold as the target's tables grow? (issue #14)

    .venv/bin/python -m bench.scale_bench                  # 5,000,000 rows, SQLite and PostgreSQL
    .venv/bin/python -m bench.scale_bench --rows 500000    # quick check
    PATCHSYNC_BENCH_PG=postgresql+psycopg://postgres@127.0.0.1:5432/test  (default; "" skips)

One seeded log of the realistic workload (:mod:`bench.workload`: chained patches of
1,000 rows, adds and deletes, blank nodes, literals, named graphs) is written to a
``.jellyp`` file and applied with ``patchsync``'s ``apply_file`` into a fresh SQLite file
and a fresh PostgreSQL schema. The rate (statement rows per second) is measured over each
tenth of the log's rows and printed side by side; the verdict compares the last tenth with
the first (target: >= 70%). ``--baseline PATH`` runs the same measurement with the
patchsync package found at PATH (a checkout of an older revision) in a subprocess, for a
side-by-side column of the code before the change. ``--sqlite-query cache_mb=256`` (repeatable)
adds a SQLite column applied with that target URL query (patchsync's SQLite settings).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .workload import WorkloadStats, iter_events

PG_URL = os.environ.get("PATCHSYNC_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
TENTHS = 10


def write_scale_log(path: Path, rows: int) -> int:
    """Write the workload log of ``rows`` rows to ``path``; its statement rows (A and D)."""
    from patchsync.codec.patch_encoder import PatchEncoder
    from patchsync.options import PatchOptions, StatementType, StreamType

    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS)
    enc: PatchEncoder[Any] = PatchEncoder(options)
    stats = WorkloadStats()
    with open(path, "wb") as f:
        for i, event in enumerate(iter_events(rows, stats=stats)):
            enc.send(event)
            if i % 50_000 == 0:
                f.write(enc.take())
        enc.finish()
        f.write(enc.take())
    return stats.adds + stats.deletes


def measure(log: Path, url: str, statements: int) -> list[float]:
    """Rows/s over each tenth of the log's statement rows, applying ``log`` to ``url``.

    The clock is read as the applier takes the rows: it pulls events from the decoder as
    it applies them, so a tenth's time is its decoding and applying (decoding costs the
    same per row all along; only the target's share can grow with the tables).
    """
    from patchsync.apply import apply_events
    from patchsync.apply.targets.sql import SqlTarget
    from patchsync.events import Add, Delete
    from patchsync.logs.patch_logs import read_events

    marks: list[float] = []
    step = statements / TENTHS

    def timed_events(adapter: Any) -> Iterator[Any]:
        seen, next_mark = 0, step
        for event in read_events(log, adapter=adapter):
            kind = type(event)
            if kind is Add or kind is Delete:
                seen += 1
                if seen >= next_mark and len(marks) < TENTHS - 1:
                    marks.append(time.perf_counter())
                    next_mark += step
            yield event

    start = time.perf_counter()
    with SqlTarget(url) as target:
        result = apply_events(timed_events(target.adapter), target, source="scale")
    marks.append(time.perf_counter())
    assert result.rows == statements, (result.rows, statements)
    edges = [start, *marks]
    return [step / (edges[i + 1] - edges[i]) for i in range(TENTHS)]


def fresh_pg(url: str, schema: str) -> str:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine.dispose()
    return make_url(url).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)


def drop_pg(url: str, schema: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    engine.dispose()


def run_case(dialect: str, log: Path, statements: int, work: Path, query: str = "") -> list[float]:
    if dialect == "sqlite":
        db = work / f"scale-{os.getpid()}.db"
        try:
            return measure(log, f"sqlite:///{db}{query}", statements)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    schema = f"patchsync_scale_{os.getpid()}"
    try:
        return measure(log, fresh_pg(PG_URL, schema), statements)
    finally:
        drop_pg(PG_URL, schema)


def run_elsewhere(pythonpath: str, dialect: str, log: Path, statements: int, work: Path) -> list[float]:
    """The same case with the patchsync package of another checkout, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": f"{pythonpath}{os.pathsep}{Path(__file__).resolve().parent.parent}"}
    code = (
        "import json, sys; from pathlib import Path; from bench.scale_bench import run_case; "
        f"print(json.dumps(run_case({dialect!r}, Path({str(log)!r}), {statements}, Path({str(work)!r}))))"
    )
    # -P: without it ``-c`` puts the working directory (this checkout, when run from its
    # root) ahead of PYTHONPATH, and the "baseline" would import the current code.
    out = subprocess.run([sys.executable, "-P", "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return [float(x) for x in json.loads(out.strip().splitlines()[-1])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--dialects", default="sqlite,postgresql")
    ap.add_argument("--baseline", metavar="PATH", help="a checkout whose patchsync runs the baseline columns")
    ap.add_argument(
        "--log", metavar="PATH", help="keep the log here and reuse it when it exists (writing takes minutes)"
    )
    ap.add_argument(
        "--sqlite-query",
        metavar="QUERY",
        action="append",
        default=[],
        help="also apply into SQLite with this URL query, e.g. cache_mb=256 (this checkout only; repeatable)",
    )
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    log = Path(args.log) if args.log else work / "scale.jellyp"
    counted = log.with_name(log.name + ".json")
    if args.log and log.is_file() and counted.is_file():
        statements = int(json.loads(counted.read_text())["statements"])
    else:
        print(f"writing a {args.rows:,}-row log ...", flush=True)
        statements = write_scale_log(log, args.rows)
        counted.write_text(json.dumps({"rows": args.rows, "statements": statements}))
    print(f"{statements:,} statement rows, {log.stat().st_size:,} bytes", flush=True)
    columns: dict[str, list[float]] = {}
    for dialect in args.dialects.split(","):
        if dialect == "postgresql" and not PG_URL:
            continue
        print(f"applying into {dialect} ...", flush=True)
        columns[dialect] = run_case(dialect, log, statements, work)
        print(f"  {[round(r) for r in columns[dialect]]}", flush=True)
        if args.baseline:
            print(f"applying into {dialect} with the baseline ...", flush=True)
            columns[f"{dialect} (baseline)"] = run_elsewhere(args.baseline, dialect, log, statements, work)
            print(f"  {[round(r) for r in columns[f'{dialect} (baseline)']]}", flush=True)
        if dialect == "sqlite":
            for query in args.sqlite_query:
                print(f"applying into sqlite with ?{query} ...", flush=True)
                name = f"sqlite ?{query}"
                columns[name] = run_case(dialect, log, statements, work, f"?{query}")
                print(f"  {[round(r) for r in columns[name]]}", flush=True)
    if not args.log:
        log.unlink()
        counted.unlink()
    work.rmdir()
    names = list(columns)
    print()
    print(f"{'tenth':>6} " + " ".join(f"{n:>22}" for n in names) + "   (statement rows/s)")
    for i in range(TENTHS):
        print(f"{i + 1:>6} " + " ".join(f"{columns[n][i]:>22,.0f}" for n in names))
    verdict = {n: round(100 * columns[n][-1] / columns[n][0], 1) for n in names}
    print(f"{'last/first':>6} " + " ".join(f"{verdict[n]:>21}%" for n in names) + "   (target >= 70%)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"scale_bench-{args.rows}.json"
    path.write_text(json.dumps({"rows": args.rows, "statements": statements, "rates": columns}, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
