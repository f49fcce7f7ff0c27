"""Run the benchmarks and write ``docs/benchmarks.md`` from their own output.

    .venv/bin/python -m bench               # every bench of the full set (hours)
    .venv/bin/python -m bench --quick       # the quick set at small sizes (minutes)
    .venv/bin/python -m bench --quick --only codec,native --out /tmp/b.md
    .venv/bin/python -m bench --list        # the benches, their arguments and what they need

Each bench is one module run as its own process (``python -m bench.NAME ARGS``), exactly as
it is run by hand; its standard output is the record. The page keeps every Markdown table a
bench prints (``| ... |`` lines) and its verdict lines (``PASS``/``FAIL``/``info``); a bench that
prints aligned text instead has that text kept verbatim. Nothing on the page is typed by hand:
the commit, the date, the machine, the load average before and after each bench, and the
exact command are written next to the figures. The build machine's absolute paths are not:
a path in the repository is written relative to it, a bench's scratch file by its name. Every bench measures its baseline in the
same process run (a ceiling, rdflib's parser, a local file, pyjelly, an older checkout), so
a figure is always read against the baseline beside it, never against another day's run.

A bench whose service is missing (PostgreSQL, NATS, Spark's Java) is listed as not run,
with the reason; ``--require`` makes that an error instead.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"
#: An absolute path in a bench's output: a slash that starts no URL, option or relative path,
#: then at least one directory.
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~$-])/(?:[\w.+-]+/)+[\w.+-]*")


@dataclass(frozen=True)
class Bench:
    """One bench: its module, its arguments for the full and the quick set, what it needs."""

    name: str
    module: str
    title: str
    baseline: str
    full: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = None  # None: not in the quick set
    needs: tuple[str, ...] = ()
    why_not_quick: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


BENCHES: tuple[Bench, ...] = (
    Bench(
        "codec",
        "bench.codec_bench",
        "Jelly-Patch codec",
        "protobuf's own parse and walk of the same frames (the ceiling), rdflib's RDF Patch parser",
        quick=("--rows", "100000"),
        notes=("Also writes the workload log `bench.tail` drains, so it runs first.",),
    ),
    Bench(
        "native",
        "bench.native_bench",
        "Compiled codec core",
        "the pure-Python codec, pyjelly's generic parser and serializer and its rdflib plugin, protobuf's ceiling",
        quick=("--statements", "50000", "--repeat", "1"),
    ),
    Bench(
        "rdf",
        "bench.rdf_bench",
        "Jelly-RDF",
        "pyjelly (generic API and rdflib plugin), rdflib's N-Triples and N-Quads, protobuf's ceiling",
        quick=("--triples", "50000"),
    ),
    Bench(
        "jena",
        "bench.jena_bench",
        "Jena RDF Binary (RDF Thrift, RDF Protobuf)",
        "N-Quads and Jelly-RDF of the same statements",
        quick=("--rows", "50000"),
    ),
    Bench(
        "apply",
        "bench.apply_bench",
        "Applier into each target",
        "each target's own bulk insert of the same rows (the ceiling), rdflib's RDF Patch parser",
        quick=("--rows", "100000"),
        needs=("postgresql",),
    ),
    Bench(
        "workload",
        "bench.apply_workload",
        "Chained-patch workload, end to end",
        'rdflib\'s `Dataset.parse(format="patch")` of the same log as text',
        full=("--workloads", "chain,small-tx,small-tx-no-pa", "--repeat", "3", "--resume-rows", "1000000"),
        quick=("--patches", "1000", "--workloads", "chain,small-tx,small-tx-no-pa"),
        needs=("postgresql",),
        notes=(
            "`chain` is the log of chained patches; `small-tx` has small transactions with prefix rows, deletes "
            "of absent quads and aborted transactions; `small-tx-no-pa` is the same log without its `PA` rows.",
            "`--baseline CHECKOUT` adds a column for an older checkout's code, run in the same rounds.",
        ),
    ),
    Bench(
        "capture",
        "bench.capture_bench",
        "Change capture",
        "the same adds into a plain rdflib Dataset",
        quick=("--adds", "50000", "--patch-size", "1000"),
    ),
    Bench(
        "startup",
        "bench.startup_bench",
        "Command start-up",
        "the same commands on an older revision (a temporary git worktree)",
        quick=("--runs", "5"),
    ),
    Bench(
        "tail",
        "bench.tail_bench",
        "Tail daemon",
        "`patchsync apply` of the same backlog",
        quick=("--rates", "10,100", "--seconds", "4", "--drain-rows", "100000"),
    ),
    Bench(
        "stream",
        "bench.stream_bench",
        "NATS stream replicas",
        "`patchsync tail` of the same patches from a local file",
        full=("--repeat", "3"),
        quick=(
            "--rates",
            "100,1000",
            "--seconds",
            "4",
            "--catchup-patches",
            "10000",
            "--catchup-rows",
            "5",
            "--repeat",
            "3",
        ),
        needs=("nats",),
    ),
    Bench(
        "grpc",
        "bench.grpc_bench",
        "gRPC door (`patchsync serve --listen`)",
        "`patchsync tail` of the local log, the same patches into a local file, `dump -o .jelly`, a server with no subscriber",
        quick=(
            "--catchup-patches",
            "2000",
            "--rates",
            "100",
            "--seconds",
            "4",
            "--stalled-rows",
            "20000",
            "--rdf-quads",
            "50000",
        ),
    ),
    Bench(
        "http",
        "bench.http_bench",
        "RDF Delta compatible HTTP door (`patchsync serve --http`)",
        "appends to the topic in process; `patchsync tail` of the local log",
        quick=("--appends", "200", "--catchup-patches", "2000", "--repeat", "1"),
    ),
    Bench(
        "feed",
        "bench.feed_bench",
        "The HTTP change feed's JSON answer (its cost, the event loop's longest stall)",
        "the same answers made as before (each term parsed again for its text, each change escaped whole on the loop)",
        quick=("--rounds", "1", "--big-kb", "300"),
    ),
    Bench(
        "serve-scale",
        "bench.serve_scale_bench",
        "`patchsync serve` on logs of a million patches (version index)",
        "a log served without its index (decoded once, as main did at every start); main's fetch decoding "
        "the segment from its first byte; `tail` of the local file; the change feed for the Delta client",
        quick=(
            "--patches",
            "20000",
            "--rotate",
            "5000",
            "--catchup",
            "5000",
            "--sync",
            "2000",
            "--fetches",
            "200",
            "--feeds",
            "20",
        ),
        notes=(
            "The logs (1,000,000 patches in 100,000-patch segments, and in one file) and their indexes are "
            "kept under `bench/out/serve_scale` and written only when missing.",
        ),
    ),
    Bench(
        "fetch-cpu",
        "bench.fetch_cpu_bench",
        "A random fetch by version's CPU in process (checkpoint restore, decoding, text)",
        "the text made as before (the patch encoded as Jelly and decoded again), in the same run; "
        "checkpoints every 128, 64 and 32 patches",
        quick=("--patches", "20000", "--fetches", "100"),
        notes=("The log (20,000 producer patches in one stream) is kept under `bench/out/fetch_cpu`.",),
    ),
    Bench(
        "nats-index",
        "bench.nats_index_bench",
        "A NATS stream topic's start-up with its id index on disk",
        "the stream read whole at the start (an index in memory; with `--main DIR`, an older checkout's dict); "
        "the first start, building the index",
        quick=("--messages", "10000"),
        needs=("nats",),
        notes=("A stream of 100,000 patches is published for the run and deleted after it.",),
    ),
    Bench(
        "serve-load",
        "bench.serve_load_bench",
        "`patchsync serve` under slow, stalled and greedy clients",
        "the same publisher and samples before the load starts",
        quick=("--seconds", "15", "--baseline-seconds", "5", "--big-patches", "20"),
        notes=(
            "256 slow HTTP clients, 64 stalled gRPC subscribers and 8 change-feed readers against one server with "
            "the default limits, while one publisher appends through each door; the load generators share the "
            "machine with the server.",
        ),
    ),
    Bench(
        "messages",
        "bench.messages_bench",
        "Reading RDF Message logs",
        "rdflib's N-Quads parser on the same statements",
        quick=("--messages", "5000", "--repeat", "1"),
    ),
    Bench(
        "ingest",
        "bench.ingest_bench",
        "Ingesting RDF Messages as patches",
        "reading the messages only; publishing the same patches from a `.jellyp` log",
        quick=("--messages", "2000", "--nats-messages", "1000"),
        needs=("nats",),
    ),
    Bench(
        "snapshot",
        "bench.snapshot_bench",
        "Starting a replica from a snapshot",
        "replaying the whole history",
        quick=("--patches", "300", "--entities", "500"),
    ),
    Bench(
        "base-load",
        "bench.base_load_bench",
        "Loading a base into SQL",
        "`--baseline CHECKOUT` for an older checkout (not in the quick run)",
        quick=("--quads", "100000", "--repeat", "1"),
        needs=("postgresql",),
    ),
    Bench(
        "sparql-stores",
        "bench.sparql_stores",
        "SPARQL stores: bulk load, Graph Store Protocol, SPARQL Update",
        "each store's own bulk loader (`oxigraph load`; Virtuoso's `ld_dir` and `rdf_loader_run`)",
        quick=("--triples", "20000", "--sizes", "1000,10000"),
        notes=(
            "Each store runs as a child process on free loopback ports; a store whose program is not installed is "
            "listed as not run in its table.",
        ),
    ),
    Bench(
        "sparql-apply",
        "bench.sparql_apply_bench",
        "A sparql+http target: apply and base load into the Oxigraph server and Virtuoso",
        "rdflib's `Dataset.parse(format=\"patch\")` of the same log in memory; each store's own bulk loader",
        quick=("--patches", "300", "--base-triples", "10000"),
        notes=(
            "Each store runs as a child process on free loopback ports, fresh for each case; a store whose program "
            "is not installed is listed as not run.",
        ),
    ),
    Bench(
        "memory",
        "bench.memory_bench",
        "Decoder memory",
        "an idle interpreter with the same imports",
        quick=("--mb", "64", "--apply-mb", "16"),
    ),
    Bench(
        "pg-statements",
        "bench.pg_statements",
        "PostgreSQL: statements against the client",
        "rdflib's parser on the same log",
        quick=("--patches", "1000", "--runs", "1"),
        needs=("postgresql",),
    ),
    Bench(
        "spark",
        "bench.spark_bench",
        "Spark replay",
        "`patchsync apply` into SQLite of one file",
        needs=("spark",),
        why_not_quick="starts JVMs and replays 10M rows",
    ),
    Bench(
        "spark-base",
        "bench.spark_base_bench",
        "Spark bases in each RDF format",
        "N-Quads read by the same source",
        needs=("spark",),
        why_not_quick="starts a JVM per format",
    ),
    Bench(
        "spark-stream",
        "bench.spark_stream_bench",
        "Spark: incremental replay and streaming lag",
        "a full replay of the same logs in the same run",
        needs=("spark",),
        why_not_quick="starts a JVM per master and streams for 30 s",
    ),
    Bench(
        "soak",
        "bench.soak_bench",
        "Soak: 1,000 patches/s for 10 minutes with kill -9",
        "the producer's own model of the state",
        needs=("postgresql",),
        why_not_quick="runs for 10 minutes by design",
    ),
    Bench(
        "scale",
        "bench.scale_bench",
        "SQL apply as tables grow",
        "the first tenth of the same log",
        needs=("postgresql",),
        why_not_quick="applies a 5M-row log, about 30 minutes",
    ),
)


# -- what the machine offers ------------------------------------------------------------------


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=1):
            return True
    except OSError:
        return False


def missing(need: str) -> str | None:
    """Why ``need`` is not available here, or None when it is."""
    if need == "postgresql":
        url = os.environ.get("PATCHSYNC_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
        return None if _reachable(url, 5432) else f"PostgreSQL is not reachable ({url})"
    if need == "nats":
        url = os.environ.get("PATCHSYNC_NATS_URL", "nats://127.0.0.1:4222")
        return None if _reachable(url, 4222) else f"NATS is not reachable ({url})"
    if need == "spark":
        try:
            import pyspark  # noqa: F401
        except ImportError:
            return "pyspark is not installed (the spark extra)"
        return None if shutil.which("java") else "no java on PATH"
    raise ValueError(need)


def git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


# -- reading a bench's output -----------------------------------------------------------------


def extract(stdout: str) -> tuple[list[list[str]], list[str]]:
    """The Markdown tables (each a list of lines) and the verdict lines of a bench's output."""
    tables: list[list[str]] = []
    verdicts: list[str] = []
    current: list[str] = []
    for raw in stdout.splitlines():
        line = raw.rstrip()
        if line.startswith("|") and line.endswith("|"):
            current.append(line)
            continue
        if current:
            tables.append(current)
            current = []
        if line.startswith(("PASS", "FAIL", "info ")):
            verdicts.append(line)
    if current:
        tables.append(current)
    return [t for t in tables if len(t) >= 3], verdicts


@dataclass
class Result:
    bench: Bench
    argv: list[str]
    status: str  # "ran", "failed", "skipped"
    reason: str = ""
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    stdout: str = ""


def run(bench: Bench, args: tuple[str, ...], timeout: float) -> Result:
    argv = ["python", "-m", bench.module, *args]
    before = load()
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", bench.module, *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return Result(bench, argv, "failed", f"timed out after {timeout:.0f} s", timeout, before, load(), out)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return Result(bench, argv, "failed", f"exit {done.returncode}: {tail}", seconds, before, load(), done.stdout)
    return Result(bench, argv, "ran", "", seconds, before, load(), done.stdout)


# -- the page ---------------------------------------------------------------------------------


def render(results: list[Result], quick: bool, started: str, load_start: str, load_end: str) -> str:
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    command = "python -m bench --quick" if quick else "python -m bench"
    out = [
        "# Benchmarks",
        "",
        f"<!-- Generated by `{command}` (bench/__main__.py). Do not edit: run it again. -->",
        "",
        f"Generated by `{command}` (`make bench` runs the full set). Every figure below is a bench's "
        "own output from this one run; each bench measures its baseline in the same run, so read a "
        "figure against the baseline beside it. The machine is shared, so absolute rates move with its "
        "load; the ratios within a table are what to compare.",
        "",
        "| | |",
        "|---|---|",
        f"| commit | `{commit}`{dirty} |",
        f"| date (UTC) | {started} |",
        f"| machine | {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()} |",
        f"| Python | {platform.python_implementation()} {platform.python_version()} |",
        f"| load average (1 / 5 / 15 min) | {load_start} at the start, {load_end} at the end |",
        f"| set | {'quick: small sizes, the long benches left out (below)' if quick else 'full'} |",
        "",
        "Why each figure is what it is, and the experiments behind the design, are in "
        "[decisions/](decisions/); the full-size figures of earlier runs are quoted there with their "
        "context. How to run one bench by hand: [bench/README.md](../bench/README.md).",
        "",
        "## Contents",
        "",
    ]
    for r in results:
        out.append(f"- [{r.bench.title}](#{anchor(r.bench.title)}) ({r.status})")
    left_out = [r for r in results if r.status != "ran"]
    if left_out:
        out += ["", "## Not run in this run", "", "| bench | command | why |", "|---|---|---|"]
        for r in left_out:
            out.append(f"| {r.bench.title} | `{shlex.join(r.argv)}` | {r.reason} |")
    for r in results:
        out += ["", f"## {r.bench.title}", ""]
        out.append(f"`{shlex.join(r.argv)}`; baseline: {r.bench.baseline}.")
        if r.status == "skipped":
            out += ["", f"Not run: {r.reason}."]
            continue
        out += [
            "",
            f"Wall time {r.seconds:.0f} s; load average {r.load_before} before, {r.load_after} after.",
        ]
        for note in r.bench.notes:
            out += ["", note]
        if r.status == "failed":
            out += ["", f"**Failed**: {r.reason}."]
        tables, verdicts = extract(r.stdout)
        for table in tables:
            out += ["", *table]
        if verdicts:
            out += ["", "```text", *verdicts, "```"]
        if not tables:
            text = [line.rstrip() for line in r.stdout.splitlines() if line.strip() and not line.startswith("[bench]")]
            if text:
                out += ["", "```text", *text[-60:], "```"]
    return relative_paths("\n".join(out) + "\n")


def relative_paths(text: str, root: Path = ROOT) -> str:
    """``text`` without the build machine's absolute paths: one in the repository ``root`` is
    written relative to it, any other (a bench's scratch folder) as its file name alone."""
    inside = f"{root}/"

    def rewrite(match: re.Match[str]) -> str:
        path = match.group(0)
        return path.removeprefix(inside) if path.startswith(inside) else path.rstrip("/").rpartition("/")[2]

    return ABSOLUTE_PATH.sub(rewrite, text)


def anchor(title: str) -> str:
    """The anchor GitHub gives a heading (lower case, punctuation dropped, spaces to dashes)."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick set, at small sizes")
    ap.add_argument("--only", default="", help="comma-separated bench names (see --list)")
    ap.add_argument("--out", type=Path, default=PAGE, help="the page to write (default docs/benchmarks.md)")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds one bench may take")
    ap.add_argument("--require", action="store_true", help="a bench whose service is missing is an error")
    ap.add_argument("--list", action="store_true", help="list the benches and exit")
    args = ap.parse_args(argv)
    if args.list:
        for b in BENCHES:
            quick = "not in --quick" if b.quick is None else shlex.join(b.quick)
            print(
                f"{b.name:14} python -m {b.module} {shlex.join(b.full)}  [quick: {quick}]  needs: {', '.join(b.needs) or '-'}"
            )
        return 0
    names = {n for n in args.only.split(",") if n}
    unknown = names - {b.name for b in BENCHES}
    if unknown:
        ap.error(f"no such bench: {', '.join(sorted(unknown))} (see --list)")
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    load_start = load()
    results: list[Result] = []
    for bench in BENCHES:
        if names and bench.name not in names:
            continue
        bench_args = bench.full if not args.quick else bench.quick
        if bench_args is None:
            argv_shown = ["python", "-m", bench.module, *bench.full]
            results.append(Result(bench, argv_shown, "skipped", f"left out of the quick run: {bench.why_not_quick}"))
            continue
        absent = next((why for why in map(missing, bench.needs) if why), None)
        if absent:
            if args.require:
                print(f"python -m bench: {bench.name}: {absent}", file=sys.stderr)
                return 2
            results.append(Result(bench, ["python", "-m", bench.module, *bench_args], "skipped", absent))
            continue
        print(f"[bench] {bench.name}: python -m {bench.module} {shlex.join(bench_args)}", file=sys.stderr, flush=True)
        result = run(bench, bench_args, args.timeout)
        print(f"[bench] {bench.name}: {result.status} in {result.seconds:.0f} s {result.reason}", file=sys.stderr)
        results.append(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, args.quick, started, load_start, load()))
    print(f"[bench] wrote {args.out}", file=sys.stderr)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
