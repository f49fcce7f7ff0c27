"""RDF Binary benchmark: RDF Thrift and RDF Protobuf vs Jelly-RDF and N-Quads, in one run.

Run from the repository root::

    .venv/bin/python -m bench.jena_bench                  # 200,000 statements
    .venv/bin/python -m bench.jena_bench --rows 50000     # quick check

Every case works on the same generated dataset (:mod:`tests.workloads.rdf_data`: every RDF 1.1 term
kind, subject bursts, half of the statements in named graphs). Read cases decode bytes
that were written once before timing into rdflib terms (the fast adapter, the same one in
every patchsync case); write cases start from rdflib terms already in memory. The RDF
Binary streams declare the dataset's namespaces first, so the RDF Thrift/Protobuf writers
use prefixed names where one matches (as Jena's Thrift writer does). A *row* is one
statement; prefix rows and Jelly lookup entries are not counted.

Each case runs once by default (``--repeat`` for more, best kept); results and the
machine's load go to ``bench/out/jena_bench-N.json``.
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

from patchsync.codec import jena
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import encode_statements as encode_jelly
from patchsync.events import LogicalType, PhysicalType, RdfOptions, Statement
from patchsync.terms.ntriples import format_term
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.terms.rdflib_fast import FastRdflibTerms
from tests.workloads.rdf_data import _NAMESPACES, generate_quads

JELLY_OPTIONS = RdfOptions(physical_type=PhysicalType.QUADS, logical_type=LogicalType.FLAT_QUADS)


def _count(decoder: Any, data: bytes) -> int:
    decoder.feed(data)
    decoder.close()
    n = 0
    for event in decoder:
        if type(event) is Statement:
            n += 1
    return n


def _write_nquads(adapter: RdflibTerms, quads: list[tuple[Any, Any, Any, Any]]) -> int:
    out = io.StringIO()
    for s, p, o, g in quads:
        graph = "" if g is None else " " + format_term(adapter, g)
        out.write(f"{format_term(adapter, s)} {format_term(adapter, p)} {format_term(adapter, o)}{graph} .\n")
    return len(out.getvalue())


def _time(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    args = parser.parse_args(argv)
    n = args.rows
    args.out.mkdir(parents=True, exist_ok=True)

    from rdflib import Dataset, URIRef

    print(f"generating {n:,} statements ...", flush=True)
    nq_text = "".join(f"{s} {p} {o}{'' if g is None else ' ' + g} .\n" for s, p, o, g in generate_quads(n))
    nq_bytes = nq_text.encode("utf-8")
    adapter = RdflibTerms()
    quads = read_statements(nq_text, adapter)
    del nq_text
    namespaces = [(f"ns{i}", URIRef(iri)) for i, iri in enumerate(_NAMESPACES)]
    thrift = jena.encode_statements("rt", quads, adapter, namespaces=namespaces)
    protobuf = jena.encode_statements("rpb", quads, adapter, namespaces=namespaces)
    jelly = encode_jelly(quads, JELLY_OPTIONS, adapter)
    dataset = Dataset()
    dataset.parse(data=nq_bytes, format="nquads")
    sizes = {
        "RDF Thrift": len(thrift),
        "RDF Protobuf": len(protobuf),
        "Jelly-RDF": len(jelly),
        "N-Quads": len(nq_bytes),
    }
    print("bytes: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()), flush=True)

    results: list[dict[str, Any]] = []

    def case(group: str, fmt: str, name: str, fn: Callable[[], Any]) -> None:
        seconds = _time(fn, args.repeat)
        results.append(
            {"group": group, "format": fmt, "case": name, "seconds": seconds, "rows_per_second": n / seconds}
        )
        print(f"  {group:5} {fmt:12} {name:44} {seconds:7.2f} s {n / seconds:11,.0f} rows/s", flush=True)

    fast = FastRdflibTerms
    print("read:", flush=True)
    case("read", "RDF Thrift", "patchsync RdfThriftDecoder", lambda: _count(jena.RdfThriftDecoder(fast()), thrift))
    case(
        "read",
        "RDF Protobuf",
        "patchsync RdfProtobufDecoder",
        lambda: _count(jena.RdfProtobufDecoder(fast()), protobuf),
    )
    case("read", "Jelly-RDF", "patchsync RdfDecoder", lambda: _count(RdfDecoder(fast()), jelly))
    case(
        "read", "N-Quads", "patchsync codec.nquads.read_statements", lambda: read_statements(nq_bytes.decode(), fast())
    )
    case("read", "N-Quads", "rdflib Dataset.parse", lambda: Dataset().parse(data=nq_bytes, format="nquads"))

    print("write:", flush=True)
    case(
        "write",
        "RDF Thrift",
        "patchsync RdfThriftEncoder",
        lambda: jena.encode_statements("rt", quads, adapter, namespaces=namespaces),
    )
    case(
        "write",
        "RDF Protobuf",
        "patchsync RdfProtobufEncoder",
        lambda: jena.encode_statements("rpb", quads, adapter, namespaces=namespaces),
    )
    case("write", "Jelly-RDF", "patchsync RdfEncoder", lambda: encode_jelly(quads, JELLY_OPTIONS, adapter))
    case("write", "N-Quads", "patchsync terms.ntriples.format_term", lambda: _write_nquads(adapter, quads))
    case(
        "write",
        "N-Quads",
        "rdflib Dataset.serialize",
        lambda: dataset.serialize(io.BytesIO(), format="nquads", encoding="utf-8"),
    )

    print("\n| format | bytes | read rows/s | write rows/s |\n|---|---:|---:|---:|")
    for fmt, size in sizes.items():
        best = {
            group: max(r["rows_per_second"] for r in results if r["group"] == group and r["format"] == fmt)
            for group in ("read", "write")
        }
        print(f"| {fmt} | {size:,} | {best['read']:,.0f} | {best['write']:,.0f} |")
    print("\n| group | format | case | seconds | rows/s |\n|---|---|---|---:|---:|")
    for r in results:
        print(f"| {r['group']} | {r['format']} | {r['case']} | {r['seconds']:.2f} | {r['rows_per_second']:,.0f} |")
    record = {
        "rows": n,
        "bytes": sizes,
        "results": results,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / f"jena_bench-{n}.json").write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
