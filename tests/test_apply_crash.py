"""Crashes at every point inside a unit leave the target at a committed unit; a re-run finishes.

A proxy target raises at its k-th call (before or after passing the call on) and stays
dead, like a killed process; the SQL connection is then dropped without committing. The
state must equal the reference target's state at the stored checkpoint, and a second run
must reach the reference's final state.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from patchsync.apply import MemoryTarget
from patchsync.apply.target import Checkpoint, PatchRecord
from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import ApplyError

from .apply_helpers import apply_text, iri, state

S, P = iri("s"), iri("p")


def _log() -> str:
    rows = []
    n = itertools.count()
    rows.append(
        "H id <urn:c1> .\nPA ex <http://ex/> .\n" + "".join(f"A {S} {P} {iri(str(next(n)))} .\n" for _ in range(5))
    )
    rows.append(
        "TX .\n"
        + "".join(f"A {S} {P} {iri(str(next(n)))} {iri('g')} .\n" for _ in range(5))
        + f"D {S} {P} {iri('0')} .\nTC .\n"
    )
    rows.append(f"TX .\nA {S} {P} {iri('never')} .\nTA .\n")
    rows.append(
        "Z .\nH id <urn:c2> .\nH prev <urn:c1> .\nTX .\nPD ex .\n"
        + "".join(f"D {S} {P} {iri(str(i))} .\n" for i in range(1, 4))
        + "TC .\nZ .\n"
    )
    rows.append(
        "H id <urn:c3> .\nH prev <urn:c2> .\n"
        + "".join(f'A _:b{i} {P} << {S} {P} "{i}" >> .\n' for i in range(4))
        + "Z .\n"
    )
    return "".join(rows)


LOG = _log()


class Recording(MemoryTarget):
    """The reference target, remembering its state at every checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: dict[tuple[int, int] | None, Any] = {None: state(self)}

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        super().commit(source, checkpoint, records)
        self.snapshots[(checkpoint.offset, checkpoint.row)] = state(self)


class Crash(Exception):
    pass


class Crashing:
    """Passes calls to ``inner`` until call ``at``, then raises forever."""

    CALLS = ("begin", "add", "delete", "add_prefix", "delete_prefix", "commit", "rollback", "flush")

    def __init__(self, inner: Any, at: int, after: bool) -> None:
        self.inner, self.at, self.after = inner, at, after
        self.adapter = inner.adapter
        self.calls = 0
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if name not in self.CALLS:
            return method

        def call(*args: Any) -> Any:
            if self.dead:
                raise Crash("dead")
            self.calls += 1
            if self.calls == self.at:
                self.dead = True
                if self.after:
                    method(*args)
                raise Crash(f"injected at call {self.at} ({name})")
            return method(*args)

        return call


def reference() -> Recording:
    ref = Recording()
    apply_text(LOG, ref, batch_rows=2)
    return ref


def count_calls(url: str) -> int:
    probe = Crashing(SqlTarget(url), at=10**9, after=False)
    apply_text(LOG, probe, batch_rows=2)  # type: ignore[arg-type]
    probe.inner.discard()
    _wipe(url)
    return probe.calls


@pytest.mark.parametrize("after", [False, True], ids=["before-call", "after-call"])
def test_crash_at_every_call(sql_url: str, after: bool) -> None:
    ref = reference()
    final = state(ref)
    total = count_calls(sql_url)
    assert total > 20
    for at in range(1, total + 1):
        inner = SqlTarget(sql_url, group_units=3)
        with pytest.raises(ApplyError):
            apply_text(LOG, Crashing(inner, at, after), batch_rows=2)  # type: ignore[arg-type]
        inner.discard()  # the process died: nothing uncommitted survives
        check = SqlTarget(sql_url)
        cp = check.checkpoint("log")
        key = None if cp is None else (cp.offset, cp.row)
        assert key in ref.snapshots, f"crash at call {at}: checkpoint {key} is not a unit boundary"
        assert state(check) == ref.snapshots[key], f"crash at call {at}: state differs from checkpoint {key}"
        check.close()
        # Re-run to the end, then wipe for the next crash point.
        rerun = SqlTarget(sql_url)
        apply_text(LOG, rerun, batch_rows=2)
        assert state(rerun) == final
        rerun.close()
        _wipe(sql_url)


def _wipe(url: str) -> None:
    t = SqlTarget(url)
    with t.engine.begin() as conn:
        for table in ("ps_quads", "ps_terms", "ps_namespaces", "ps_sources", "ps_patches"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    t.discard()


def test_target_failure_rolls_back_the_unit_on_memory() -> None:
    ref = reference()
    for at in range(1, 60):
        inner = MemoryTarget()
        crashing = Crashing(inner, at, after=True)
        crashing.CALLS = ("begin", "add", "delete", "add_prefix", "delete_prefix", "commit")  # rollback still works
        with contextlib.suppress(ApplyError):
            apply_text(LOG, crashing, batch_rows=2)  # type: ignore[arg-type]
        cp = inner.checkpoint("log")
        key = None if cp is None else (cp.offset, cp.row)
        assert state(inner) == ref.snapshots[key], f"failure at call {at}"
        apply_text(LOG, inner, batch_rows=2)
        assert state(inner) == state(ref)
