"""Apply benchmark: each target against its own ceiling, on one seeded log, side by side.

    .venv/bin/python -m bench.apply_bench                  # 1,000,000 rows
    .venv/bin/python -m bench.apply_bench --rows 100000    # quick check
    .venv/bin/python -m bench.apply_bench --workload --baseline CHECKOUT   # issue #14's table
    PATCHSYNC_BENCH_PG=postgresql+psycopg://postgres@127.0.0.1:5432/test  (default; "" skips)

Rates are statement rows (A and D) per second. Apply cases take events decoded beforehand
(decoding is the codec benchmark's business) and run with atomicity on: units, undo
logs or transactions, checkpoints and patch records, exactly as ``patchsync apply``.
Ceilings do the same data changes through the store's own calls, with no units, counts or
checkpoints:

* rdflib Memory: ``Store.add``/``Store.remove`` per quad;
* Oxigraph: ``Store.extend`` per run of adds, ``Store.remove`` per delete;
* SQLite / PostgreSQL: a plain ``executemany`` INSERT of every statement row's four
  N-Triples strings into an unindexed table, through the same driver;
* rdflib's ``format="patch"`` parser reads the same log as RDF Patch text into a Dataset
  (a baseline, not a ceiling). ``end-to-end`` decodes the .jellyp file too.

Every case runs with the collector paced as the ``patchsync`` command paces it
(:func:`patchsync.cli.common.paced_collector`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchsync.apply import apply_events, apply_stream
from patchsync.cli.common import paced_collector
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.events import Add, Delete
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms

from .workload import generate, simple_text

PG_URL = os.environ.get("PATCHSYNC_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def decode(data: bytes, adapter: Any) -> list[Any]:
    d: PatchDecoder[Any] = PatchDecoder(adapter)
    d.feed(data)
    d.close()
    return list(d)


def statements(events: list[Any]) -> int:
    return sum(1 for e in events if type(e) is Add or type(e) is Delete)


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    # Every case, ceilings included, under the collector pacing of the ``patchsync`` command:
    # the ratios compare the work of the applier, not of CPython's collector.
    with paced_collector():
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start


# -- ceilings ------------------------------------------------------------------------


def rdflib_ceiling(events: list[Any]) -> None:
    from rdflib import Dataset

    ds = Dataset()
    store = ds.store
    contexts: dict[Any, Any] = {}
    for e in events:
        kind = type(e)
        if kind is Add or kind is Delete:
            ctx = contexts.get(e.g)
            if ctx is None:
                ctx = contexts[e.g] = ds.get_context(e.g)
            if kind is Add:
                store.add((e.s, e.p, e.o), ctx)
            else:
                store.remove((e.s, e.p, e.o), ctx)


def oxigraph_ceiling(events: list[Any], path: Path) -> None:
    import pyoxigraph as ox

    store = ox.Store(str(path))
    batch: list[Any] = []
    for e in events:
        kind = type(e)
        if kind is Add:
            batch.append(ox.Quad(e.s, e.p, e.o, e.g))
        elif kind is Delete:
            if batch:
                store.extend(batch)
                batch = []
            store.remove(ox.Quad(e.s, e.p, e.o, e.g))
    if batch:
        store.extend(batch)
    store.flush()


def sql_ceiling(url: str, events: list[Any]) -> None:
    """Every statement row's four strings, bulk-inserted into an unindexed table."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    mark = "%s" if engine.dialect.name == "postgresql" else "?"
    rows = [(e.g or "", e.s, e.p, e.o) for e in events if type(e) is Add or type(e) is Delete]
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS bench_plain")
        conn.exec_driver_sql("CREATE TABLE bench_plain (g text, s text, p text, o text)")
    with engine.begin() as conn:
        for i in range(0, len(rows), 5000):
            conn.exec_driver_sql(f"INSERT INTO bench_plain VALUES ({mark}, {mark}, {mark}, {mark})", rows[i : i + 5000])
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE bench_plain")
    engine.dispose()


def sql_schema_ceiling(url: str, events: list[Any]) -> None:
    """The same rows bulk-inserted into patchsync's own indexed schema, no applier.

    This is the storage ceiling: what the indexes cost with no units, savepoints,
    counts or checkpoints (adds and deletes both inserted, as in the plain ceiling).
    """
    from patchsync.apply.targets.sql import SqlTarget

    target = SqlTarget(url)
    quads = [e[:4] for e in events if type(e) is Add or type(e) is Delete]
    target.begin()
    for i in range(0, len(quads), 5000):
        keys = [k for k in target.terms.keys(quads[i : i + 5000], create=True) if k is not None]
        target.writes.execute(target.sql.insert_quads, keys)
    assert target._tx is not None
    target._tx.commit()
    target._tx = None
    target.close()


def fresh_pg(url: str) -> str:
    """A fresh schema on the benchmark database."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS patchsync_bench CASCADE")
        conn.exec_driver_sql("CREATE SCHEMA patchsync_bench")
    engine.dispose()
    return make_url(url).update_query_dict({"options": "-csearch_path=patchsync_bench"}).render_as_string(False)


def drop_pg(url: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP SCHEMA IF EXISTS patchsync_bench CASCADE")
    engine.dispose()


# -- main ----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--no-rdflib-parser", action="store_true")
    ap.add_argument(
        "--workload",
        action="store_true",
        help="print the workload table of issue #14 instead (bench.apply_workload; its flags follow)",
    )
    args, rest = ap.parse_known_args(argv)
    if args.workload:
        from . import apply_workload

        return apply_workload.main(["--out", args.out, *rest])
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="apply-bench-"))
    results: list[dict[str, Any]] = []

    def record(case: str, rows: int, seconds: float, ceiling: str | None = None) -> None:
        entry = {"case": case, "rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds)}
        if ceiling is not None:
            base = next(r for r in results if r["case"] == ceiling)
            entry["of_ceiling"] = round(100 * base["seconds"] / seconds, 1)
        results.append(entry)
        pct = f"  {entry['of_ceiling']:5.1f}% of ceiling" if "of_ceiling" in entry else ""
        print(f"{case:38} {rows:>9,} rows {seconds:8.2f} s {entry['rows_per_s']:>10,} rows/s{pct}", flush=True)

    print(f"generating {args.rows:,} rows ...", flush=True)
    events, _stats = generate(args.rows)
    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS)
    enc: PatchEncoder[Any] = PatchEncoder(options)
    for e in events:
        enc.send(e)
    enc.finish()
    data = enc.take()
    text = simple_text(events, for_rdflib=True) if not args.no_rdflib_parser else ""
    del events, enc
    log = work / "log.jellyp"
    log.write_bytes(data)

    # rdflib Memory.
    from rdflib import Dataset

    from patchsync.apply.targets.rdflib_store import RdflibTarget
    from patchsync.terms.rdflib_adapter import RdflibTerms

    ev_rd = decode(data, RdflibTerms())
    n = statements(ev_rd)
    record("rdflib Memory: store add/remove", n, timed(lambda: rdflib_ceiling(ev_rd)))
    record(
        "rdflib Memory: patchsync apply",
        n,
        timed(lambda: apply_events(ev_rd, RdflibTarget(Dataset()))),
        "rdflib Memory: store add/remove",
    )
    ev_rd.clear()

    # Oxigraph.
    try:
        from patchsync.apply.targets.oxigraph import OxigraphTarget, OxigraphTerms

        ev_ox = decode(data, OxigraphTerms())
        record("Oxigraph: extend/remove", n, timed(lambda: oxigraph_ceiling(ev_ox, work / "ox-ceiling")))

        def ox_apply() -> None:
            t = OxigraphTarget(work / "ox-apply")
            apply_events(ev_ox, t)
            t.close()

        record("Oxigraph: patchsync apply", n, timed(ox_apply), "Oxigraph: extend/remove")
        ev_ox.clear()
    except ImportError:
        print("pyoxigraph not installed: Oxigraph skipped")

    # SQL.
    from patchsync.apply.targets.sql import SqlTarget

    ev_nt = decode(data, NTriplesTerms())
    sqlite_ceiling_url = f"sqlite:///{work / 'ceiling.db'}"
    record("SQLite: executemany INSERT", n, timed(lambda: sql_ceiling(sqlite_ceiling_url, ev_nt)))

    def sqlite_apply() -> None:
        with SqlTarget(f"sqlite:///{work / 'apply.db'}") as t:
            apply_events(ev_nt, t, source="bench")

    record("SQLite: patchsync apply", n, timed(sqlite_apply), "SQLite: executemany INSERT")
    record(
        "SQLite: same schema, bulk INSERT",
        n,
        timed(lambda: sql_schema_ceiling(f"sqlite:///{work / 'schema.db'}", ev_nt)),
    )
    results[-2]["of_schema_ceiling"] = round(100 * results[-1]["seconds"] / results[-2]["seconds"], 1)
    print(f"{'':38} SQLite apply = {results[-2]['of_schema_ceiling']}% of the same-schema bulk insert")

    def sqlite_e2e() -> None:
        with SqlTarget(f"sqlite:///{work / 'e2e.db'}") as t, open(log, "rb") as f:
            apply_stream(f, t, "jellyp", source="bench")

    record("SQLite: end-to-end from .jellyp", n, timed(sqlite_e2e))
    if PG_URL:
        try:
            url = fresh_pg(PG_URL)
            record("PostgreSQL: executemany INSERT", n, timed(lambda: sql_ceiling(url, ev_nt)))

            def pg_apply() -> None:
                with SqlTarget(url) as t:
                    apply_events(ev_nt, t, source="bench")

            record("PostgreSQL: patchsync apply", n, timed(pg_apply), "PostgreSQL: executemany INSERT")
            url = fresh_pg(PG_URL)
            record("PostgreSQL: same schema, executemany", n, timed(lambda: sql_schema_ceiling(url, ev_nt)))
            results[-2]["of_schema_ceiling"] = round(100 * results[-1]["seconds"] / results[-2]["seconds"], 1)
            print(f"{'':38} PostgreSQL apply = {results[-2]['of_schema_ceiling']}% of the same-schema insert")
            drop_pg(PG_URL)
        except Exception as exc:  # the server is optional for a benchmark run
            print(f"PostgreSQL skipped: {exc}")
    ev_nt.clear()

    if text:

        def rdflib_parser() -> None:
            Dataset().parse(data=text, format="patch")

        record("rdflib format=patch parser (text)", n, timed(rdflib_parser))

    shutil.rmtree(work, ignore_errors=True)
    path = out / f"apply_bench-{args.rows}.json"
    path.write_text(json.dumps({"rows": args.rows, "results": results}, indent=2))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
