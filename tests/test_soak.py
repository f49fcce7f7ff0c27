"""A CI-sized soak (the harness of ``bench/soak_bench.py``, ``tests/workloads/soak.py``): producer, real ``patchsync tail`` into PostgreSQL, ``kill -9``.

The same harness as the 10-minute benchmark, scaled down: 200 patches/s for 40 s into
rotated segments, the daemon killed with ``SIGKILL`` about every 8 s (only after the
incarnation applied something) and restarted at once. At the end the daemon must catch
up and exit 0 on ``SIGTERM``, and PostgreSQL must hold exactly the producer's own model
of the state and the state ``patchsync apply`` builds from the same logs in SQLite, with
every patch recorded once. Bounds are generous: the machine running CI has two cores
shared with other work, so nothing here depends on how fast the daemon is.
"""

from __future__ import annotations

import gc
import io
import weakref
from pathlib import Path

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.dump import write_dump

from .workloads.soak import Workload, ok, produce, report, run_soak

RATE = 200
SECONDS = 40
KILL_EVERY = 8


@pytest.mark.slow
@pytest.mark.postgres
def test_soak_kill_9_into_postgres(tmp_path: Path, pg_url: str) -> None:
    result = run_soak(
        pg_url,
        tmp_path,
        rate=RATE,
        seconds=SECONDS,
        kill_every=KILL_EVERY,
        rotate=2000,
        entities=2000,
        warmup=3.0,
        catch_up_timeout=180,
    )
    text = "\n".join(report(result))
    print(text)  # shown with -s, and in the log of a failure
    produced = RATE * SECONDS
    # Nothing lost, nothing applied twice: the checkpoints, the patch history and the data.
    assert result.produced == produced, text
    assert result.applied == produced, text
    assert result.ps_patches == (produced, produced), text
    assert result.equal_reference, text
    assert result.equal_apply is True, text
    assert result.reference_quads > 1000, text  # the comparison is over a real state
    # The daemon only ever ended by our kill -9 and, at the end, by SIGTERM with exit 0.
    assert result.daemon_exits == [], text
    assert result.final_exit == 0, text
    assert result.tracebacks == 0, text
    assert ok(result), text
    # At least three kills, each followed by progress of the next incarnation.
    assert len(result.kills) >= 3, text
    for kill in result.kills:
        assert kill.first_progress_s is not None, text
        assert kill.applied_before_next_kill > kill.applied_at_kill, text
    # Memory of the last incarnation (the longest-lived: it also drains the tail) stays
    # within twice the first one's peak, and under 512 MiB in absolute terms.
    pids = [s.pid for s in result.samples]
    first = [s.rss_kib for s in result.samples if s.pid == pids[0] and s.rss_kib]
    last = [s.rss_kib for s in result.samples if s.pid == pids[-1] and s.rss_kib]
    assert first and last, text
    assert max(last) <= max(2 * max(first), 150 * 1024), text
    assert max(last) <= 512 * 1024, text


def test_workload_model_follows_set_semantics_and_drops_aborted_units(tmp_path: Path) -> None:
    """The producer's reference is only as good as its model: check it against the real applier."""
    work = Workload(seed=3, entities=50)
    logs = tmp_path / "logs"
    counts = {"aborted": 0, "implicit": 0, "delete": 0, "removed": 0}

    produced, model, _ = produce(logs, rate=1e6, seconds=400 / 1e6, rotate=150, seed=3, entities=50)
    assert produced == 400
    for n in range(1, 401):
        names = [type(e).__name__ for e in work.patch(n)]
        counts["aborted"] += "TxAbort" in names
        counts["implicit"] += "TxCommit" not in names
        counts["delete"] += "Delete" in names
        committed = names[names.index("TxAbort") + 1 :] if "TxAbort" in names else names
        counts["removed"] += "Add" not in committed
    assert all(v >= 5 for v in counts.values()), counts  # every kind of patch occurs
    target = MemoryTarget()
    files = sorted(logs.glob("*.jellyp"))
    assert len(files) == 3
    for f in files:
        apply_file(f, target)
    out = io.BytesIO()
    write_dump(target, "nq", out)
    got = sorted(out.getvalue().decode().splitlines(keepends=True))
    assert got == model.nquads() == work.nquads()
    assert len(got) > 50


def test_closed_log_appender_frees_its_encoder_without_a_full_gc(tmp_path: Path) -> None:
    """A producer that rotates segments must not keep every closed segment's encoder alive.

    Found by the soak's producer (10,000 patches per segment): its RSS grew by ~2 MB per
    1,000 patches (225 MB after 100,000 patches in 10 segments, 27 MB after a
    ``gc.collect()``), because each closed ``LogAppender``'s encoder, with up to 65,536
    cached terms per cache, stays in a reference cycle until Python's generation-2
    collection runs.
    """
    from patchsync.logs.patch_logs import LogAppender
    from patchsync.options import PatchOptions
    from patchsync.terms.ntriples import NTriplesTerms

    work = Workload(seed=5, entities=100)
    gc.disable()
    try:
        with LogAppender(tmp_path / "a.jellyp", PatchOptions(), NTriplesTerms()) as out:
            for n in range(1, 200):
                out.write(work.patch(n))
            encoder = weakref.ref(out.encoder)
        del out
        assert encoder() is None
    finally:
        gc.enable()
