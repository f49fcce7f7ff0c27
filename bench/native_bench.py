"""The compiled codec core (issue #13) side by side with the pure codec, pyjelly and protobuf.

Run from the repository root::

    .venv/bin/python -m bench.native_bench                   # 200,000 statements
    .venv/bin/python -m bench.native_bench --statements 50000

One dataset (:mod:`tests.workloads.rdf_data`: every RDF 1.1 term kind, subject bursts) is written
twice: as a Jelly-RDF stream (patchsync's encoder) and as a Jelly-Patch stream of ``A``
rows in patches of 1,000. Every case decodes the same bytes in this process, so the
figures compare like with like:

* the ceiling: protobuf alone parses every frame and visits every row's and term's oneof,
  building nothing (the least a decoder through generated messages can cost);
* patchsync's decoders on the compiled core and on the pure-Python codec
  (``PurePatchDecoder`` / ``PureRdfDecoder``, what ``PATCHSYNC_PURE=1`` selects), to rdflib
  terms (``FastRdflibTerms``) and to N-Triples strings;
* pyjelly's generic parser and both rdflib plugins, parsing and serializing (Jelly-RDF;
  pyjelly reads no Jelly-Patch, so its Jelly-RDF parse of the same statements is the
  baseline of the Jelly-Patch decode too); the plugins serialize one rdflib ``Graph``
  holding the dataset, built before the cases;
* encoding: patchsync's encoders from rdflib terms on the compiled core and on the pure
  code (``PureRdfEncoder`` / ``PurePatchEncoder``), and pyjelly's generic serializer from its
  own term objects (Jelly-RDF), each writing the whole dataset.

Each case runs ``--repeat`` times in its own forked child (best kept, CPU time, which a
loaded machine disturbs less than wall time); the load average is printed with the table.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from bench.rdf_bench import _ceiling as rdf_ceiling
from patchsync._proto.patch_pb2 import RdfPatchFrame
from patchsync.codec import backend
from patchsync.codec.framing import Framer
from patchsync.codec.nquads import read_statements
from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder, PurePatchEncoder
from patchsync.codec.rdf_decoder import PureRdfDecoder, RdfDecoder
from patchsync.codec.rdf_encoder import PureRdfEncoder, RdfEncoder, encode_statements
from patchsync.events import Add, LogicalType, PatchEnd, PhysicalType, RdfOptions
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.terms.rdflib_fast import FastRdflibTerms
from tests.workloads.rdf_data import generate_quads

# Targets of issue #13: (label, case, baseline case, minimum ratio).
TARGETS = [
    ("Jelly-RDF decode to rdflib terms >= 3x pyjelly generic", "rdf native -> rdflib", "rdf pyjelly generic", 3.0),
    # pyjelly reads no Jelly-Patch: its generic parser of the same statements as Jelly-RDF.
    ("Jelly-Patch decode to rdflib terms >= 3x pyjelly generic", "patch native -> rdflib", "rdf pyjelly generic", 3.0),
    ("Jelly-RDF decode to N-Triples >= 1.5x ceiling", "rdf native -> N-Triples", "rdf ceiling", 1.5),
    ("Jelly-Patch decode to N-Triples >= 1.5x ceiling", "patch native -> N-Triples", "patch ceiling", 1.5),
    ("rdflib plugin parse >= 1.5x pyjelly plugin", "rdf patchsync plugin", "rdf pyjelly plugin", 1.5),
    ("Jelly-RDF encode >= 3x pyjelly generic serializer", "rdf native encode", "rdf pyjelly serialize", 3.0),
    (
        "rdflib plugin serialize >= 1.5x pyjelly plugin",
        "rdf patchsync plugin serialize",
        "rdf pyjelly plugin serialize",
        1.5,
    ),
]


def frames(data: bytes) -> list[bytes]:
    framer = Framer()
    framer.feed(data)
    framer.close()
    out = []
    while (item := framer.next_frame()) is not None:
        out.append(item[1])
    return out


def patch_ceiling(payloads: list[bytes]) -> int:
    """protobuf alone: parse each frame, visit each row's and each term's oneof."""
    parse = RdfPatchFrame.FromString
    n = 0
    for payload in payloads:
        for row in parse(payload).rows:
            kind = row.WhichOneof("row")
            if kind == "statement_add":
                q = row.statement_add
                q.WhichOneof("subject")
                q.WhichOneof("predicate")
                q.WhichOneof("object")
                n += 1
    return n


def decode(cls: Any, adapter: Any, data: bytes) -> int:
    decoder = cls(adapter)
    decoder.feed(data)
    decoder.close()
    n = 0
    for _ in decoder:
        n += 1
    return n


def encode_rdf(cls: Any, terms: list[tuple[Any, Any, Any]], options: RdfOptions) -> int:
    encoder = cls(options, RdflibTerms())
    statement = encoder.statement
    size = 0
    for s, p, o in terms:
        statement(s, p, o, None)
        if encoder.pending_bytes() >= 1 << 20:
            size += len(encoder.take())
    encoder.finish()
    return size + len(encoder.take())


def encode_patch(cls: Any, terms: list[tuple[Any, Any, Any]]) -> int:
    encoder = cls(PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES), RdflibTerms())
    add = encoder.add
    size = 0
    for i, (s, p, o) in enumerate(terms, 1):
        add(s, p, o)
        if i % 1000 == 0:
            encoder.end_patch()
            size += len(encoder.take())
    encoder.end_patch()
    encoder.finish()
    return size + len(encoder.take())


def store_only(terms: list[tuple[Any, Any, Any]]) -> None:
    """What any rdflib parser pays rdflib's store for the same triples, decoding nothing:
    the bound of the plugin parse ratio."""
    from rdflib import Graph

    graph = Graph()
    graph.store.addN((s, p, o, graph) for s, p, o in terms)


def run_case(fn: Callable[[], Any], repeat: int) -> float:
    """Best CPU time of ``repeat`` runs, in a forked child so that no case inherits the
    garbage (and the collector's work) of the cases before it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, exit without running the parent's cleanup
        os.close(read)
        best = float("inf")
        for _ in range(repeat):
            gc.collect()
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        os.write(write, repr(best).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        result = pipe.read()
    os.waitpid(pid, 0)
    return float(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--statements", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n = args.statements
    if backend.native() is None:
        print("the compiled core is not built (or PATCHSYNC_PURE is set): 'native' cases run pure Python")

    from pyjelly.integrations.generic.parse import parse_jelly_flat
    from pyjelly.integrations.generic.serialize import flat_stream_to_file
    from rdflib import Graph

    text = "".join(f"{s} {p} {o} .\n" for s, p, o, _ in generate_quads(n, quads=False))
    terms = [(s, p, o) for s, p, o, _ in read_statements(text, RdflibTerms())]
    options = RdfOptions(physical_type=PhysicalType.TRIPLES, logical_type=LogicalType.FLAT_TRIPLES)
    jelly = encode_statements(((s, p, o, None) for s, p, o in terms), options, RdflibTerms())
    encoder = PatchEncoder(PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES))
    for i, (s, p, o) in enumerate(terms, 1):
        encoder.send(Add(s, p, o))
        if i % 1000 == 0:
            encoder.send(PatchEnd())
    encoder.send(PatchEnd())
    encoder.finish()
    jellyp = encoder.take()
    del text
    pj_statements = list(parse_jelly_flat(io.BytesIO(jelly)))
    patch_frames = frames(jellyp)
    nt = NTriplesTerms()
    graph = Graph()
    for triple in terms:
        graph.add(triple)

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("rdf ceiling", lambda: rdf_ceiling(jelly)),
        ("rdf pyjelly generic", lambda: sum(1 for _ in parse_jelly_flat(io.BytesIO(jelly)))),
        ("rdf pure -> rdflib", lambda: decode(PureRdfDecoder, FastRdflibTerms(), jelly)),
        ("rdf native -> rdflib", lambda: decode(RdfDecoder, FastRdflibTerms(), jelly)),
        ("rdf pure -> N-Triples", lambda: decode(PureRdfDecoder, nt, jelly)),
        ("rdf native -> N-Triples", lambda: decode(RdfDecoder, nt, jelly)),
        ("rdf pyjelly plugin", lambda: Graph().parse(data=jelly, format="jelly")),
        ("rdf patchsync plugin", lambda: Graph().parse(data=jelly, format="patchsync-jelly")),
        ("rdf rdflib store only", lambda: store_only(terms)),
        ("rdf pyjelly plugin serialize", lambda: graph.serialize(destination=io.BytesIO(), format="jelly")),
        ("rdf patchsync plugin serialize", lambda: graph.serialize(destination=io.BytesIO(), format="patchsync-jelly")),
        ("patch ceiling", lambda: patch_ceiling(patch_frames)),
        ("patch pure -> rdflib", lambda: decode(PurePatchDecoder, FastRdflibTerms(), jellyp)),
        ("patch native -> rdflib", lambda: decode(PatchDecoder, FastRdflibTerms(), jellyp)),
        ("patch pure -> N-Triples", lambda: decode(PurePatchDecoder, nt, jellyp)),
        ("patch native -> N-Triples", lambda: decode(PatchDecoder, nt, jellyp)),
        ("rdf pyjelly serialize", lambda: flat_stream_to_file(iter(pj_statements), io.BytesIO())),
        ("rdf pure encode", lambda: encode_rdf(PureRdfEncoder, terms, options)),
        ("rdf native encode", lambda: encode_rdf(RdfEncoder, terms, options)),
        ("patch pure encode", lambda: encode_patch(PurePatchEncoder, terms)),
        ("patch native encode", lambda: encode_patch(PatchEncoder, terms)),
    ]
    seconds: dict[str, float] = {}
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("pyjelly", "rdflib", "protobuf"))
    print(f"{n:,} statements; Jelly-RDF {len(jelly):,} B, Jelly-Patch {len(jellyp):,} B; load {os.getloadavg()}")
    print(versions)
    print("| case | CPU s | statements/s |\n|---|---:|---:|")
    for name, fn in cases:
        seconds[name] = run_case(fn, args.repeat)
        print(f"| {name} | {seconds[name]:.3f} | {n / seconds[name]:,.0f} |", flush=True)
    print(f"\nload average after the run: {os.getloadavg()}")
    failed = 0
    for label, case, baseline, minimum in TARGETS:
        ratio = seconds[baseline] / seconds[case]
        failed += ratio < minimum
        print(f"{'PASS' if ratio >= minimum else 'FAIL'}  {label}: {ratio:.2f}x")
    # The plugins' parse shares rdflib's store with pyjelly's: with decoding free, ours could
    # be at most this much faster.
    bound = seconds["rdf pyjelly plugin"] / seconds["rdf rdflib store only"]
    print(f"info  plugin parse bound (pyjelly plugin / rdflib store alone): {bound:.2f}x")
    both = seconds["rdf rdflib store only"] + seconds["rdf native -> rdflib"]
    best = seconds["rdf pyjelly plugin"] / both
    print(f"info  plugin parse with nothing but store + compiled decode: {best:.2f}x")
    for kind in ("rdf", "patch"):
        for out in ("rdflib", "N-Triples"):
            ratio = seconds[f"{kind} pure -> {out}"] / seconds[f"{kind} native -> {out}"]
            print(f"info  {kind} native vs pure -> {out}: {ratio:.2f}x")
        ratio = seconds[f"{kind} pure encode"] / seconds[f"{kind} native encode"]
        print(f"info  {kind} encode native vs pure: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
