"""``patchsync spark-replay`` end to end, in a child process (it starts and stops its own Spark)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.apply import MemoryTarget, apply_file
from patchsync.options import StreamType

from .process_helpers import read_until, wait_for_value
from .test_spark import generate_log, spark_state, typed_log


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", "spark-replay", *args, "--master", "local[2]"],
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard only: a loaded 2-core machine takes minutes per JVM
    )


@pytest.mark.slow
def test_spark_replay_writes_nquads_equal_to_apply(tmp_path: Path) -> None:
    rng = random.Random(11)
    logs = tmp_path / "logs"
    logs.mkdir()
    paths = [typed_log(logs / f"{i}.jellyp", generate_log(rng, 15), StreamType.PUNCTUATED) for i in range(3)]
    bad = tmp_path / "bad.jellyp"
    # Bytes that can never start a frame after a whole log (a log cut inside a frame is one
    # still being written: its whole units are replayed, the rest waits for the next run).
    bad.write_bytes(paths[1].read_bytes() + b"\xff" * 12)

    done = _run(str(logs), "--out", str(tmp_path / "out"), "--format", "nq")
    assert done.returncode == 0, done.stderr
    current = (tmp_path / "out" / "CURRENT").read_text().strip()
    parts = list((tmp_path / "out" / current).glob("part-*"))
    assert parts and all(f.suffix == ".nq" for f in parts)  # named for what they hold, not part-*.txt
    lines = sorted(line for f in parts for line in f.read_text().splitlines())
    target = MemoryTarget()
    for path in paths:
        apply_file(path, target, chain="ignore")
    expected = sorted(f"{s} {p} {o} {g} ." if g else f"{s} {p} {o} ." for s, p, o, g in target.quads())
    assert lines == expected

    failed = _run(str(paths[0]), str(bad), "--out", str(tmp_path / "out2"))
    assert failed.returncode == 1
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"patchsync: {bad}, byte ")
    assert "Traceback" not in failed.stderr and "at org.apache" not in failed.stderr


@pytest.mark.slow
def test_spark_replay_again_folds_new_units_and_refuses_a_cut_log(spark: Any, tmp_path: Path) -> None:
    from patchsync.spark import current_version, read_state

    rng = random.Random(12)
    logs = tmp_path / "logs"
    logs.mkdir()
    whole = typed_log(tmp_path / "whole.jellyp", generate_log(rng, 20), StreamType.PUNCTUATED)
    data = whole.read_bytes()
    live = logs / "a.jellyp"
    live.write_bytes(data[: len(data) // 2])
    state = tmp_path / "state"
    assert _run(str(logs), "--out", str(state), "--format", "nq").returncode == 0
    live.write_bytes(data)
    done = _run(str(logs), "--out", str(state), "--format", "nq", "--keep", "1")
    assert done.returncode == 0 and "v000002: nq delta written" in done.stdout, done.stderr
    # --keep 1: the current version, made of the full version v000001 and its delta v000002.
    assert sorted(p.name for p in state.iterdir() if not p.name.startswith(".")) == ["CURRENT", "v000001", "v000002"]
    assert (state / ".lock").exists()
    version = current_version(state)
    assert version is not None and [layer.name for layer in version.layers] == ["v000001", "v000002"]
    target = MemoryTarget()
    apply_file(whole, target, chain="ignore")
    assert spark_state(read_state(spark, version)) == set(target.quads())

    live.write_bytes(data[:100])
    refused = _run(str(logs), "--out", str(state), "--format", "nq")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"patchsync: {live}, byte 100: the log shrank below what was already decoded (byte {len(data)}); "
        f"it was truncated or rewritten; it cannot be folded into {state} (--full replays every log)"
    )
    assert "Traceback" not in refused.stderr


@pytest.mark.slow
def test_spark_replay_follow_keeps_the_state_up_to_date(spark: Any, tmp_path: Path) -> None:
    from patchsync.spark import current_version, read_state

    rng = random.Random(13)
    logs = tmp_path / "logs"
    logs.mkdir()
    whole = typed_log(tmp_path / "whole.jellyp", generate_log(rng, 25), StreamType.FRAME)
    data = whole.read_bytes()
    live = logs / "a.jellyp"
    live.write_bytes(data[: len(data) // 3])
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchsync", "spark-replay", str(logs), "--out", str(state), "--follow",
         "--trigger", "0.5", "--master", "local[1]", "--format", "nq"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        read_until(proc, "following 1 log path(s), trigger 0.5s")

        def position() -> int:
            version = current_version(state)
            return version.logs["0"]["at"] if version is not None else -1

        for end in (2 * len(data) // 3, len(data)):
            with open(live, "ab") as f:
                f.write(data[live.stat().st_size : end])
        wait_for_value(position, len(data), "the state's position at the log's end")
        version = current_version(state)
        assert version is not None
        target = MemoryTarget()
        apply_file(whole, target, chain="ignore")
        assert spark_state(read_state(spark, version)) == set(target.quads())

        # A log cut under the query stops it, in one line.
        live.write_bytes(data[:50])
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 1, err
        assert err.strip().splitlines()[-1].startswith(f"patchsync: {live}, byte 50: the log shrank below")
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


#: A second process that holds a state directory's lock until its stdin closes.
_HOLDER = (
    "import sys; from pathlib import Path; from patchsync.spark import state_lock\n"
    "with state_lock(Path(sys.argv[1])):\n"
    "    print('held', file=sys.stderr, flush=True)\n"
    "    sys.stdin.read()\n"
)


def _holder(state: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(state)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    read_until(proc, "held")
    return proc


def test_a_second_run_on_a_locked_state_is_refused_and_a_dead_holders_lock_taken_over(tmp_path: Path) -> None:
    from patchsync.errors import UsageError
    from patchsync.spark import state_lock

    logs, state = tmp_path / "logs", tmp_path / "state"
    logs.mkdir()
    first = _holder(state)
    try:
        for extra in ([], ["--follow"]):
            # Refused before a JVM starts, in one line naming the directory and the holder.
            refused = _run(str(logs), "--out", str(state), *extra)
            assert refused.returncode == 2  # a usage error
            assert refused.stderr.strip().splitlines() == [
                f"patchsync: {state.resolve()}: another spark-replay (PID {first.pid}) is writing this state "
                "directory; one run at a time"
            ]
        with pytest.raises(UsageError, match=rf"\(PID {first.pid}\)"), state_lock(state):
            pass
    finally:
        first.kill()  # SIGKILL: the lock file stays, naming a dead process
        first.communicate()
    assert (state / ".lock").read_text().strip() == str(first.pid)
    second = _holder(state)  # taken over
    try:
        assert (state / ".lock").read_text().strip() == str(second.pid)
    finally:
        second.communicate("")
    assert second.returncode == 0
    # Counted within a process: a run inside a held lock does not wait on itself.
    with state_lock(state), state_lock(state):
        pass
    with state_lock(state):
        pass
