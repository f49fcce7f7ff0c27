"""A ``sparql+http`` target applying a log and loading a base, against the baselines of the same run.

    .venv/bin/python -m bench.sparql_apply_bench                       # 4,000 patches, 160,000-triple base, 3 rounds
    .venv/bin/python -m bench.sparql_apply_bench --patches 500 --base-triples 20000 --rounds 1   # quick

Two measures, on each store (the Oxigraph server and Virtuoso, started fresh for each case on
loopback ports by ``tests.sparql_helpers``; a store whose program is missing is listed as not run):

- **apply**: the chained workload of ``bench.apply_workload`` (thousands of patches with ``H id``/
  ``H prev``, aborted units, blank nodes, named graphs) applied by ``patchsync.apply_file`` into
  the store, every commit group one guarded request read back (docs/decisions/0019-sparql-stores.md).
  Baseline: rdflib's own RDF Patch parser, ``Dataset().parse(format="patch")``, applying the same
  log as text in memory, measured just before each case so that both see the same machine load.
  Target: at least its rate (add/delete rows a second). Each store runs twice: exact counts
  (presence looked up where unknown) and ``counts=requested``. The store's state is checked
  against the memory target's afterwards. The note gives the client's CPU time (the store's
  share is the wall time less it) and the presence queries sent.
- **base**: ``--base-triples`` quads of ``bench.sparql_stores`` (blank nodes skolemized, 24
  graphs) written as N-Quads, converted to a Jelly base as ``patchsync snapshot`` writes one
  (outside the timing), and loaded by ``patchsync.apply.base.load_base`` through the target
  (the Graph Store Protocol in bulk, then the checkpoint). Baseline: the store's own bulk loader
  (``oxigraph load``; Virtuoso's ``ld_dir`` + ``rdf_loader_run`` + ``checkpoint``), the
  ``bulk`` case of ``bench.sparql_stores``. Target: at least half its rate.

``--rounds N`` repeats everything N times; the verdicts read the median ratio of the rounds,
printed with its spread (lowest to highest). This machine's load moves rates by 2-3x between
runs (docs/decisions/0019-sparql-stores.md, "Figures"): one round decides nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
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


def spec_of(server: SparqlServer, options: str = "") -> str:
    return f"sparql+http://127.0.0.1:{server.http_port}?layout={server.name}{options}"


def rdflib_rate(text: str, rows: int) -> float:
    from rdflib import Dataset

    start = time.perf_counter()
    Dataset().parse(data=text, format="patch")
    return rows / (time.perf_counter() - start)


def apply_rate(store: str, options: str, log: Path, rows: int, expected: frozenset[Any]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory(prefix=f"bench-apply-{store}-") as tmp, server_for(store, Path(tmp)) as server:
        target: Any = open_target(spec_of(server, options))
        cpu = time.process_time()
        start = time.perf_counter()
        apply_file(log, target)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
        same = frozenset(target.quads()) == expected
        note = (
            f"{seconds:.1f} s, client CPU {cpu:.1f} s; {target.requests:,} updates, {target.lookups:,} presence queries"
            + ("" if same else "; STATE DIFFERS from the memory target")
        )
        target.close()
        return rows / seconds, note


def write_nquads(path: Path, data: dict[str, list[tuple[str, str, str]]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for g, triples in data.items():
            out.writelines(f"{s} {p} {o} <{g}> .\n" for s, p, o in triples)


def bulk_rate(store: str, data: dict[str, list[tuple[str, str, str]]]) -> float:
    """The store's own bulk loader, triples a second."""
    total = sum(len(t) for t in data.values())
    with tempfile.TemporaryDirectory(prefix=f"bench-bulk-{store}-") as tmp:
        root = Path(tmp)
        server = server_for(store, root)
        (root / "server").mkdir()
        try:
            return total / bulk(server, data, root)
        finally:
            server.stop()


def base_rate(store: str, data: dict[str, list[tuple[str, str, str]]], fmt: str) -> float:
    """A base load through the target from an N-Quads (``nq``) or Jelly (``jelly``) file."""
    total = sum(len(t) for t in data.values())
    with tempfile.TemporaryDirectory(prefix=f"bench-base-{store}-") as tmp:
        root = Path(tmp)
        base = root / "base.nq"
        write_nquads(base, data)
        if fmt == "jelly":
            jelly = root / "base.jelly"
            subprocess.run([sys.executable, "-m", "patchsync", "convert", str(base), str(jelly)], check=True)
            base = jelly
        with server_for(store, root) as server:
            target: Any = open_target(spec_of(server))
            start = time.perf_counter()
            load_base(target, base)
            seconds = time.perf_counter() - start
            held = sum(1 for _ in target.quads())
            target.close()
            if held != total:
                raise SystemExit(f"FAIL {store}: the base load left {held:,} of {total:,} quads")
    return total / seconds


def verdict(ok: bool, text: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {text}")


def spread(values: list[float]) -> str:
    """The median, and the lowest and highest of the rounds."""
    return f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


#: The apply cases of each store: (name, URL options).
MODES = (("exact counts", ""), ("counts=requested", "&counts=requested"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--patches", type=int, default=4000)
    parser.add_argument("--base-triples", type=int, default=160_000)
    parser.add_argument("--stores", default="oxigraph,virtuoso")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="apply,base", help="apply, base or both (the default)")
    args = parser.parse_args()
    print(f"info load average at the start {load()}")
    stores = []
    for store in args.stores.split(","):
        why = missing_binaries(OXIGRAPH if store == "oxigraph" else "/usr/bin/virtuoso-t")
        if why is None:
            stores.append(store)
        else:
            print(f"info {store}: not run: {why}")
    events = workload(args.patches)
    rows = sum(1 for e in events if type(e).__name__ in ("Add", "Delete"))
    parts = args.parts.split(",")
    ratios: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sparql-apply-") as tmp:
        log = Path(tmp) / "workload.jellyp"
        save_log(events, log)
        reference = MemoryTarget()
        apply_file(log, reference)
        expected = frozenset(reference.quads())
        text = simple_text(events, for_rdflib=True)
        print(f"info {args.patches:,} chained patches, {rows:,} add/delete rows, {len(expected):,} quads at the end")
        print()
        print(
            '| round | store | counts | apply rows/s | rdflib `format="patch"` rows/s (just before) | ratio | load | note |'
        )
        print("|---|---|---|---:|---:|---:|---|---|")
        for round_ in range(1, args.rounds + 1 if "apply" in parts else 1):
            for store in stores:
                for mode, options in MODES:
                    baseline = rdflib_rate(text, rows)
                    rate, note = apply_rate(store, options, log, rows, expected)
                    ratios.setdefault((store, mode), []).append(rate / baseline)
                    print(
                        f"| {round_} | {store} | {mode} | {rate:,.0f} | {baseline:,.0f} | {rate / baseline:.2f} "
                        f"| {load()} | {note} |",
                        flush=True,
                    )
    print()
    data = statements(args.base_triples)
    total = sum(len(t) for t in data.values())
    print(f"info base: {total:,} triples in {len(data)} graphs")
    print()
    print(
        "| round | store | store's bulk load triples/s | base from N-Quads triples/s | ratio | from Jelly triples/s | ratio | load |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    base_ratios: dict[tuple[str, str], list[float]] = {}
    for round_ in range(1, args.rounds + 1 if "base" in parts else 1):
        for store in stores:
            own = bulk_rate(store, data)
            nq, jelly = base_rate(store, data, "nq"), base_rate(store, data, "jelly")
            base_ratios.setdefault((store, "N-Quads"), []).append(nq / own)
            base_ratios.setdefault((store, "Jelly"), []).append(jelly / own)
            print(
                f"| {round_} | {store} | {own:,.0f} | {nq:,.0f} | {nq / own:.2f} | {jelly:,.0f} | {jelly / own:.2f} "
                f"| {load()} |",
                flush=True,
            )
    print()
    for (store, mode), found in ratios.items():
        verdict(
            median(found) >= 1.0,
            f"{store} ({mode}): apply at {spread(found)}x rdflib's RDF Patch parser in memory (target 1.00)",
        )
    for (store, fmt), found in base_ratios.items():
        verdict(
            median(found) >= 0.5,
            f"{store}: base load from {fmt} at {spread(found)} of the store's own bulk load (target 0.50)",
        )
    print(f"info load average at the end {load()}")


if __name__ == "__main__":
    main()
