"""Codec benchmark: Jelly-Patch encode/decode against the protobuf ceiling and rdflib.

Run from the repository root::

    python -m bench.codec_bench [--rows N] [--out DIR] [--repeat K] [--profile]

It prints one table with every case measured in the same run and writes the results as
JSON to ``DIR/codec_bench-<N>.json``. ``bench/README.md`` explains each case. Decode
cases and baselines run one at a time, each in a fresh child process, so that their
timings are not disturbed by the parent's million-event list (garbage collection walks
it) and so that peak RSS (``resource.getrusage``) belongs to that case alone.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import gzip
import io
import json
import os
import platform
import pstats
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DEFAULT_ROWS = 1_000_000
DEFAULT_OUT = Path("bench") / "out"
FEED_CHUNK = 1 << 20  # decoders are fed the file in 1 MiB pieces, as a file reader would
AUTO_REPEAT_BELOW = 30.0  # seconds: a case whose first run is faster is run 3 times, best kept

CONTENT_ROWS = frozenset(
    (
        "statement_add",
        "statement_delete",
        "namespace_add",
        "namespace_delete",
        "transaction_start",
        "transaction_commit",
        "transaction_abort",
        "header",
    )
)

TARGETS = {
    "decode_rows_per_s": 500_000,
    "decode_pct_of_ceiling": 40.0,
    "encode_rows_per_s": 300_000,
    "jellyp_pct_of_rdfp": 35.0,
}


# -- optional modules written elsewhere in the project -----------------------------------------


def _rdfp_module() -> Any | None:
    try:
        from patchsync.codec import rdfp
    except ImportError:
        return None
    if not (hasattr(rdfp, "write_rdfp") and hasattr(rdfp, "read_rdfp")):
        return None
    return rdfp


def _ntriples_adapter() -> Any | None:
    try:
        from patchsync.terms.ntriples import NTriplesTerms
    except ImportError:
        return None
    return NTriplesTerms()


# -- helpers ------------------------------------------------------------------------------------


def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


def split_frames(data: bytes) -> Iterator[bytes]:
    """The payloads of a delimited stream (varint length prefixes)."""
    pos, end = 0, len(data)
    while pos < end:
        size = shift = 0
        while True:
            b = data[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
        yield data[pos : pos + size]
        pos += size


def timed(fn: Callable[[], Any], repeat: int | None) -> tuple[list[float], Any]:
    """Time ``fn``: ``repeat`` runs, or (``None``) 3 runs if the first is short, else 1.

    Answers every run's seconds and the last run's result (earlier results are dropped
    before the next run, so peak memory is that of one run).
    """
    times: list[float] = []
    result: Any = None
    n = repeat or 1
    while len(times) < n:
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        if repeat is None and len(times) == 1 and times[0] < AUTO_REPEAT_BELOW:
            n = 3
    return times, result


# -- the measured operations ------------------------------------------------------------------------


def encode(events: list[Any]) -> bytes:
    from patchsync import PatchEncoder

    enc = PatchEncoder()
    send = enc.send
    for ev in events:
        send(ev)
    enc.finish()
    return enc.take()


def decode_count(data: bytes, adapter: Any = None, keep: bool = False) -> int | list[Any]:
    """Decode fully; answer the number of content rows (or, with ``keep``, the events)."""
    from patchsync import PatchDecoder

    dec = PatchDecoder(adapter)
    feed = dec.feed
    kept: list[Any] = []
    n = 0
    for start in range(0, len(data), FEED_CHUNK):
        feed(data[start : start + FEED_CHUNK])
        if keep:
            kept.extend(dec)
        else:
            for _ in dec:
                n += 1
    dec.close()
    if keep:
        kept.extend(dec)
        return kept
    for _ in dec:
        n += 1
    return n - dec.patches - 1  # minus the patch ends and the options event


def ceiling_parse(data: bytes) -> int:
    """protobuf alone: ``RdfPatchFrame.FromString`` over every frame."""
    from patchsync._proto.patch_pb2 import RdfPatchFrame

    parse = RdfPatchFrame.FromString
    n = 0
    for payload in split_frames(data):
        n += len(parse(payload).rows)
    return n


def ceiling_walk(data: bytes, leaves: bool = False) -> int:
    """Parse plus the least any decoder must touch: each row's oneof, each term's oneof.

    With ``leaves`` it also reads the scalar fields inside each term (IRI ids, literal
    lexical form and kind), which a real decoder needs as well.
    """
    from patchsync._proto.patch_pb2 import RdfPatchFrame

    parse = RdfPatchFrame.FromString
    content = CONTENT_ROWS
    n = 0
    for payload in split_frames(data):
        for row in parse(payload).rows:
            kind = row.WhichOneof("row")
            if kind in content:
                n += 1
            if kind == "statement_add" or kind == "statement_delete":
                q = getattr(row, kind)
                for oneof in ("subject", "predicate", "object", "graph"):
                    f = q.WhichOneof(oneof)
                    if f is not None:
                        v = getattr(q, f)
                        if leaves:
                            _touch_term(f, v)
            elif kind == "name" or kind == "prefix" or kind == "datatype":
                e = getattr(row, kind)
                _ = e.id, e.value
            elif kind == "header":
                h = row.header
                f = h.WhichOneof("value")
                v = getattr(h, f)
                _ = h.key
                if leaves:
                    _touch_term(f, v)
            elif kind == "namespace_add" or kind == "namespace_delete":
                ns = getattr(row, kind)
                _ = ns.name, ns.value
                f = ns.WhichOneof("graph")
                if f is not None:
                    _ = getattr(ns, f)
    return n


def _touch_term(field: str, v: Any) -> None:
    if field.endswith("_iri"):
        _ = v.prefix_id, v.name_id
    elif field.endswith("_literal"):
        k = v.WhichOneof("literalKind")
        _ = v.lex
        if k is not None:
            _ = getattr(v, k)


def literal_bytes(events: list[Any]) -> int:
    """UTF-8 bytes of the lexical forms of literal objects: what no IRI lookup can shrink."""
    from rdflib.term import Literal

    from patchsync.events import Add, Delete

    return sum(len(str(e.o).encode()) for e in events if type(e) in (Add, Delete) and isinstance(e.o, Literal))


def rdflib_parse(source: str | Path) -> int:
    """rdflib's patch parser applying ``source`` (text, or a file path) to a ``Dataset``."""
    from rdflib import Dataset

    ds = Dataset()
    if isinstance(source, Path):
        ds.parse(source=str(source), format="patch")
    else:
        ds.parse(data=source, format="patch")
    return len(ds)


# -- child processes ---------------------------------------------------------------------------------

CHILD_CASES = (
    "ceiling-parse",
    "ceiling-walk",
    "ceiling-leaves",
    "decode-rdflib",
    "decode-rdflib-keep",
    "decode-ntriples",
    "read-rdfp",
    "rdflib-parse",
)


def run_child_case(case: str, path: Path, repeat: int | None) -> dict[str, Any]:
    """Inside the child: load the input, time the case, report times, rows and peak RSS."""
    # rdflib reads the file itself (line by line, as it would in use); the others get bytes.
    data: Any = path if case == "rdflib-parse" else path.read_bytes()
    # Import everything the case needs before measuring the starting RSS.
    import patchsync
    from patchsync._proto import patch_pb2  # noqa: F401

    if case.startswith("decode-rdflib") or case in ("rdflib-parse", "read-rdfp"):
        import rdflib  # noqa: F401

        import patchsync.terms.rdflib_adapter  # noqa: F401
    if case == "ceiling-parse":
        fn: Callable[[], Any] = lambda: ceiling_parse(data)  # noqa: E731
    elif case == "ceiling-walk":
        fn = lambda: ceiling_walk(data)  # noqa: E731
    elif case == "ceiling-leaves":
        fn = lambda: ceiling_walk(data, leaves=True)  # noqa: E731
    elif case == "decode-rdflib":
        fn = lambda: decode_count(data)  # noqa: E731
    elif case == "decode-rdflib-keep":
        fn = lambda: decode_count(data, keep=True)  # noqa: E731
    elif case == "decode-ntriples":
        adapter_factory = _ntriples_adapter
        fn = lambda: decode_count(data, adapter_factory())  # noqa: E731
    elif case == "read-rdfp":
        rdfp = _rdfp_module()
        assert rdfp is not None
        fn = lambda: rdfp.read_rdfp(data)  # noqa: E731
    elif case == "rdflib-parse":
        fn = lambda: rdflib_parse(data)  # noqa: E731
    else:
        raise SystemExit(f"unknown child case {case!r}")
    gc.collect()
    rss_start = rss_mb()
    times, result = timed(fn, repeat)
    rss_peak = rss_mb()
    hwm = _vm_hwm_mb()
    if isinstance(result, list):
        from patchsync.events import CONTENT_EVENTS

        count = sum(1 for e in result if isinstance(e, CONTENT_EVENTS))
        result = None
    else:
        count = result
    return {"times": times, "count": count, "rss_start_mb": rss_start, "rss_peak_mb": rss_peak, "vm_hwm_mb": hwm}


def _vm_hwm_mb() -> float | None:
    """``VmHWM`` from /proc (Linux): this process image's own peak RSS, as a cross-check."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# Children are started by a small launcher process, itself started before the parent
# loads the workload: on Linux a child's ru_maxrss starts from the high-water mark of the
# process it was forked from (it survives exec), so forking straight from the big parent
# would report the parent's memory as the child's.
_LAUNCHER = """
import json, subprocess, sys
for line in sys.stdin:
    req = json.loads(line)
    p = subprocess.run(req["argv"], capture_output=True, text=True, cwd=req["cwd"])
    sys.stdout.write(json.dumps({"rc": p.returncode, "out": p.stdout, "err": p.stderr}) + "\\n")
    sys.stdout.flush()
"""


class Launcher:
    """Runs child processes on behalf of the parent (see ``_LAUNCHER``)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(self, argv: list[str]) -> tuple[int, str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        cwd = str(Path(__file__).resolve().parent.parent)
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": cwd}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        return reply["rc"], reply["out"], reply["err"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()


def spawn(launcher: Launcher, case: str, path: Path, repeat: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.codec_bench", "--child", case, "--child-input", str(path)]
    if repeat is not None:
        cmd += ["--repeat", str(repeat)]
    rc, out, err = launcher.run(cmd)
    if rc != 0:
        return {"error": (err.strip().splitlines() or ["failed"])[-1], "stderr": err[-4000:]}
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- workload and cache ---------------------------------------------------------------------------------


def load_workload(
    rows: int, seed: int, out: Path, log: Callable[[str], None]
) -> tuple[list[Any], dict[str, Any], Path, bytes]:
    """Events (rdflib terms), statistics, the cache path and its bytes.

    The events always come from decoding the cached ``.jellyp`` (generated, encoded and
    cached first if needed), so that every run encodes the same objects: rdflib terms as
    :class:`PatchDecoder` builds them, where equal terms often share one object through
    the decoder's caches. Generated terms share less, which would make a first run's
    encode timing differ from the reruns'.
    """
    from bench.workload import GENERATOR_VERSION, generate

    stem = f"workload-{rows}-s{seed}-g{GENERATOR_VERSION}"
    cache = out / f"{stem}.jellyp"
    meta = out / f"{stem}.json"
    if not (cache.exists() and meta.exists()):
        log(f"workload: generating {rows:,} rows (seed {seed}) ...")
        t0 = time.perf_counter()
        generated, st = generate(rows, seed)
        stats = st.as_dict()
        stats["generation_seconds"] = round(time.perf_counter() - t0, 2)
        cache.write_bytes(encode(generated))
        meta.write_text(json.dumps(stats, indent=2))
        del generated
        gc.collect()
        log(f"workload: generated in {stats['generation_seconds']} s, cached as {cache}")
    t0 = time.perf_counter()
    cached = cache.read_bytes()
    events = decode_count(cached, keep=True)
    assert isinstance(events, list)
    stats = json.loads(meta.read_text())
    stats["source"] = f"{cache.name}"
    log(f"workload: {rows:,} rows decoded from {cache} ({time.perf_counter() - t0:.1f} s)")
    return events, stats, cache, cached


def rdflib_accepts(text: str) -> str | None:
    """``None`` if rdflib's patch parser reads ``text``, else its complaint."""
    try:
        rdflib_parse(text)
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return None


def sample_for_rdflib(text: str, limit: int = 3000) -> str:
    """The first lines of ``text`` plus every line that is not a statement (PA, PD, H...)."""
    lines = text.splitlines(keepends=True)
    head = lines[:limit]
    rest = [ln for ln in lines[limit:] if not ln.startswith(("A ", "D "))]
    return "".join(head + rest)


VARIANT_CHANGES = (
    "'Z .' segment rows removed, a namespace IRI added to 'PD name .' rows and the graph term dropped "
    "from PA/PD rows (rdflib 7's parser knows no Z row and splits PA/PD rows into exactly three tokens)"
)


def rdflib_variant(text: str) -> str:
    """``text`` rewritten so that rdflib 7's patch parser reads it (see ``VARIANT_CHANGES``)."""
    from bench.workload import PREFIXES

    namespaces = dict(PREFIXES)
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("Z ") or line.rstrip() == "Z .":
            continue
        if line.startswith(("PA ", "PD ")):
            tokens = line.split()
            name = tokens[1].strip('"')
            if line.startswith("PA "):
                line = f"PA {tokens[1]} {tokens[2]} .\n"
            else:
                line = f"PD {tokens[1]} <{namespaces.get(name, 'urn:x-unknown-prefix')}> .\n"
        out.append(line)
    return "".join(out)


# -- table ---------------------------------------------------------------------------------------


def fmt_int(n: float | None) -> str:
    return "" if n is None else f"{round(n):,}"


def render_table(rows: list[dict[str, Any]]) -> str:
    headers = ["case", "rows", "runs", "seconds", "rows/s", "% ceiling / ratio", "MB"]
    body: list[list[str]] = []
    for r in rows:
        if r.get("section"):
            body.append([f"-- {r['section']} --", "", "", "", "", "", ""])
            continue
        body.append(
            [
                r["case"],
                fmt_int(r.get("rows")),
                "" if r.get("runs") is None else str(r["runs"]),
                "" if r.get("seconds") is None else f"{r['seconds']:.3f}",
                fmt_int(r.get("rows_per_s")),
                r.get("rel", ""),
                "" if r.get("mb") is None else f"{r['mb']:.1f}",
            ]
        )
    widths = [max(len(headers[i]), *(len(b[i]) for b in body)) for i in range(len(headers))]
    left = {0}

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i in left else c.rjust(widths[i]) for i, c in enumerate(cells)).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(b) if not b[0].startswith("-- ") else b[0] for b in body]
    return "\n".join(out)


# -- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows_n: int = args.rows
    repeat: int | None = args.repeat

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    import google.protobuf
    import rdflib
    from google.protobuf.internal import api_implementation

    from bench.workload import simple_text
    from patchsync.events import CONTENT_EVENTS

    launcher = Launcher()  # before the workload makes this process big
    fingerprint = source_fingerprint()
    events, stats, cache, cached = load_workload(rows_n, args.seed, out, log)
    content = sum(1 for e in events if isinstance(e, CONTENT_EVENTS))
    assert content == rows_n, (content, rows_n)
    table: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    notes: list[str] = []

    # 2. encode
    log("encode ...")
    times, data = timed(functools.partial(encode, events), repeat)
    enc_best = min(times)
    results["encode"] = {"times": times, "bytes": len(data)}
    table.append({"section": "encode (in this process, events held in memory)"})
    table.append(
        {
            "case": "encode events -> .jellyp (PatchEncoder.send)",
            "rows": rows_n,
            "runs": len(times),
            "seconds": enc_best,
            "rows_per_s": rows_n / enc_best,
            "mb": len(data) / 1e6,
        }
    )
    if cached != data:
        notes.append("the encoder's output differs from the cached file (encoder changed?): cache rewritten")
        cache.write_bytes(data)

    # Text forms.
    rdfp = _rdfp_module()
    if rdfp is not None:
        log("write .rdfp (patchsync.codec.rdfp.write_rdfp) ...")
        times, text = timed(functools.partial(rdfp.write_rdfp, events), repeat)
        results["write_rdfp"] = {"times": times}
        table.append(
            {
                "case": "write events -> .rdfp text (write_rdfp)",
                "rows": rows_n,
                "runs": len(times),
                "seconds": min(times),
                "rows_per_s": rows_n / min(times),
                "mb": len(text.encode()) / 1e6,
            }
        )
        text_source = "patchsync.codec.rdfp.write_rdfp"
    else:
        text = simple_text(events)
        text_source = "bench.workload.simple_text (rdfp.py not available yet)"
        notes.append("patchsync.codec.rdfp is not available: the .rdfp text comes from the bench's own minimal writer")
    lexical_bytes = literal_bytes(events)
    del events
    gc.collect()
    text_bytes = text.encode("utf-8")
    rdfp_path = out / f"{cache.stem}.rdfp"
    rdfp_path.write_bytes(text_bytes)
    rdfp_gz = gzip.compress(text_bytes, compresslevel=6)
    jelly_gz = gzip.compress(data, compresslevel=6)

    # 6. rdflib's parser: our text as is, or a variant it accepts.
    rdflib_path = rdfp_path
    if not args.no_rdflib:
        complaint = rdflib_accepts(sample_for_rdflib(text))
        if complaint is not None:
            log(f"rdflib's patch parser rejects our text ({complaint}); writing a variant it accepts")
            variant, how = rdflib_variant(text), "our .rdfp text with " + VARIANT_CHANGES
            still = rdflib_accepts(sample_for_rdflib(variant))
            if still is not None:
                variant_events = decode_count(data, keep=True)
                assert isinstance(variant_events, list)
                variant = simple_text(variant_events, for_rdflib=True)
                how = "the bench's own minimal writer (for_rdflib=True), as rewriting our text was not enough"
                del variant_events
                still = rdflib_accepts(sample_for_rdflib(variant))
                if still is not None:
                    raise SystemExit(f"rdflib's patch parser rejects even the variant text: {still}")
            rdflib_path = out / f"{cache.stem}.rdflib.rdfp"
            rdflib_path.write_text(variant, encoding="utf-8")
            notes.append(
                f"rdflib's patch parser rejects our .rdfp text ({complaint}), so it parses a variant: {how} "
                f"({len(variant.encode()) / 1e6:.1f} MB); its rows/s counts the same {rows_n:,} rows"
            )
            del variant
    del text, text_bytes
    gc.collect()

    # 3, 4, 6, 7: decode cases in child processes.
    jelly_path = cache
    child_specs: list[tuple[str, str, Path, int]] = [
        ("ceiling-parse", "ceiling: protobuf FromString per frame", jelly_path, rows_n),
        ("ceiling-walk", "ceiling: parse + WhichOneof/getattr walk", jelly_path, rows_n),
        ("ceiling-leaves", "(info) parse + walk + term leaf fields", jelly_path, rows_n),
        ("decode-rdflib", "decode .jellyp -> rdflib terms", jelly_path, rows_n),
    ]
    if _ntriples_adapter() is not None:
        child_specs.append(("decode-ntriples", "decode .jellyp -> N-Triples strings", jelly_path, rows_n))
    else:
        notes.append("patchsync.terms.ntriples is not available: no NTriplesTerms decode case")
    child_specs.append(("decode-rdflib-keep", "decode .jellyp -> rdflib terms, events kept", jelly_path, rows_n))
    if rdfp is not None:
        child_specs.append(("read-rdfp", "read .rdfp -> rdflib terms (read_rdfp)", rdfp_path, rows_n))
    if not args.no_rdflib:
        child_specs.append(("rdflib-parse", "baseline: rdflib Dataset.parse(format=patch)", rdflib_path, rows_n))

    child_results: dict[str, dict[str, Any]] = {}
    for case, _label, path, _n in child_specs:
        log(f"{case} (child process) ...")
        child_results[case] = spawn(launcher, case, path, repeat)
        if "error" in child_results[case]:
            log(f"  {case} failed: {child_results[case]['error']}")
    results["children"] = child_results
    launcher.close()

    ceiling = child_results["ceiling-walk"]
    ceiling_best = min(ceiling["times"]) if "times" in ceiling else None
    table.append({"section": "decode (each case in a fresh child process; MB = its peak RSS)"})
    for case, label, _path, n in child_specs:
        r = child_results[case]
        if "error" in r:
            table.append({"case": f"{label}: FAILED ({r['error'][:60]})", "rows": n})
            continue
        best = min(r["times"])
        rel = ""
        if ceiling_best is not None and case not in ("ceiling-parse", "ceiling-walk"):
            rel = f"{100 * ceiling_best / best:.1f}%"
        elif case == "ceiling-walk":
            rel = "100% (ceiling)"
        if (
            r["count"] is not None
            and case != "rdflib-parse"
            and r["count"] != n
            and not case.startswith("ceiling-parse")
        ):
            notes.append(f"{case}: counted {r['count']} content rows, expected {n}")
        table.append(
            {
                "case": label,
                "rows": n,
                "runs": len(r["times"]),
                "seconds": best,
                "rows_per_s": n / best,
                "rel": rel,
                "mb": r["rss_peak_mb"],
            }
        )
    table.append({"section": "sizes (rel = size / .rdfp size)"})
    rdfp_size = rdfp_path.stat().st_size
    for label, size in (
        (".jellyp", len(data)),
        (f".rdfp ({'write_rdfp' if rdfp is not None else 'bench text writer'})", rdfp_size),
        (".rdfp.gz (gzip -6)", len(rdfp_gz)),
        ("(info) .jellyp.gz (gzip -6)", len(jelly_gz)),
        ("(info) literal lexical forms, UTF-8", lexical_bytes),
    ):
        table.append({"case": label, "rows": rows_n, "rel": f"{100 * size / rdfp_size:.1f}%", "mb": size / 1e6})
    table.append({"case": ".jellyp vs .rdfp.gz", "rel": f"{len(data) / len(rdfp_gz):.2f}x"})

    # Targets.
    dec = child_results.get("decode-rdflib", {})
    dec_rate = rows_n / min(dec["times"]) if "times" in dec else None
    dec_pct = 100 * ceiling_best / min(dec["times"]) if "times" in dec and ceiling_best else None
    checks = [
        (
            "decode to rdflib terms >= 500k rows/s",
            dec_rate,
            TARGETS["decode_rows_per_s"],
            f"{fmt_int(dec_rate)} rows/s",
            True,
        ),
        ("decode >= 40% of the ceiling", dec_pct, TARGETS["decode_pct_of_ceiling"], f"{dec_pct or 0:.1f}%", True),
        (
            "encode >= 300k rows/s",
            rows_n / enc_best,
            TARGETS["encode_rows_per_s"],
            f"{fmt_int(rows_n / enc_best)} rows/s",
            True,
        ),
        (
            ".jellyp <= 35% of .rdfp",
            100 * len(data) / rdfp_size,
            TARGETS["jellyp_pct_of_rdfp"],
            f"{100 * len(data) / rdfp_size:.1f}%",
            False,
        ),
    ]
    target_lines = []
    target_json = {}
    for label, value, target, shown, higher in checks:
        ok = value is not None and (value >= target if higher else value <= target)
        target_lines.append(f"  [{'PASS' if ok else 'FAIL'}] {label}: {shown}")
        target_json[label] = {"value": value, "target": target, "pass": ok}

    if source_fingerprint() != fingerprint:
        notes.append(
            "patchsync modules used here changed while the benchmark ran: cases may have measured different code"
        )
    env = {
        "patchsync_sources": fingerprint,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "protobuf": google.protobuf.__version__,
        "protobuf_backend": api_implementation.Type(),
        "rdflib": rdflib.__version__,
        "git": _git_describe(),
    }
    runs_note = (
        f"runs: best of {repeat}"
        if repeat
        else f"runs: best of 3 when the first run takes < {AUTO_REPEAT_BELOW:.0f} s, else 1 run"
    )
    fixed_notes = [
        f"rows = content rows (H, TX, TC, A, D, PA, PD: one per .rdfp line), {stats.get('patches')} patches; "
        f"rows/s of every case uses the same row count. {runs_note}.",
        "% ceiling = ceiling time / case time, the ceiling being protobuf's parse plus a bare oneof walk "
        "of the same .jellyp in the same conditions.",
        "decoders are fed 1 MiB chunks and every event is consumed (and dropped, except 'events kept').",
        f".rdfp text from {text_source}.",
    ]
    if not args.no_rdflib:
        fixed_notes.append(
            "the rdflib baseline applies the patch to an in-memory rdflib Dataset (its parser cannot produce "
            "events); its time includes the store updates, as rdflib's parser is used in practice."
        )
    print()
    print(
        f"patchsync codec benchmark: {rows_n:,} rows, seed {args.seed}, python {env['python']}, "
        f"protobuf {env['protobuf']} ({env['protobuf_backend']}), rdflib {env['rdflib']}, {env['cpus']} CPUs"
    )
    print(
        f"workload: {stats.get('adds'):,} A, {stats.get('deletes'):,} D, {stats.get('headers'):,} H, "
        f"{stats.get('prefix_adds')} PA, {stats.get('prefix_deletes')} PD, {stats.get('patches'):,} patches, "
        f"{stats.get('distinct_subjects'):,} subjects ({stats.get('source')})"
    )
    print()
    print(render_table(table))
    print()
    print("targets:")
    print("\n".join(target_lines))
    print()
    print("notes:")
    for n in fixed_notes + notes:
        print(f"  - {n}")
    parent_rss = rss_mb()
    print(f"  - parent process peak RSS (workload events + encode): {parent_rss:.0f} MB")

    report = {
        "rows": rows_n,
        "seed": args.seed,
        "env": env,
        "workload": stats,
        "table": [r for r in table if not r.get("section")],
        "results": results,
        "targets": target_json,
        "notes": fixed_notes + notes,
        "parent_peak_rss_mb": parent_rss,
        "sizes": {
            "jellyp": len(data),
            "rdfp": rdfp_size,
            "rdfp_gz6": len(rdfp_gz),
            "jellyp_gz6": len(jelly_gz),
            "literal_lexical_utf8": lexical_bytes,
        },
    }
    json_path = out / f"codec_bench-{rows_n}.json"
    json_path.write_text(json.dumps(report, indent=2, default=str))
    print(f"  - results written to {json_path}")
    return 0


def source_fingerprint() -> str:
    """A hash of the patchsync modules the benchmark imports, to notice edits made while it runs."""
    import hashlib

    import patchsync
    import patchsync.terms.rdflib_adapter

    _rdfp_module()
    _ntriples_adapter()
    h = hashlib.sha256()
    files = sorted({m.__file__ for name, m in list(sys.modules.items()) if name.startswith("patchsync") and m.__file__})
    root = Path(patchsync.__file__).parent
    for file in files:
        h.update(str(Path(file).relative_to(root)).encode())
        h.update(Path(file).read_bytes())
    return h.hexdigest()[:12]


def _git_describe() -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "patchsync"], capture_output=True, text=True)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


# -- profiling ---------------------------------------------------------------------------------------


def profile(args: argparse.Namespace) -> int:
    """cProfile the encoder and the decoder (rdflib terms) on the workload; top 15 by tottime."""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    events, _stats, _cache, _cached = load_workload(args.rows, args.seed, out, log)
    reports = []
    prof = cProfile.Profile()
    gc.collect()
    prof.enable()
    data = encode(events)
    prof.disable()
    reports.append(("encode (PatchEncoder.send over the events)", prof))
    del events
    gc.collect()
    adapters: list[tuple[str, Any]] = [("decode (PatchDecoder -> rdflib terms)", None)]
    nt = _ntriples_adapter()
    if nt is not None:
        adapters.append(("decode (PatchDecoder -> N-Triples strings)", nt))
    for label, adapter in adapters:
        prof = cProfile.Profile()
        gc.collect()
        prof.enable()
        decode_count(data, adapter)
        prof.disable()
        reports.append((label, prof))
    for label, prof in reports:
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.sort_stats("tottime").print_stats(15)
        text = buf.getvalue()
        # Drop pstats' preamble lines that name the (irrelevant) profile file.
        text = "\n".join(ln for ln in text.splitlines() if ln.strip())
        print(f"\n=== {label}: {args.rows:,} rows, top 15 by tottime ===")
        print(text)
        name = label.split(" ")[0] + ("-nt" if "N-Triples" in label else "")
        prof.dump_stats(str(out / f"profile-{name}-{args.rows}.prof"))
        (out / f"profile-{name}-{args.rows}.txt").write_text(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.codec_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="content rows in the workload (default 1,000,000)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output and cache directory (default bench/out)")
    ap.add_argument("--seed", type=int, default=None, help="workload seed")
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs per case, best kept (default: 3 if the first run takes < 30 s, else 1)",
    )
    ap.add_argument("--no-rdflib", action="store_true", help="skip the rdflib parser baseline")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="instead of the table, cProfile encoder and decoder and print the top 15 by tottime",
    )
    ap.add_argument("--child", choices=CHILD_CASES, help=argparse.SUPPRESS)
    ap.add_argument("--child-input", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.out = args.out.resolve()
    if args.child:
        print(json.dumps(run_child_case(args.child, args.child_input, args.repeat)))
        return 0
    if args.seed is None:
        from bench.workload import DEFAULT_SEED

        args.seed = DEFAULT_SEED
    if args.rows < 4:
        ap.error("--rows must be at least 4")
    if args.profile:
        return profile(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
