"""Library errors name parameters; the command line names its flags (issue #12).

The library says ``chain='ignore'`` and ``reset=True`` and lists them in
``PatchsyncError.params``; ``cli.common.error_line`` spells each as the flag that sets it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchsync import ChainError, CheckpointError, MemoryTarget, apply_events
from patchsync.cli.common import FLAGS, error_line
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import PatchsyncError, param
from patchsync.terms.ntriples import NTriplesTerms

FIRST = "H id <urn:p:1> .\nA <http://e/s> <http://e/p> <http://e/o> .\n"
FORK = "H id <urn:p:9> .\nH prev <urn:p:7> .\nA <http://e/s> <http://e/p> <http://e/x> .\n"


def events(text: str) -> list[object]:
    return list(read_rdfp(text.encode(), NTriplesTerms()))


def test_the_library_names_the_parameter() -> None:
    target = MemoryTarget()
    apply_events(events(FIRST), target, source="log")
    with pytest.raises(ChainError) as caught:
        apply_events(events(FORK), target, source="other")
    assert "chain='ignore'" in str(caught.value) and "--chain" not in str(caught.value)
    assert caught.value.params == (("chain", "ignore"),)


def test_every_flag_rewrites_its_parameter() -> None:
    for name, value, flag in [("reset", True, "--reset"), ("chain", "ignore", "--chain ignore")]:
        exc = CheckpointError(f"x; use {param(name, value)} to go on").naming((name, value))
        assert error_line(exc) == f"x; use {flag} to go on"
    assert set(FLAGS) >= {"reset", "chain", "graph", "retry_timeout"}


def test_a_message_without_params_is_unchanged() -> None:
    exc = PatchsyncError("reset=True is just text here")
    assert error_line(exc) == "reset=True is just text here"


def test_the_command_line_shows_the_flag(tmp_path: Path) -> None:
    (tmp_path / "a.rdfp").write_text(FIRST)
    (tmp_path / "b.rdfp").write_text(FORK)
    run = [sys.executable, "-m", "patchsync", "apply", "--no-progress", "--target", "sqlite:///t.db"]
    assert subprocess.run([*run, "a.rdfp"], cwd=tmp_path, capture_output=True).returncode == 0
    done = subprocess.run([*run, "b.rdfp"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "use --chain ignore to apply anyway" in line and "chain='ignore'" not in line
