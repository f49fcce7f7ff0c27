"""A ``sparql+http`` target applying a log and loading a base, against the baselines of the same run.

    .venv/bin/python -m bench.sparql_apply_bench                       # 4,000 patches, 160,000-triple base
    .venv/bin/python -m bench.sparql_apply_bench --patches 500 --base-triples 20000   # quick

Two measures, on each store (the Oxigraph server and Virtuoso, started fresh for each case on
loopback ports by ``tests.sparql_helpers``; a store whose program is missing is listed as not run):

- **apply**: the chained workload of ``bench.apply_workload`` (thousands of patches with ``H id``/
  ``H prev``, aborted units, blank nodes, named graphs) applied by ``patchsync.apply_file`` into
  the store, every commit group one guarded request read back (docs/decisions/0019-sparql-stores.md).
  Baseline: rdflib's own RDF Patch parser, ``Dataset().parse(format="patch")``, applying the same
  log as text in memory. Target: at least its rate (add/delete rows a second). The store's state
  is checked against the memory target's afterwards.
- **base**: ``--base-triples`` quads of ``bench.sparql_stores`` (blank nodes skolemized, 24
  graphs) written as N-Quads, converted to a Jelly base as ``patchsync snapshot`` writes one
  (outside the timing), and loaded by ``patchsync.apply.base.load_base`` through the target
  (the Graph Store Protocol in bulk, then the checkpoint). Baseline: the store's own bulk loader
  (``oxigraph load``; Virtuoso's ``ld_dir`` + ``rdf_loader_run`` + ``checkpoint``), the
  ``bulk`` case of ``bench.sparql_stores``. Target: at least half its rate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.base import load_base
from patchsync.apply.registry import open_target
from tests.sparql_helpers import OXIGRAPH, OxigraphServer, SparqlServer, VirtuosoServer, missing_binaries

from .apply_workload import save_log, workload
from .sparql_stores import bulk, statements
from .workload import simple_text


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def server_for(store: str, root: Path) -> SparqlServer:
    return OxigraphServer(root / "server") if store == "oxigraph" else VirtuosoServer(root / "server")


def spec_of(server: SparqlServer) -> str:
    return f"sparql+http://127.0.0.1:{server.http_port}?layout={server.name}"


def rdflib_rate(text: str, rows: int) -> float:
    from rdflib import Dataset

    start = time.perf_counter()
    Dataset().parse(data=text, format="patch")
    return rows / (time.perf_counter() - start)


def apply_rate(store: str, log: Path, rows: int, expected: frozenset[Any]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory(prefix=f"bench-apply-{store}-") as tmp, server_for(store, Path(tmp)) as server:
        target: Any = open_target(spec_of(server))
        start = time.perf_counter()
        apply_file(log, target)
        seconds = time.perf_counter() - start
        same = frozenset(target.quads()) == expected
        note = f"{target.requests:,} update requests" + ("" if same else "; STATE DIFFERS from the memory target")
        target.close()
        return rows / seconds, note


def base_rates(store: str, data: dict[str, list[tuple[str, str, str]]]) -> tuple[float, float]:
    """(the store's bulk loader, the target's base load), triples a second."""
    total = sum(len(t) for t in data.values())
    with tempfile.TemporaryDirectory(prefix=f"bench-bulk-{store}-") as tmp:
        root = Path(tmp)
        server = server_for(store, root)
        (root / "server").mkdir()
        try:
            baseline = total / bulk(server, data, root)
        finally:
            server.stop()
    with tempfile.TemporaryDirectory(prefix=f"bench-base-{store}-") as tmp:
        root = Path(tmp)
        nq = root / "base.nq"
        with open(nq, "w", encoding="utf-8") as out:
            for g, triples in data.items():
                out.writelines(f"{s} {p} {o} <{g}> .\n" for s, p, o in triples)
        jelly = root / "base.jelly"
        subprocess.run([sys.executable, "-m", "patchsync", "convert", str(nq), str(jelly)], check=True)
        with server_for(store, root) as server:
            target: Any = open_target(spec_of(server))
            start = time.perf_counter()
            load_base(target, jelly)
            seconds = time.perf_counter() - start
            held = sum(1 for _ in target.quads())
            target.close()
            if held != total:
                raise SystemExit(f"FAIL {store}: the base load left {held:,} of {total:,} quads")
    return baseline, total / seconds


def verdict(ok: bool, text: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--patches", type=int, default=4000)
    parser.add_argument("--base-triples", type=int, default=160_000)
    parser.add_argument("--stores", default="oxigraph,virtuoso")
    args = parser.parse_args()
    print(f"info load average at the start {load()}")
    events = workload(args.patches)
    rows = sum(1 for e in events if type(e).__name__ in ("Add", "Delete"))
    with tempfile.TemporaryDirectory(prefix="bench-sparql-apply-") as tmp:
        log = Path(tmp) / "workload.jellyp"
        save_log(events, log)
        reference = MemoryTarget()
        apply_file(log, reference)
        expected = frozenset(reference.quads())
        text = simple_text(events, for_rdflib=True)
        baseline = rdflib_rate(text, rows)
        print(f"info {args.patches:,} chained patches, {rows:,} add/delete rows, {len(expected):,} quads at the end")
        print()
        print('| store | apply rows/s | rdflib `format="patch"` rows/s (same run) | ratio | note |')
        print("|---|---:|---:|---:|---|")
        ratios: dict[str, float] = {}
        for store in args.stores.split(","):
            why = missing_binaries(OXIGRAPH if store == "oxigraph" else "/usr/bin/virtuoso-t")
            if why is not None:
                print(f"| {store} | | | | not run: {why} |")
                continue
            rate, note = apply_rate(store, log, rows, expected)
            baseline = max(baseline, rdflib_rate(text, rows)) if store != "oxigraph" else baseline
            ratios[store] = rate / baseline
            print(f"| {store} | {rate:,.0f} | {baseline:,.0f} | {rate / baseline:.2f} | {note} |", flush=True)
    print()
    data = statements(args.base_triples)
    total = sum(len(t) for t in data.values())
    print(f"info base: {total:,} triples in {len(data)} graphs")
    print()
    print("| store | store's bulk load triples/s | base load through the target triples/s | ratio |")
    print("|---|---:|---:|---:|")
    base_ratios: dict[str, float] = {}
    run: list[tuple[str, Callable[[], tuple[float, float]]]] = []
    for store in args.stores.split(","):
        why = missing_binaries(OXIGRAPH if store == "oxigraph" else "/usr/bin/virtuoso-t")
        if why is not None:
            print(f"| {store} | | | not run: {why} |")
            continue
        run.append((store, lambda store=store: base_rates(store, data)))  # type: ignore[misc]
    for store, measure in run:
        own, ours = measure()
        base_ratios[store] = ours / own
        print(f"| {store} | {own:,.0f} | {ours:,.0f} | {ours / own:.2f} |", flush=True)
    print()
    for store, ratio in ratios.items():
        verdict(ratio >= 1.0, f"{store}: apply at {ratio:.2f}x rdflib's RDF Patch parser in memory (target 1.00)")
    for store, ratio in base_ratios.items():
        verdict(ratio >= 0.5, f"{store}: base load at {ratio:.2f} of the store's own bulk load (target 0.50)")
    print(f"info load average at the end {load()}")


if __name__ == "__main__":
    main()
