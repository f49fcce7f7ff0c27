"""The workload table of issue #14: ``patchsync apply`` into SQLite, PostgreSQL and ``file:``
against rdflib's RDF Patch text parser, with the code before the change side by side.

    .venv/bin/python -m bench.apply_bench --workload --baseline /path/to/old/checkout
    .venv/bin/python -m bench.apply_workload --baseline /path/to/old/checkout   # the same
    .venv/bin/python -m bench.apply_workload --cases file --baseline /path/to/old/checkout  # file: only

The log (seeded, built here): 4,000 chained patches of one to three units each, about 160k
add/delete rows; about 6% of the units are aborted transactions (``TX … TA``), 8% are rows
outside any transaction, one subject in ten is a blank node and half the rows are in one
of three named graphs; a fifth of the rows delete a quad added earlier. Every case reads
the same log from a file end to end (decoding included): ``patchsync apply`` of the
``.jellyp`` file, rdflib's ``Dataset.parse(format="patch")`` of the same log as RDF Patch
text (in memory, not atomic). Module imports are outside every clock (rdflib is imported
before its case; :func:`warm_imports` loads what opening a target loads); creating and
migrating each fresh target is on it. Each patchsync case runs in a fresh process;
``--baseline PATH`` runs it again with the patchsync package of PATH (e.g. a detached
worktree of main).

``--resume-rows N`` also measures resuming: a log of N rows is applied to SQLite, one patch
is appended and the log applied again (with a decoder snapshot; the baseline decodes the
log from the start), reported as a share of the first apply's time (target <= 5%).

``--workloads`` picks the logs: ``chain`` (the one above, the default), ``small-tx`` (small
transactions with prefix rows, deletes of absent quads and aborted transactions,
:mod:`bench.small_tx_workload`) and ``small-tx-no-pa`` (the same log without its ``PA``
rows), e.g. ``--workloads chain,small-tx,small-tx-no-pa``.

``--repeat N`` runs N rounds (rdflib's parser, then each case, then its baseline) and
prints each round's figures and the medians; each ratio is taken within its round.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from statistics import median
from typing import Any

from rdflib import BNode, Literal, URIRef

from .small_tx_workload import small_tx_events
from .workload import simple_text

PG_URL = os.environ.get("PATCHSYNC_BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
EX = "http://example.org/wl/"
GRAPHS = [None, None, None, URIRef(EX + "g1"), URIRef(EX + "g2"), URIRef(EX + "g3")]
PROPS = [URIRef(EX + p) for p in ("name", "label", "count", "link", "note", "date")]


#: The targets ``patchsync apply`` writes in the table, in order.
CASES = ("sqlite", "postgresql", "file")


def workload(patches: int = 4000, seed: int = 14, first: int = 0) -> list[Any]:
    """The events of the log (see the module docstring), patches ``first`` to ``first + patches``."""
    from patchsync.events import Add, Delete, Header, PatchEnd, TxAbort, TxCommit, TxStart

    rng = random.Random(seed)
    live: list[tuple[Any, Any, Any, Any]] = []
    events: list[Any] = []
    for n in range(first, first + patches):
        events.append(Header("id", URIRef(f"urn:wl:{n}")))
        if n:
            events.append(Header("prev", URIRef(f"urn:wl:{n - 1}")))
        units = rng.choices((1, 2, 3), (45, 40, 15))[0]
        for u in range(units):
            kind = rng.random()
            implicit = kind < 0.08 and u == units - 1  # rows outside TX end at the patch end
            aborted = 0.08 <= kind < 0.14
            if not implicit:
                events.append(TxStart())
            added: list[tuple[Any, Any, Any, Any]] = []
            for _ in range(rng.randint(5, 42)):
                if live and rng.random() < 0.2:
                    quad = live.pop(rng.randrange(len(live)))
                    events.append(Delete(*quad))
                    continue
                e = rng.randrange(50_000)
                s = BNode(f"b{e}") if e % 10 == 0 else URIRef(f"{EX}item/{e}")
                p = rng.choice(PROPS)
                o: Any
                if p == PROPS[3]:
                    o = URIRef(f"{EX}item/{rng.randrange(50_000)}")
                elif p == PROPS[2]:
                    o = Literal(rng.randrange(10**6))
                else:
                    o = Literal(f"value {n}.{rng.randrange(1000)}", lang=rng.choice((None, "en", "fr")))
                quad = (s, p, o, rng.choice(GRAPHS))
                events.append(Add(*quad))
                added.append(quad)
            if aborted:
                events.append(TxAbort())
            else:
                live.extend(added)
                if not implicit:
                    events.append(TxCommit())
        events.append(PatchEnd())
    return events


#: The logs ``--workloads`` picks from: patches -> events.
WORKLOADS: dict[str, Callable[[int], list[Any]]] = {
    "chain": lambda patches: workload(patches),
    "small-tx": lambda patches: small_tx_events(patches),
    "small-tx-no-pa": lambda patches: small_tx_events(patches, prefixes=False),
}


def save_log(events: list[Any], path: Path, *, append: bool = False) -> None:
    from patchsync.logs.patch_logs import LogAppender
    from patchsync.options import PatchOptions, StatementType, StreamType

    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS)
    if not append:
        path.unlink(missing_ok=True)
    with LogAppender(path, options) as appender:
        appender.write(events)


def fresh_pg(schema: str) -> str:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine.dispose()
    return make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)


def drop_pg(schema: str) -> None:
    from sqlalchemy import create_engine

    engine = create_engine(PG_URL)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    engine.dispose()


def warm_imports(work: Path) -> None:
    """Import what opening a target imports (SQLAlchemy, Alembic, the drivers), outside the
    clock, as rdflib's import is for its parser: a process pays it once, not per row. The
    targets measured are still created and migrated on the clock."""
    import psycopg  # noqa: F401  (the PostgreSQL driver, loaded by the URL's dialect)

    from patchsync.apply import open_target

    for spec in (f"sqlite:///{work / f'warm-{os.getpid()}.db'}", f"file:{work / f'warm-{os.getpid()}.nq'}"):
        open_target(spec).close()
    for leftover in work.glob(f"warm-{os.getpid()}*"):
        leftover.unlink()


def command_pacing() -> AbstractContextManager[None]:
    """The garbage-collector pacing the ``patchsync`` command runs under, so the library
    calls timed here run as ``patchsync apply`` does; nothing for a baseline from before it."""
    try:
        from patchsync.cli.common import paced_collector
    except ImportError:
        return contextlib.nullcontext()
    return paced_collector()


@contextlib.contextmanager
def fresh_spec(case: str, work: Path, tag: str) -> Iterator[str]:
    """The address of a fresh target of kind ``case``: a PostgreSQL schema ``TAG_PID`` or a
    file ``TAG-PID`` under ``work``, dropped or removed when the block ends."""
    schema, stem = f"{tag}_{os.getpid()}", f"{tag}-{os.getpid()}"
    spec = {
        "sqlite": f"sqlite:///{work / f'{stem}.db'}",
        "postgresql": fresh_pg(schema) if case == "postgresql" else "",
        "file": f"file:{work / f'{stem}.nq'}",
    }[case]
    try:
        yield spec
    finally:
        if case == "postgresql":
            drop_pg(schema)
        for leftover in work.glob(f"{stem}*"):
            leftover.unlink()


def apply_seconds(case: str, log: Path, work: Path) -> float:
    """Seconds of ``patchsync apply`` of ``log`` into a fresh target of kind ``case``."""
    from patchsync.apply import apply_file, open_target

    warm_imports(work)
    with fresh_spec(case, work, "wl") as spec:
        gc.collect()
        with command_pacing():
            start = time.perf_counter()
            target = open_target(spec)
            apply_file(log, target, source="workload")
            target.close()
            return time.perf_counter() - start


def resume_seconds(log: Path, extra: list[Any], work: Path, snapshots: bool) -> tuple[float, float]:
    """(first apply, apply after one appended patch) into SQLite, in seconds."""
    from patchsync.apply import apply_file
    from patchsync.apply.targets.sql import SqlTarget

    kwargs: dict[str, Any] = {"snapshot_dir": work / "snaps"} if snapshots else {}
    db = work / f"resume-{os.getpid()}.db"
    start = time.perf_counter()
    with SqlTarget(f"sqlite:///{db}") as t:
        apply_file(log, t, source="resume", **kwargs)
    first = time.perf_counter() - start
    save_log(extra, log, append=True)
    start = time.perf_counter()
    with SqlTarget(f"sqlite:///{db}") as t:
        result = apply_file(log, t, source="resume", **kwargs)
    again = time.perf_counter() - start
    assert result.patches == 1, result
    for leftover in work.glob(f"resume-{os.getpid()}*"):
        leftover.unlink()
    return first, again


#: The checkout this module belongs to.
HERE = Path(__file__).resolve().parent.parent


def in_checkout(checkout: str, call: str) -> Any:
    """Evaluate ``call`` (an expression over this module) with the patchsync of ``checkout``
    in a process of its own (``checkout`` may be this one, :data:`HERE`)."""
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{HERE}"}
    code = f"import json; from pathlib import Path; from bench.apply_workload import *; print(json.dumps({call}))"
    # -P: without it ``-c`` puts the working directory first on sys.path, and run from a
    # checkout's root the "baseline" would import that checkout's patchsync instead.
    command = [sys.executable, "-P", "-c", code]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(events: list[Any], work: Path, cases: list[str], repeat: int, baseline: str | None) -> dict[str, Any]:
    """Rounds of rdflib's parser and ``patchsync apply`` of ``events`` into each case; prints
    them and their medians, returns the rows and the median rates."""
    patches = sum(1 for e in events if type(e).__name__ == "PatchEnd")
    log = work / "workload.jellyp"
    save_log(events, log)
    rows = sum(1 for e in events if type(e).__name__ in ("Add", "Delete"))
    units = sum(1 for e in events if type(e).__name__ in ("TxCommit", "TxAbort"))
    text = simple_text(events, for_rdflib=True)
    print(
        f"{patches:,} patches, {rows:,} add/delete rows, {units:,}+ units, {log.stat().st_size:,} bytes",
        flush=True,
    )
    from rdflib import Dataset

    def rdflib_rate() -> float:
        gc.collect()
        start = time.perf_counter()
        Dataset().parse(data=text, format="patch")
        return rows / (time.perf_counter() - start)

    # Each round measures rdflib's parser and then every case: a ratio is taken within its
    # round, where the machine's speed is about the same for both (it drifts by a third
    # from minute to minute on a shared two-core machine).
    parser = "rdflib Dataset.parse(format='patch')"
    rounds: dict[str, list[tuple[float, float | None]]] = {parser: []}
    rdflib_rates: list[float] = []
    for r in range(repeat):
        rdflib_rates.append(rdflib_rate())
        rounds[parser].append((rdflib_rates[-1], rdflib_rates[-1]))
        for case in cases:
            if case == "postgresql" and not PG_URL:
                continue
            # Each checkout in a fresh process of its own, so neither runs in a heap the
            # other cases (or rdflib's parser) left behind.
            call = f"apply_seconds({case!r}, Path({str(log)!r}), Path({str(work)!r}))"
            new = rows / in_checkout(str(HERE), call)
            old = rows / in_checkout(baseline, call) if baseline else None
            rounds.setdefault(f"patchsync apply -> {case}", []).append((new, old))
            label = f"round {r + 1}: " if repeat > 1 else ""
            ratio = f" {new / rdflib_rates[-1]:.2f}x" + (f", baseline {old / rdflib_rates[-1]:.2f}x" if old else "")
            print(
                f"  {label}{case}: {new:,.0f} rows/s" + (f" (baseline {old:,.0f})" if old else "") + ratio, flush=True
            )
    print()
    if repeat > 1:
        print(f"medians of {repeat} rounds (each ratio taken within its round, then the median)")
    print(f"{'case':40} {'rows/s':>10} {'x rdflib':>9} {'baseline':>10} {'x rdflib':>9}")
    table: dict[str, list[float | None]] = {}
    for name, runs in rounds.items():
        new_rate = median([n for n, _ in runs])
        new_x = median([n / base for (n, _), base in zip(runs, rdflib_rates, strict=True)])
        olds = [(o, base) for (_, o), base in zip(runs, rdflib_rates, strict=True) if o is not None]
        old_rate = median([o for o, _ in olds]) if olds else None
        old_cols = (
            f"{old_rate:>10,.0f} {median([o / b for o, b in olds]):>8.2f}x" if old_rate else f"{'-':>10} {'-':>9}"
        )
        print(f"{name:40} {new_rate:>10,.0f} {new_x:>8.2f}x {old_cols}")
        table[name] = [new_rate, old_rate]
    return {"rows": rows, "rates": table}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patches", type=int, default=4000)
    ap.add_argument("--baseline", metavar="PATH", help="a checkout whose patchsync runs the baseline column")
    ap.add_argument("--resume-rows", type=int, default=0, metavar="N")
    ap.add_argument("--repeat", type=int, default=1, metavar="N", help="rounds of every case, reported as medians")
    ap.add_argument("--out", default="bench/out")
    ap.add_argument(
        "--cases", default="sqlite,postgresql,file", help="comma-separated targets to run (rdflib's parser always runs)"
    )
    ap.add_argument(
        "--workloads",
        default="chain",
        help=f"comma-separated logs to measure, of {', '.join(WORKLOADS)} (see the module docstring)",
    )
    args = ap.parse_args(argv)
    cases = [c for c in CASES if c in args.cases.split(",")]
    work = Path(tempfile.mkdtemp(prefix="apply-workload-"))
    report: dict[str, Any] = {}
    for name in args.workloads.split(","):
        print(f"workload {name}:", end=" ")
        report[name] = measure(WORKLOADS[name](args.patches), work, cases, args.repeat, args.baseline)
        print()
    if args.resume_rows:
        patches = max(1, args.resume_rows // 40)
        big = work / "resume.jellyp"
        save_log(workload(patches), big)
        extra = workload(1, seed=99, first=patches)
        first, again = resume_seconds(big, extra, work, snapshots=True)
        line = f"resume, one patch on a {args.resume_rows:,}-row log: {again:.3f} s = {100 * again / first:.1f}% of {first:.2f} s"
        report["resume"] = {"first": first, "again": again}
        if args.baseline:
            save_log(workload(patches), big)
            b_first, b_again = in_checkout(
                args.baseline,
                f"resume_seconds(Path({str(big)!r}), workload(1, seed=99, first={patches}), Path({str(work)!r}), False)",
            )
            line += f"; baseline {b_again:.3f} s = {100 * b_again / b_first:.1f}% of {b_first:.2f} s"
            report["resume_baseline"] = {"first": b_first, "again": b_again}
        print(line)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "apply_workload.json").write_text(json.dumps(report, indent=2))
    for leftover in work.rglob("*"):
        if leftover.is_file():
            leftover.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
