"""Memory bound of decoding: peak RSS of decoding a large ``.jellyp`` log against its largest frame.

    .venv/bin/python -m bench.memory_bench                      # ~1 GB log (generated once, cached)
    .venv/bin/python -m bench.memory_bench --mb 200 --apply-mb 50   # quicker

Issue #13: "a 1 GB log decodes in memory bounded by a small multiple of its largest frame".
The log is generated streaming to disk by two processes (:mod:`tests.workloads.memory_log`: patches
of about 1,000 rows, every subject new, distinct literals, 2% long texts of up to 3,000
characters, and every 20th patch a bulk patch of 1 KB texts whose frames reach the
encoder's 1 MiB frame limit), cached in ``--out`` by size and seed. Each case then runs in
its own child process:

* ``idle``: the interpreter with the same imports, decoding nothing (the fixed part);
* ``decode``: ``PatchDecoder`` fed the file in 1 MiB pieces, every event taken and
  dropped, with N-Triples strings and with rdflib terms, on the compiled core and with
  ``PATCHSYNC_PURE=1``;
* ``patchsync inspect`` of the log, and ``patchsync apply`` into a fresh SQLite file of a
  smaller log of ``--apply-mb`` (it writes every row to the database), each against the
  same command on a one-patch log (its idle case).

The peak RSS of a child is its ``ru_maxrss`` (``os.wait4``). The table gives it, the peak
above the case's idle one, and that excess divided by the largest frame of the log: the
figure the issue's bound is about.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.workloads.memory_log import frame_sizes, write_churn_log, write_churn_log_file

CHUNK = 1 << 20


# -- children -----------------------------------------------------------------------------


def _child_idle(terms: str) -> dict[str, Any]:
    _adapter(terms)
    from patchsync.codec.patch_decoder import PatchDecoder  # noqa: F401  (the same imports as a decode)

    return {}


def _adapter(terms: str) -> Any:
    if terms == "nt":
        from patchsync.terms.ntriples import NTriplesTerms

        return NTriplesTerms()
    from patchsync.terms import default_adapter

    return default_adapter()


def _child_decode(path: str, terms: str) -> dict[str, Any]:
    from patchsync.codec.patch_decoder import PatchDecoder

    decoder: PatchDecoder[Any] = PatchDecoder(_adapter(terms), source=path)
    events = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            decoder.feed(chunk)
            for _ in decoder:
                events += 1
    decoder.close()
    for _ in decoder:
        events += 1
    return {"events": events, "native": decoder._native is not None}


def _run_child(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a child, return its JSON line plus its peak RSS and wall time."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"child {' '.join(argv)} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    lines = out.decode().strip().splitlines()
    value: dict[str, Any] = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    value["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # ru_maxrss is in KiB on Linux
    value["seconds"] = round(seconds, 1)
    return value


def _env(pure: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PATCHSYNC_PURE", None)
    if pure:
        env["PATCHSYNC_PURE"] = "1"
    return env


# -- main ---------------------------------------------------------------------------------


def _log(out: Path, mb: int, seed: int, procs: int) -> tuple[Path, dict[str, Any]]:
    path = out / f"memory-{mb}mb-s{seed}.jellyp"
    meta = path.with_suffix(".json")
    if not (path.exists() and meta.exists()):
        started = time.monotonic()
        print(f"generating {path} ({mb} MB) ...", flush=True)
        tmp = path.with_suffix(".tmp")
        stats = write_churn_log_file(str(tmp), mb << 20, seed, procs=procs)
        os.replace(tmp, path)
        sizes = frame_sizes(path)
        stats.update(frames=len(sizes), largest_frame=max(sizes), bytes=path.stat().st_size)
        stats["generation_s"] = round(time.monotonic() - started, 1)
        meta.write_text(json.dumps(stats))
        print(f"  {stats}", flush=True)
    value: dict[str, Any] = json.loads(meta.read_text())
    return path, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024, help="size of the decoded log in MiB (default 1024)")
    parser.add_argument("--apply-mb", type=int, default=64, help="size of the applied log in MiB (0: no apply)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--procs", type=int, default=2, help="processes generating the log")
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--cases", default="", help="comma-separated case names to run (default all)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--terms", default="nt", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        value = _child_idle(args.terms) if args.child == "idle" else _child_decode(args.log, args.terms)
        print(json.dumps(value))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    log, stats = _log(args.out, args.mb, args.seed, args.procs)
    small, small_stats = _log(args.out, args.apply_mb, args.seed, args.procs) if args.apply_mb else (None, {})
    me = [sys.executable, "-m", "bench.memory_bench"]
    cli = [sys.executable, "-m", "patchsync"]
    work = Path(tempfile.mkdtemp(prefix="memory_bench-"))
    tiny = work / "tiny.jellyp"
    with open(tiny, "wb") as f:
        write_churn_log(f, 1, args.seed)  # one patch: what a command costs before any real input

    def apply(log_path: Path, name: str) -> list[str]:
        target = f"sqlite:///{work / (name + '.db')}"
        return [*cli, "apply", "--no-progress", "--chain", "ignore", "--target", target, str(log_path)]

    # (name, argv, pure, log statistics, the idle case it is compared with)
    cases: list[tuple[str, list[str], bool, dict[str, Any], str]] = []
    for terms in ("nt", "rdflib"):
        cases.append((f"idle interpreter ({terms})", [*me, "--child", "idle", "--terms", terms], False, {}, ""))
        for pure in (False, True):
            argv = [*me, "--child", "decode", "--terms", terms, "--log", str(log)]
            cases.append((f"decode -> {terms} ({'pure' if pure else 'native'})", argv, pure, stats, f"({terms})"))
    cases.append(("idle inspect (tiny log)", [*cli, "inspect", "--json", str(tiny)], False, {}, ""))
    cases.append(("patchsync inspect (native)", [*cli, "inspect", "--json", str(log)], False, stats, "idle inspect"))
    if small is not None:
        cases.append(("idle apply (tiny log)", apply(tiny, "tiny"), False, {}, ""))
        for pure in (False, True):
            name = f"patchsync apply -> sqlite ({'pure' if pure else 'native'})"
            cases.append((name, apply(small, f"apply-{pure}"), pure, small_stats, "idle apply"))
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    results: list[dict[str, Any]] = []
    idle: dict[str, float] = {}
    try:
        for name, argv, pure, log_stats, baseline in cases:
            if wanted and not name.startswith("idle") and not any(w in name for w in wanted):
                continue
            print(f"running {name} ...", flush=True)
            r = _run_child(argv, _env(pure))
            r["case"] = name
            if not log_stats:
                idle[name] = r["peak_rss_mb"]
            else:
                base = next((v for k, v in idle.items() if baseline in k), None)
                r["log_mb"] = round(log_stats["bytes"] / 2**20)
                r["largest_frame_kb"] = round(log_stats["largest_frame"] / 1024)
                if base is not None:
                    r["above_idle_mb"] = round(r["peak_rss_mb"] - base, 1)
                    r["above_idle_per_frame"] = round(r["above_idle_mb"] * 2**20 / log_stats["largest_frame"], 1)
            results.append(r)
            print("  ", r, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {
        "log": stats,
        "apply_log": small_stats,
        "results": results,
        "env": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_at_end": os.getloadavg(),
            "self_maxrss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
    }
    out = args.out / f"memory_bench-{args.mb}mb.json"
    out.write_text(json.dumps(summary, indent=2))
    print(
        f"\nlog {stats['bytes'] / 2**20:,.0f} MiB, {stats['rows']:,} rows, {stats['frames']:,} frames, "
        f"largest frame {stats['largest_frame'] / 1024:,.0f} KiB; load average at the end {os.getloadavg()[0]:.2f}"
    )
    print(f"{'case':40} {'log MiB':>8} {'seconds':>8} {'peak RSS MiB':>13} {'above idle':>11} {'/ largest frame':>16}")
    for r in results:
        print(
            f"{r['case']:40} {r.get('log_mb', ''):>8} {r['seconds']:>8} {r['peak_rss_mb']:>13} "
            f"{r.get('above_idle_mb', ''):>11} {r.get('above_idle_per_frame', ''):>16}"
        )
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
