"""CI smoke run of the decoder fuzz targets (issue #8, item 1).

Each target of :mod:`tests.fuzz.targets` runs under atheris/libFuzzer in its own process
through ``scripts/fuzz.py`` (the same command as long local runs) for ``SECONDS``, seeded
from the conformance suites, with a per-input timeout and an RSS limit. The test fails on
any crash, hang or out-of-memory input and prints the command that reproduces it.

A planted bug (the ``selftest`` target) shows that the pipeline really finds, saves and
reproduces a crash, so a silent harness cannot pass for a clean one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.corpus import seeds
from tests.fuzz.targets import TARGETS

ROOT = Path(__file__).resolve().parents[1]
FUZZ = ROOT / "scripts" / "fuzz.py"
# 5 targets x 24 s: the >= 2 minutes of fuzzing issue #8 asks of CI.
SECONDS = 24


def fuzz(*args: str, env: dict[str, str] | None = None, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(FUZZ), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("target", ["patch", "rdf", "rdfp", "apply", "native"])
def test_seed_corpus_comes_from_the_conformance_suites(target: str) -> None:
    found = seeds(target)
    # The suites hold 141 .jellyp, 160 .jelly and 300+ text inputs; missing vendored data
    # would leave a target nearly unseeded, which must not pass unnoticed.
    assert len(found) > 100, f"{target}: only {len(found)} seeds"
    for data in found:
        TARGETS[target](data)  # every seed obeys the contract already


def test_the_units_target_runs_the_differential_property_on_its_seeds() -> None:
    # The unit reader's property at fuzzing size (tests/test_units_differential.py is the
    # quick one); its seeds are choice sequences, so any bytes draw a log.
    found = seeds("units")
    assert len(found) == 20
    for data in found:
        TARGETS["units"](data)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["patch", "rdf", "rdfp", "apply", "native"])
def test_fuzz_target_finds_no_crash(target: str, tmp_path: Path) -> None:
    proc = fuzz(target, "--seconds", str(SECONDS), "--workdir", str(tmp_path), timeout=SECONDS + 240)
    report = proc.stdout + proc.stderr
    print(report)  # executions, corpus size and any reproducer, shown with -s or on failure
    assert proc.returncode == 0, f"fuzz target {target} found a crash:\n{report}"
    m = re.search(rf"^{target}: (\d+) executions .* corpus (\d+) inputs, .* 0 crash\(es\)", report, re.M)
    assert m is not None, report
    assert int(m.group(1)) > 1000 and int(m.group(2)) > 100


@pytest.mark.slow
def test_a_planted_crash_is_found_saved_and_reproduced(tmp_path: Path) -> None:
    env = {"PATCHSYNC_FUZZ_SELFTEST": "1"}
    proc = fuzz("selftest", "--seconds", "30", "--workdir", str(tmp_path), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "selftest: " in proc.stdout and "1 crash(es)" in proc.stdout
    m = re.search(r"reproduce: (.+)$", proc.stdout, re.M)
    assert m is not None, proc.stdout
    saved = Path(m.group(1).split()[-1])
    assert saved.parent == tmp_path / "selftest" / "crashes" and b"\xde\xad" in saved.read_bytes()
    again = subprocess.run(m.group(1).split(), capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert again.returncode != 0 and "ValueError: planted crash" in again.stderr


def test_a_crash_is_saved_when_the_teardown_after_it_is_slow(tmp_path: Path) -> None:
    # atheris reports an escaping exception by ending the interpreter, whose teardown sets
    # SIGALRM back to "terminate" while atheris's timeout timer (every timeout/2 + 1 s) still
    # runs; libFuzzer saves the input only after that teardown. A loaded machine made the
    # teardown slow enough for the timer to kill the run with nothing saved. Here the
    # teardown is made 3 s long and the timer's period 1 s, so without the fix it always dies.
    proc = fuzz(
        "selftest",
        "--seconds",
        "30",
        "--timeout",
        "1",
        "--workdir",
        str(tmp_path),
        env={"PATCHSYNC_FUZZ_SELFTEST": "slow-exit"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 crash(es)" in proc.stdout, proc.stdout + (tmp_path / "selftest" / "fuzz.log").read_text(errors="replace")
    assert len(list((tmp_path / "selftest" / "crashes").glob("crash-*"))) == 1


# -- regressions: what the fuzzers found, minimized ------------------------------------------

# (target, input, what it was). Decoder targets read a two-byte split point first.
FINDINGS = [
    # str.split() cuts at \x1c-\x1f too, so the "not a row code" message found no word to
    # quote and raised IndexError (long run 1, rdfp, after 38,802 executions).
    ("rdfp", b"\x92\x1f\x1f\x1f\n\x9f\x1f\x1f\x1f\n", "a line of ASCII unit separators"),
    ("rdfp", b"\x00\x00\x1f\n", "minimized"),
    ("apply", b"\x01\x1c\n", "the same through apply"),
]


@pytest.mark.parametrize(("target", "data", "what"), FINDINGS, ids=[f[2] for f in FINDINGS])
def test_fuzz_findings_stay_fixed(target: str, data: bytes, what: str) -> None:
    TARGETS[target](data)


def test_a_line_of_separator_controls_is_a_decode_error() -> None:
    from patchsync.codec.rdfp import read_rdfp
    from patchsync.errors import DecodeError

    with pytest.raises(DecodeError, match=r"line 1: a row starts with a row code .*not '\\x1f\\x1e'"):
        read_rdfp(b"\x1f\x1e\n")
