"""Run the decoder fuzz targets (tests/fuzz) with atheris/libFuzzer and report what they did.

Usage::

    .venv/bin/python scripts/fuzz.py all --seconds 600            # each target for 10 minutes
    .venv/bin/python scripts/fuzz.py patch rdfp --seconds 60 --jobs 2
    .venv/bin/python scripts/fuzz.py --repro patch out/fuzz/patch/crashes/crash-...

Targets: patch (Jelly-Patch decoder), rdf (Jelly-RDF decoder), rdfp (RDF Patch text
reader), apply (decode and apply into the in-memory target). Each target works in
``WORKDIR/TARGET``: ``corpus/`` starts from the conformance seeds and keeps what libFuzzer
finds (so a later run continues from it), ``crashes/`` receives crashing, hanging and
out-of-memory inputs, ``fuzz.log`` is libFuzzer's output. The summary prints, per target,
the executions run, the corpus size and the crashes, each with the one command that
reproduces it. The exit status is 1 when any target found something.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fuzz.corpus import seeds  # noqa: E402
from tests.fuzz.targets import TARGETS  # noqa: E402

RUNNER = REPO / "tests" / "fuzz" / "run.py"
# libFuzzer's artifact names for findings (slow units are reported, not counted).
FINDINGS = ("crash-", "timeout-", "oom-", "leak-")


@dataclass
class Report:
    """What one target's run did."""

    target: str
    seconds: float
    executions: int = 0
    corpus: int = 0
    peak_rss_mb: int = 0
    exit_code: int = 0
    crashes: list[Path] = field(default_factory=list)
    log: Path | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.crashes

    def summary(self) -> str:
        rate = self.executions / self.seconds if self.seconds else 0.0
        return (
            f"{self.target}: {self.executions} executions in {self.seconds:.0f} s ({rate:.0f}/s), "
            f"corpus {self.corpus} inputs, peak RSS {self.peak_rss_mb} MB, "
            f"{len(self.crashes)} crash(es), libFuzzer exit {self.exit_code}"
        )


def reproduce_command(target: str, path: Path) -> str:
    """The one command that replays a saved input with a full Python traceback."""
    return f"{sys.executable} {RUNNER} --plain {target} {path}"


def run_target(
    target: str,
    workdir: Path,
    *,
    seconds: int,
    timeout: int,
    rss_limit_mb: int,
    max_len: int,
) -> Report:
    """Fuzz ``target`` for ``seconds`` in ``workdir/target``; never raises for findings."""
    base = workdir / target
    corpus = base / "corpus"
    crashes = base / "crashes"
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    for data in seeds(target):
        seed = corpus / f"seed-{hashlib.sha1(data).hexdigest()}"
        if not seed.exists():
            seed.write_bytes(data)
    before = {p.name for p in crashes.iterdir()}
    log = base / "fuzz.log"
    command = [
        sys.executable,
        str(RUNNER),
        target,
        str(corpus),
        f"-max_total_time={seconds}",
        f"-timeout={timeout}",
        f"-rss_limit_mb={rss_limit_mb}",
        f"-max_len={max_len}",
        f"-artifact_prefix={crashes}/",
        "-print_final_stats=1",
        "-print_pcs=0",
    ]
    started = time.monotonic()
    with log.open("wb") as out:
        try:
            # The hang guard covers libFuzzer itself; per-input hangs are its -timeout.
            code = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, timeout=seconds + timeout + 120, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            code = -9
    report = Report(target, time.monotonic() - started, exit_code=code, log=log)
    text = log.read_text(errors="replace")
    m = re.search(r"stat::number_of_executed_units:\s*(\d+)", text) or re.search(r"Done (\d+) runs", text)
    if m is None:
        # A run that stopped at a crash prints no final stats; take the last status line.
        lines = re.findall(r"^#(\d+)\s", text, flags=re.M)
        report.executions = int(lines[-1]) if lines else 0
    else:
        report.executions = int(m.group(1))
    rss = re.findall(r"rss: (\d+)Mb", text) + re.findall(r"stat::peak_rss_mb:\s*(\d+)", text)
    report.peak_rss_mb = max((int(x) for x in rss), default=0)
    report.corpus = sum(1 for _ in corpus.iterdir())
    report.crashes = sorted(p for p in crashes.iterdir() if p.name not in before and p.name.startswith(FINDINGS))
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", default=["all"], help=f"all, or some of: {', '.join(TARGETS)}")
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time per target (default 60)")
    parser.add_argument("--jobs", type=int, default=1, help="targets fuzzed at the same time (default 1)")
    parser.add_argument("--workdir", type=Path, default=REPO / "out" / "fuzz", help="corpora and crashes")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    parser.add_argument("--rss-limit-mb", type=int, default=1024, help="memory limit of a run (default 1024)")
    parser.add_argument("--max-len", type=int, default=65536, help="longest input generated (default 65536)")
    parser.add_argument("--repro", action="store_true", help="replay FILEs through TARGET without atheris")
    args = parser.parse_args(argv)

    if args.repro:
        if len(args.targets) < 2:
            parser.error("--repro needs a target and at least one file")
        return subprocess.run([sys.executable, str(RUNNER), "--plain", *args.targets], check=False).returncode

    names = list(TARGETS) if args.targets == ["all"] else args.targets
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)} or all")

    def one(name: str) -> Report:
        return run_target(
            name,
            args.workdir,
            seconds=args.seconds,
            timeout=args.timeout,
            rss_limit_mb=args.rss_limit_mb,
            max_len=args.max_len,
        )

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        reports = list(pool.map(one, names))
    failed = False
    for report in reports:
        print(report.summary())
        for path in report.crashes:
            print(f"  finding {path.name}; reproduce: {reproduce_command(report.target, path)}")
        if not report.ok:
            failed = True
            if not report.crashes:
                print(f"  libFuzzer failed without a saved input; see {report.log}")
    total = sum(r.executions for r in reports)
    print(f"total: {total} executions, {sum(len(r.crashes) for r in reports)} crash(es)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
