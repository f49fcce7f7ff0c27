"""The SPARQL stores' own write rates: the baselines a ``sparql+http`` target is measured against.

    .venv/bin/python -m bench.sparql_stores                       # 160,000 triples, both stores
    .venv/bin/python -m bench.sparql_stores --triples 20000 --sizes 1000,10000   # quick check

Data: ``--triples`` statements of ``tests.workloads.rdf_data`` (every term kind, subject bursts,
23 graphs), blank nodes skolemized to ``/.well-known/genid/`` IRIs (RDF 1.1 §3.5) and the
default graph given a name (Virtuoso has no default graph of its own), so that every store and
every method writes the same quads. Each case runs on a fresh server (``tests.sparql_helpers``:
the Oxigraph server from PyPI, Virtuoso from Debian) and is timed on the wall clock from the
first request to the last answer, then checked by a count of what the store holds.

- ``bulk``: the store's own loader, the baseline: ``oxigraph load`` into the stopped store's
  directory; Virtuoso's ``ld_dir`` and ``rdf_loader_run`` then ``checkpoint`` through ``isql-vt``.
- ``gsp``: the Graph Store HTTP Protocol: Oxigraph, one POST of N-Quads to ``/store`` (one
  transaction), and the same with ``?no_transaction`` (its bulk loader behind HTTP, not
  atomic); Virtuoso, one POST of N-Triples a graph to ``/sparql-graph-crud`` (it takes no
  N-Quads nor TriG).
- ``update N``: SPARQL Update ``INSERT DATA``, requests of N triples one after another, each of
  operations of at most 4,000 triples (Virtuoso's parser refuses ~4,990 in one operation).
- ``guarded N``: the shape a target sends (decision 0019): ``DROP GRAPH`` of the guard named by
  the current checkpoint first (it fails, and so stops the request, unless the checkpoint is
  still the one read), the same ``INSERT DATA`` operations, the state graph's checkpoint
  replaced, the next guard made last, and a query reading both back after each request.

A case a store refuses (Virtuoso aborts a transaction whose log passes 50 MB, its
``TransactionAfterImageLimit``) is listed with the store's message. Findings and the figures of
the first run: docs/decisions/0019-sparql-stores.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.sparql_helpers import (
    OXIGRAPH,
    Endpoints,
    OxigraphServer,
    SparqlHttpError,
    SparqlServer,
    VirtuosoServer,
    gsp,
    http,
    missing_binaries,
    select,
    update,
)
from tests.workloads.rdf_data import generate_quads

GENID = "http://example.org/.well-known/genid/"
DEFAULT = "http://example.org/graph/default"
STATE = "urn:x-bench:checkpoint/"
CP = "urn:x-bench:log"
POS = "urn:x-bench:position"
DATA_OP = 4000

Triple = tuple[str, str, str]


def statements(count: int) -> dict[str, list[Triple]]:
    """The dataset, grouped by graph IRI, blank nodes skolemized."""

    def ground(term: str) -> str:
        return f"<{GENID}{term[2:]}>" if term.startswith("_:") else term

    graphs: dict[str, dict[Triple, None]] = defaultdict(dict)
    for s, p, o, g in generate_quads(count):
        graphs[ground(g)[1:-1] if g else DEFAULT][(ground(s), p, ground(o))] = None
    return {g: list(triples) for g, triples in graphs.items()}


def chunks(data: dict[str, list[Triple]], size: int) -> Iterator[list[tuple[str, list[Triple]]]]:
    """Requests of ``size`` triples: lists of (graph, triples) runs, graph by graph."""
    request: list[tuple[str, list[Triple]]] = []
    room = size
    for graph, triples in data.items():
        i = 0
        while i < len(triples):
            take = triples[i : i + room]
            request.append((graph, take))
            i += len(take)
            room -= len(take)
            if room == 0:
                yield request
                request, room = [], size
    if request:
        yield request


def insert_data(request: list[tuple[str, list[Triple]]]) -> list[str]:
    """``INSERT DATA`` operations of at most ``DATA_OP`` triples, one graph each."""
    return [
        f"INSERT DATA {{ GRAPH <{graph}> {{ {' '.join(f'{s} {p} {o} .' for s, p, o in triples[i : i + DATA_OP])} }} }}"
        for graph, triples in request
        for i in range(0, len(triples), DATA_OP)
    ]


def guarded(request: list[tuple[str, list[Triple]]], position: int) -> list[str]:
    """The request's operations between the guard of checkpoint ``position`` and the next checkpoint."""
    new = position + 1
    return [
        f"DROP GRAPH <{STATE}at/{position}>",
        *insert_data(request),
        f"DELETE {{ GRAPH <{STATE}> {{ <{CP}> <{POS}> ?n }} }} INSERT {{ GRAPH <{STATE}> {{ <{CP}> <{POS}> {new} }} }} "
        f"WHERE {{ GRAPH <{STATE}> {{ <{CP}> <{POS}> ?n }} }}",
        f"CREATE GRAPH <{STATE}at/{new}>",
        f"INSERT DATA {{ GRAPH <{STATE}at/{new}> {{ <{CP}> <{POS}> {new} }} }}",
    ]


def checkpoint(ep: Endpoints) -> list[int]:
    """The position the state graph holds, and the positions of the guards there are."""
    rows = select(
        ep, f"SELECT ?g ?n WHERE {{ GRAPH ?g {{ <{CP}> <{POS}> ?n }} FILTER (STRSTARTS(STR(?g), '{STATE}')) }}"
    )
    return sorted(int(r["n"]["value"]) for r in rows)


def stored(ep: Endpoints, graphs: list[str]) -> int:
    """How many triples the dataset's graphs hold."""
    values = " ".join(f"<{g}>" for g in graphs)
    rows = select(ep, f"SELECT (COUNT(*) AS ?n) WHERE {{ VALUES ?g {{ {values} }} GRAPH ?g {{ ?s ?p ?o }} }}")
    return int(rows[0]["n"]["value"])


# -- the cases: each returns the seconds it took, on a fresh server it starts ---------------------


def bulk(server: SparqlServer, data: dict[str, list[Triple]], work: Path) -> float:
    nq = work / "data.nq"
    with open(nq, "w", encoding="utf-8") as out:
        for g, triples in data.items():
            out.writelines(f"{s} {p} {o} <{g}> .\n" for s, p, o in triples)
    if isinstance(server, OxigraphServer):
        start = time.monotonic()
        subprocess.run(
            [OXIGRAPH, "load", "--location", str(server.root / "db"), "--file", str(nq)],
            check=True,
            capture_output=True,
        )
        seconds = time.monotonic() - start
        server.start()
        return seconds
    assert isinstance(server, VirtuosoServer)
    server.start()
    load_dir = server.root / "load"
    load_dir.mkdir()
    nq.rename(load_dir / "data.nq")
    start = time.monotonic()
    server.isql(f"ld_dir ('{load_dir}', '*.nq', '{DEFAULT}')")
    server.isql("rdf_loader_run ()")
    server.isql("checkpoint")
    return time.monotonic() - start


def graph_store(*, bulk_loader: bool) -> Callable[[SparqlServer, dict[str, list[Triple]], Path], float | None]:
    def case(server: SparqlServer, data: dict[str, list[Triple]], work: Path) -> float | None:
        if bulk_loader and not isinstance(server, OxigraphServer):
            return None  # only Oxigraph's /store offers its bulk loader
        server.start()
        ep = server.endpoints
        if isinstance(server, OxigraphServer):
            body = "".join(f"{s} {p} {o} <{g}> .\n" for g, triples in data.items() for s, p, o in triples).encode()
            url = f"{ep.store}?no_transaction" if bulk_loader else ep.store
            start = time.monotonic()
            http("POST", url, body, content_type="application/n-quads")  # the whole dataset: no graph named
            return time.monotonic() - start
        bodies = {g: "".join(f"{s} {p} {o} .\n" for s, p, o in triples).encode() for g, triples in data.items()}
        start = time.monotonic()
        for g, body in bodies.items():
            gsp(ep, "POST", g, body, "application/n-triples")
        return time.monotonic() - start

    return case


def updates(size: int, *, checked: bool) -> Callable[[SparqlServer, dict[str, list[Triple]], Path], float]:
    def case(server: SparqlServer, data: dict[str, list[Triple]], work: Path) -> float:
        server.start()
        ep = server.endpoints
        if checked:
            update(
                ep,
                f"INSERT DATA {{ GRAPH <{STATE}> {{ <{CP}> <{POS}> 0 }} }} ; CREATE GRAPH <{STATE}at/0> ; "
                f"INSERT DATA {{ GRAPH <{STATE}at/0> {{ <{CP}> <{POS}> 0 }} }}",
            )
        requests = [
            " ;\n".join(guarded(request, n) if checked else insert_data(request))
            for n, request in enumerate(chunks(data, size))
        ]
        start = time.monotonic()
        for n, text in enumerate(requests):
            update(ep, text)
            if checked and checkpoint(ep) != [n + 1, n + 1]:
                raise AssertionError(f"checkpoint and guard {checkpoint(ep)} after request {n + 1}")
        return time.monotonic() - start

    return case


def run_case(
    store: str, name: str, case: Callable[..., float | None], data: dict[str, list[Triple]], args: argparse.Namespace
) -> tuple[str, float | None]:
    with tempfile.TemporaryDirectory(prefix=f"bench-{store}-") as tmp:
        root = Path(tmp)
        server: SparqlServer = (
            OxigraphServer(root / "server")
            if store == "oxigraph"
            else VirtuosoServer(root / "server", buffers=args.virtuoso_buffers)
        )
        (root / "server").mkdir()
        try:
            seconds = case(server, data, root)
            if seconds is None:
                return "not offered by this store", None
            held = stored(server.endpoints, list(data))
            expected = sum(len(t) for t in data.values())
            if held != expected:
                return f"holds {held:,} of {expected:,}", None
            return "", seconds
        except SparqlHttpError as exc:
            first = " ".join(exc.body.split())[:120]
            return f"refused: HTTP {exc.status} {first}", None
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--triples", type=int, default=160_000)
    parser.add_argument("--stores", default="oxigraph,virtuoso")
    parser.add_argument("--sizes", default="1000,10000,50000", help="triples per update request")
    parser.add_argument("--virtuoso-buffers", type=int, default=100_000, help="8 KiB pages (NumberOfBuffers)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    data = statements(args.triples)
    total = sum(len(t) for t in data.values())
    print(
        f"info {total:,} triples in {len(data)} graphs; load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    cases: list[tuple[str, Callable[..., float | None]]] = [
        ("bulk (store's own loader)", bulk),
        ("Graph Store Protocol", graph_store(bulk_loader=False)),
        ("Graph Store Protocol, `no_transaction` (bulk loader, not atomic)", graph_store(bulk_loader=True)),
    ]
    cases += [(f"INSERT DATA, {n:,} a request", updates(n, checked=False)) for n in sizes]
    cases += [(f"guarded, checkpoint last, read back; {n:,} a request", updates(n, checked=True)) for n in sizes]
    print()
    print("| store | method | seconds | triples/s | of bulk load | note |")
    print("|---|---|---:|---:|---:|---|")
    for store in args.stores.split(","):
        needs = OXIGRAPH if store == "oxigraph" else "/usr/bin/virtuoso-t"
        why = missing_binaries(needs)
        if why is not None:
            print(f"| {store} | | | | | not run: {why} |")
            continue
        baseline: float | None = None
        for name, case in cases:
            note, seconds = run_case(store, name, case, data, args)
            if seconds is None:
                print(f"| {store} | {name} | | | | {note} |")
                continue
            rate = total / seconds
            baseline = baseline or rate
            print(f"| {store} | {name} | {seconds:.2f} | {rate:,.0f} | {rate / baseline:.2f} | {note} |", flush=True)
    print()
    print(f"info load average at the end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
