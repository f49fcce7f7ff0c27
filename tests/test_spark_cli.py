"""``patchsync spark-replay`` end to end, in a child process (it starts and stops its own Spark)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from patchsync.apply import MemoryTarget, apply_file
from patchsync.options import StreamType

from .test_spark import generate_log, typed_log


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", "spark-replay", *args, "--master", "local[2]"],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_spark_replay_writes_nquads_equal_to_apply(tmp_path: Path) -> None:
    rng = random.Random(11)
    logs = tmp_path / "logs"
    logs.mkdir()
    paths = [typed_log(logs / f"{i}.jellyp", generate_log(rng, 15), StreamType.PUNCTUATED) for i in range(3)]
    bad = tmp_path / "bad.jellyp"
    data = paths[1].read_bytes()
    bad.write_bytes(data[: len(data) // 2])

    done = _run(str(logs), "--out", str(tmp_path / "out"), "--format", "nq")
    assert done.returncode == 0, done.stderr
    parts = list((tmp_path / "out").glob("part-*"))
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
