"""Jelly-RDF benchmark: patchsync vs pyjelly vs rdflib's N-Triples/N-Quads, in one run.

Run from the repository root::

    .venv/bin/python -m bench.rdf_bench                  # 1,000,000 triples
    .venv/bin/python -m bench.rdf_bench --triples 50000  # quick check

Every case works on the same generated dataset (:mod:`tests.workloads.rdf_data`: every RDF 1.1 term
kind, realistic subject bursts) in the default graph, so the N-Quads baseline reads the
same statements as the N-Triples one. Parse cases read the same ``.jelly`` file (written by
patchsync; pyjelly reads it too, which the interop tests check); serialize cases start from
terms already in memory. The ceiling is what the protobuf runtime alone costs: parse every
frame and visit every row and term oneof, building nothing.

Each case runs once by default (``--repeat`` for more, best kept); the machine's load is
recorded with the results in ``bench/out/rdf_bench-N.json``.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from patchsync._proto import rdf_pb2
from patchsync.codec.framing import Framer
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import encode_statements
from patchsync.events import LogicalType, PhysicalType, RdfOptions, Statement
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.terms.rdflib_fast import FastRdflibTerms
from tests.workloads.rdf_data import generate_quads


def _ceiling(data: bytes) -> int:
    framer = Framer()
    framer.feed(data)
    framer.close()
    n = 0
    parse = rdf_pb2.RdfStreamFrame.FromString
    while (item := framer.next_frame()) is not None:
        for row in parse(item[1]).rows:
            if row.WhichOneof("row") == "triple":
                t = row.triple
                t.WhichOneof("subject")
                t.WhichOneof("predicate")
                t.WhichOneof("object")
                n += 1
    return n


def _ours_decode(adapter: Any, data: bytes) -> int:
    decoder: RdfDecoder[Any] = RdfDecoder(adapter)
    decoder.feed(data)
    decoder.close()
    n = 0
    for event in decoder:
        if type(event) is Statement:
            n += 1
    return n


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--triples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    n = args.triples
    args.out.mkdir(parents=True, exist_ok=True)

    from pyjelly.integrations.generic import generic_sink as pj
    from pyjelly.integrations.generic.parse import parse_jelly_flat
    from pyjelly.integrations.generic.serialize import flat_stream_to_file
    from rdflib import Dataset, Graph

    print(f"generating {n:,} triples ...", flush=True)
    nt_quads = list(generate_quads(n, quads=False))
    nt_text = "".join(f"{s} {p} {o} .\n" for s, p, o, _ in nt_quads)
    del nt_quads
    nt_bytes = nt_text.encode("utf-8")
    terms = [(s, p, o) for s, p, o, _ in read_statements(nt_text, RdflibTerms())]
    del nt_text
    options = RdfOptions(physical_type=PhysicalType.TRIPLES, logical_type=LogicalType.FLAT_TRIPLES)
    jelly = encode_statements(((s, p, o, None) for s, p, o in terms), options, RdflibTerms())
    jelly_path = args.out / f"rdf_bench-{n}.jelly"
    jelly_path.write_bytes(jelly)
    pj_statements = list(parse_jelly_flat(io.BytesIO(jelly)))
    graph = Graph()
    graph.addN((s, p, o, graph) for s, p, o in terms)
    print(
        f"dataset: {len(graph):,} distinct triples; jelly {len(jelly):,} B, n-triples {len(nt_bytes):,} B", flush=True
    )

    results: list[dict[str, Any]] = []

    def case(group: str, name: str, fn: Callable[[], Any]) -> None:
        seconds, _ = _time(fn, args.repeat)
        results.append({"group": group, "case": name, "seconds": seconds, "per_second": n / seconds})
        print(f"  {group:9} {name:48} {seconds:8.2f} s {n / seconds:12,.0f} triples/s", flush=True)

    print("parse:", flush=True)
    case("parse", "protobuf parse-and-walk (ceiling)", lambda: _ceiling(jelly))
    case("parse", "patchsync decoder -> rdflib terms", lambda: _ours_decode(FastRdflibTerms(), jelly))
    case("parse", "patchsync decoder -> rdflib terms (RdflibTerms)", lambda: _ours_decode(RdflibTerms(), jelly))
    case("parse", "patchsync rdflib plugin (Graph.parse)", lambda: Graph().parse(data=jelly, format="patchsync-jelly"))
    case("parse", "pyjelly generic API (parse_jelly_flat)", lambda: sum(1 for _ in parse_jelly_flat(io.BytesIO(jelly))))
    case("parse", "pyjelly rdflib plugin (Graph.parse)", lambda: Graph().parse(data=jelly, format="jelly"))
    case("parse", "rdflib N-Triples (Graph.parse)", lambda: Graph().parse(data=nt_bytes, format="nt"))
    case("parse", "rdflib N-Quads (Dataset.parse)", lambda: Dataset().parse(data=nt_bytes, format="nquads"))

    print("serialize:", flush=True)
    case(
        "serialize",
        "patchsync encoder <- rdflib terms",
        lambda: encode_statements(((s, p, o, None) for s, p, o in terms), options, RdflibTerms()),
    )
    case(
        "serialize",
        "patchsync rdflib plugin (Graph.serialize)",
        lambda: graph.serialize(io.BytesIO(), format="patchsync-jelly"),
    )
    case(
        "serialize",
        "pyjelly generic API (flat_stream_to_file)",
        lambda: flat_stream_to_file(iter(pj_statements), io.BytesIO()),
    )
    case("serialize", "pyjelly rdflib plugin (Graph.serialize)", lambda: graph.serialize(io.BytesIO(), format="jelly"))
    case(
        "serialize",
        "rdflib N-Triples (Graph.serialize)",
        lambda: graph.serialize(io.BytesIO(), format="nt", encoding="utf-8"),
    )
    case(
        "serialize",
        "rdflib N-Quads (Dataset.serialize)",
        lambda: Dataset(store=graph.store).serialize(io.BytesIO(), format="nquads", encoding="utf-8"),
    )
    del pj

    def rate(group: str, name: str) -> float:
        return next(r["per_second"] for r in results if r["group"] == group and r["case"].startswith(name))

    targets = {
        "parse to rdflib terms >= 2x pyjelly generic API": rate("parse", "patchsync decoder -> rdflib terms")
        / rate("parse", "pyjelly generic API"),
        "serialize >= 2x pyjelly generic API": rate("serialize", "patchsync encoder")
        / rate("serialize", "pyjelly generic API"),
        "serialize (rdflib plugin) >= 2x pyjelly rdflib plugin": rate("serialize", "patchsync rdflib plugin")
        / rate("serialize", "pyjelly rdflib plugin"),
    }
    print("\n| group | case | seconds | triples/s |\n|---|---|---:|---:|")
    for r in results:
        print(f"| {r['group']} | {r['case']} | {r['seconds']:.2f} | {r['per_second']:,.0f} |")
    print()
    for label, ratio in targets.items():
        print(f"{'PASS' if ratio >= 2 else 'FAIL'}  {label}: {ratio:.2f}x")
    record = {
        "triples": n,
        "jelly_bytes": len(jelly),
        "nt_bytes": len(nt_bytes),
        "results": results,
        "targets": targets,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / f"rdf_bench-{n}.json").write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
