"""Overlapping runs take turns (docs/guarantees.md, "Overlapping runs"): one applier applies a
log to a target at a time; the others wait while it makes progress, then apply what is left.

Three ``patchsync apply`` of one log into one target at once (a cron job overlapping itself)
all succeed, and the log is applied exactly once between them. The wait is bounded by the
other applier's progress, never by the clock alone: it ends only after the other applier
committed nothing for ``--wait`` seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.api import log_source
from patchsync.apply.targets.sql import SqlTarget
from patchsync.apply.turns import POLL, wait_for_turn
from patchsync.errors import SourceBusy

from .apply_helpers import apply_text, iri, state
from .process_helpers import wait_for
from .test_tail import write_patches

RUN = [sys.executable, "-m", "patchsync"]


def _patch(n: int) -> str:
    prev = f"H prev <urn:t:{n - 1}> .\n" if n else ""
    return f"H id <urn:t:{n}> .\n{prev}TX .\nA {iri(f's{n}')} {iri('p')} {iri('o')} .\nTC .\nZ .\n"


def _applied(out: str) -> int:
    found = re.search(r"^\S+: (\d+) patches applied", out, re.MULTILINE)
    assert found is not None, out
    return int(found[1])


def test_three_overlapping_applies_all_succeed_and_apply_the_log_once(tmp_path: Path, sql_url: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 300)
    # The test holds the log's turn, so that all three runs overlap it whatever the machine's speed.
    holder = SqlTarget(sql_url)
    holder.checkpoint(log_source(log))
    runs: list[tuple[subprocess.Popen[str], Path]] = []
    try:
        for i in range(3):
            err = tmp_path / f"err{i}"
            with open(err, "w") as stderr:
                args = [*RUN, "apply", str(log), "--target", sql_url, "--no-progress", "--wait", "600"]
                runs.append((subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True), err))
        for _, err in runs:
            wait_for(lambda err=err: "waiting for its turn" in err.read_text(), 120, "an apply waiting for its turn")
    finally:
        holder.close()  # the turn passes to one of them
    applied = 0
    for proc, err in runs:
        out, _ = proc.communicate(timeout=300)
        text = err.read_text()
        assert proc.returncode == 0, text
        assert text.count("\n") == 1 and "another applier is applying" in text and "Traceback" not in text
        applied += _applied(out)
    assert applied == 300  # between them, each patch once; the others found nothing left
    reference = MemoryTarget()
    apply_file(log, reference)
    with SqlTarget(sql_url) as target:
        assert state(target) == state(reference)
        checkpoint = target.checkpoint(log_source(log))
        assert checkpoint is not None and checkpoint.patches == 300
        assert len(target.history()) == 300


class _Holder:
    """Another applier of ``source`` on ``target``: it applies one more patch each time it is
    asked to make progress."""

    def __init__(self, target: SqlTarget, source: str) -> None:
        self.target, self.source, self.patches = target, source, 0

    def progress(self) -> None:
        self.patches += 1
        apply_text("".join(_patch(n) for n in range(self.patches)), self.target, source=self.source)


def test_the_wait_follows_the_other_appliers_progress(sql_url: str) -> None:
    # Time is the test's: each pause of the waiter lasts 4 s, close to its 5 s bound.
    holder = _Holder(SqlTarget(sql_url), "log")
    holder.progress()  # it holds the turn
    waiter = SqlTarget(sql_url)
    now = [0.0]
    told: list[SourceBusy] = []
    pauses = 0

    def pause(seconds: float) -> None:
        nonlocal pauses
        assert seconds == POLL
        pauses += 1
        now[0] += 4.0
        if pauses <= 5:
            holder.progress()  # at work: the wait goes on

    try:
        with pytest.raises(SourceBusy) as raised:
            wait_for_turn(waiter, "log", 5.0, waiting=told.append, clock=lambda: now[0], sleep=pause)
        # 20 s of progress, then 8 s without any: the wait ends after the first 5 s of those.
        assert (pauses, now[0]) == (7, 28.0)
        assert "another applier is applying log" in str(raised.value) and "made no progress in 5 s" in str(raised.value)
        assert raised.value.params == (("wait", 5.0),)
        assert len(told) == 1 and "another applier is applying log" in str(told[0])
        holder.target.close()
        # The other applier done, the waiter takes the turn and the checkpoint it left.
        checkpoint = wait_for_turn(waiter, "log", 5.0, clock=lambda: now[0], sleep=pause)
        assert checkpoint is not None and checkpoint.patches == 6 and pauses == 7
    finally:
        holder.target.close()
        waiter.close()


def test_the_turn_comes_after_progress(sql_url: str) -> None:
    holder = _Holder(SqlTarget(sql_url), "log")
    holder.progress()
    waiter = SqlTarget(sql_url)
    now = [0.0]
    pauses = 0

    def pause(_seconds: float) -> None:
        nonlocal pauses
        pauses += 1
        now[0] += 4.0
        if pauses < 6:
            holder.progress()
        else:
            holder.target.close()

    try:
        checkpoint = wait_for_turn(waiter, "log", 5.0, clock=lambda: now[0], sleep=pause)
        assert checkpoint is not None and checkpoint.patches == 6 and now[0] == 24.0
        result = apply_text("".join(_patch(n) for n in range(8)), waiter, source="log")
        assert (result.patches, result.skipped) == (2, 0)  # what was left, nothing twice
    finally:
        waiter.close()


def test_a_stalled_applier_ends_the_wait_with_one_line(tmp_path: Path, sql_url: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 3)
    holder = SqlTarget(sql_url)
    holder.checkpoint(log_source(log))
    try:
        done: dict[str, Any] = {}
        for wait in ("0", "0.5"):
            done[wait] = subprocess.run(
                [*RUN, "apply", str(log), "--target", sql_url, "--no-progress", "--wait", wait],
                capture_output=True,
                text=True,
                timeout=120,
            )
    finally:
        holder.close()
    refused = done["0"]
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert f"another applier is applying {log.resolve()}" in refused.stderr and "waiting" not in refused.stderr
    stalled = done["0.5"]
    lines = stalled.stderr.strip().splitlines()
    assert stalled.returncode == 1 and len(lines) == 2, stalled.stderr
    assert "waiting for its turn" in lines[0]
    assert "made no progress in 0.5 s of waiting (--wait 0.5 to wait longer)" in lines[1]


def test_an_apply_into_an_oxigraph_store_another_process_has_open_waits_for_it(tmp_path: Path) -> None:
    """An Oxigraph store opens in one process at a time: an overlapping apply waits for it
    (one line), then applies what is left; with ``--wait`` spent it gives up in one line."""
    from patchsync.apply import open_target

    log, store = tmp_path / "log.jellyp", tmp_path / "store"
    write_patches(log, 1, 20)
    holder = open_target(f"oxigraph:{store}")
    apply_file(log, holder)  # the other run, still holding the store
    write_patches(log, 21, 50)
    args = [*RUN, "apply", str(log), "--target", f"oxigraph:{store}", "--no-progress"]
    try:
        given_up = subprocess.run([*args, "--wait", "0.5"], capture_output=True, text=True, timeout=120)
        err = tmp_path / "err"
        with open(err, "w") as stderr:
            waiter = subprocess.Popen([*args, "--wait", "600"], stdout=subprocess.PIPE, stderr=stderr, text=True)
        wait_for(lambda: "waiting for its turn" in err.read_text(), 120, "an apply waiting for the store")
    finally:
        holder.close()  # lets go of the store
    lines = given_up.stderr.strip().splitlines()
    assert given_up.returncode == 1 and len(lines) == 2 and "Traceback" not in given_up.stderr, given_up.stderr
    assert "waiting for its turn" in lines[0] and "still held after 0.5 s of waiting (--wait 0.5 to wait" in lines[1]
    out, _ = waiter.communicate(timeout=120)
    assert waiter.returncode == 0 and err.read_text().count("\n") == 1, err.read_text()
    assert _applied(out) == 30  # what was left, nothing twice
    reference = MemoryTarget()
    apply_file(log, reference)
    target = open_target(f"oxigraph:{store}")
    try:
        assert state(target) == state(reference)
    finally:
        target.close()
