"""The tail daemon against real files and a real daemon process (``patchsync tail``).

Producers append with :class:`LogAppender` (whole frames, one write each) or write raw
bytes in pieces (half frames, one byte at a time, a writer dying mid-frame). The daemon's
target must always equal the reference target (:class:`MemoryTarget` fed by ``apply``) on
the log's committed prefix: while it runs, after ``kill -9`` at random moments and at the
end.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file, apply_stream
from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import UsageError
from patchsync.logs.patch_logs import LogAppender
from patchsync.tail import Tailer, TailOptions
from patchsync.terms.ntriples import NTriplesTerms

from .apply_helpers import state
from .process_helpers import stop, wait_for, wait_for_value

_spec = importlib.util.spec_from_file_location("producer", Path(__file__).parent.parent / "examples" / "producer.py")
assert _spec is not None and _spec.loader is not None
producer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(producer)


# -- helpers -----------------------------------------------------------------------------


def write_patches(path: Path, first: int, last: int, **kwargs: Any) -> None:
    """Append patches ``first..last`` with a LogAppender (one write per frame)."""
    with LogAppender(path, producer.OPTIONS, NTriplesTerms()) as out:
        for n in range(first, last + 1):
            out.write(producer.patch_events(n, **kwargs))


def log_bytes(first: int, last: int, tmp: Path) -> bytes:
    path = tmp / f"scratch-{first}-{last}.jellyp"
    write_patches(path, first, last)
    data = path.read_bytes()
    path.unlink()
    return data


def reference(*paths: Path) -> Any:
    target = MemoryTarget()
    for p in paths:
        apply_file(p, target)
    return state(target)


def reference_prefix(path: Path, offset: int) -> Any:
    """The reference state of ``path``'s frames before byte ``offset``."""
    target = MemoryTarget()
    apply_stream(io.BytesIO(path.read_bytes()[:offset]), target, "jellyp", source="ref")
    return state(target)


def sql_state(url: str) -> Any:
    with SqlTarget(url) as t:
        return state(t)


def checkpoints(url: str) -> dict[str, Any]:
    with SqlTarget(url) as t:
        return {s.source: s.checkpoint for s in t.sources()}


def patches_applied(url: str) -> int:
    try:
        return sum(cp.patches for cp in checkpoints(url).values())
    except Exception:
        return -1


def start_daemon(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", "tail", *args, "--poll-interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- live appends ------------------------------------------------------------------------


def test_whole_frames_applied_as_they_arrive_and_sigterm_exits_0(
    tmp_path: Path, sqlite_url: str, daemons: list[Any]
) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 5)
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    wait_for_value(lambda: patches_applied(sqlite_url), 5, "first patches")
    for n in range(6, 40):
        write_patches(log, n, n)
    wait_for_value(lambda: patches_applied(sqlite_url), 39, "appended patches")
    code, err = stop(d)
    assert code == 0, err
    assert sql_state(sqlite_url) == reference(log)
    assert "event=applied" in err and "lag_bytes=" in err and "event=stop" in err


def test_sigterm_during_a_backlog_commits_whole_units_and_exits_0(
    tmp_path: Path, sqlite_url: str, daemons: list[Any]
) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 3000)
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    wait_for(lambda: patches_applied(sqlite_url) > 0, what="the drain to start")
    code, err = stop(d)
    assert code == 0, err
    [cp] = checkpoints(sqlite_url).values()
    target = MemoryTarget()
    apply_stream(io.BytesIO(_prefix_bytes(log, cp.offset)), target, "jellyp", source="ref")
    assert sql_state(sqlite_url) == state(target)  # exactly the units up to the checkpoint
    r = subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", str(log), "--target", sqlite_url, "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert sql_state(sqlite_url) == reference(log)


def test_half_frames_and_one_byte_at_a_time(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    data = log_bytes(1, 30, tmp_path)
    log = tmp_path / "log.jellyp"
    log.write_bytes(b"")
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    third = len(data) // 3
    with open(log, "ab", buffering=0) as f:
        # First third in pieces that cut frames anywhere, then one byte at a time.
        pos = 0
        rng = random.Random(5)
        while pos < third:
            step = rng.randrange(1, 150)
            f.write(data[pos : pos + step])
            pos += step
            time.sleep(0.01)
        for i in range(pos, 2 * third):
            f.write(data[i : i + 1])
            if i % 50 == 0:
                time.sleep(0.005)
        f.write(data[2 * third :])
    wait_for_value(lambda: patches_applied(sqlite_url), 30, "all patches")
    code, err = stop(d)
    assert code == 0, err
    assert sql_state(sqlite_url) == reference(log)


def test_new_segments_in_a_directory(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    d = start_daemon(str(logs), "--target", sqlite_url)
    daemons.append(d)
    producer.produce(logs, count=95, rate=400, rotate=20)
    files = sorted(logs.glob("*.jellyp"))
    assert len(files) == 5
    wait_for_value(lambda: patches_applied(sqlite_url), 95, "all segments")
    code, err = stop(d)
    assert code == 0, err
    assert sql_state(sqlite_url) == reference(*files)
    summary = [ln for ln in err.splitlines() if "event=summary" in ln]
    assert [("state=finished" in ln) for ln in summary] == [True] * 4 + [False]  # all but the newest


def test_writer_crash_mid_frame_then_next_writer_truncates(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 10)
    full = log_bytes(1, 11, tmp_path)
    size = log.stat().st_size
    tail_frame = full[size:]
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    wait_for_value(lambda: patches_applied(sqlite_url), 10, "first patches")
    with open(log, "ab") as f:  # a writer that dies half-way through a frame
        f.write(tail_frame[: len(tail_frame) // 2])
    time.sleep(0.5)
    write_patches(log, 11, 20)  # the next writer cuts the partial frame off and appends
    wait_for_value(lambda: patches_applied(sqlite_url), 20, "patches after the crash")
    code, err = stop(d)
    assert code == 0, err
    assert sql_state(sqlite_url) == reference(log)


# -- restarts ----------------------------------------------------------------------------


def _kill_loop(url: str, tmp_path: Path, kills: int) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    writer = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).parent.parent / "examples" / "producer.py"),
            str(logs),
            "--count",
            "100000",
            "--rate",
            "300",
            "--rotate",
            "150",
        ],
        stderr=subprocess.DEVNULL,
    )
    rng = random.Random(11)
    seen: set[int] = set()
    try:
        for _ in range(kills):
            before = patches_applied(url)
            d = start_daemon(str(logs), "--target", url)
            # Kill at a random moment after the daemon has made progress: a fixed sleep
            # alone could end before a slow start-up (a loaded CI machine) applied anything.
            wait_for(lambda before=before: patches_applied(url) > before, timeout=60, what="progress")
            time.sleep(rng.uniform(0.0, 0.6))
            d.kill()
            d.communicate()
            # After kill -9 the target holds exactly the units up to each stored checkpoint.
            cps = checkpoints(url)
            seen.add(sum(cp.patches for cp in cps.values()))
            if cps:
                # Apply every file up to the end of its checkpoint's frame, in order.
                target = MemoryTarget()
                for f in sorted(logs.glob("*.jellyp")):
                    cp = cps.get(str(f.resolve()))
                    if cp is None:
                        break
                    prefix = _prefix_bytes(f, cp.offset)
                    apply_stream(io.BytesIO(prefix), target, "jellyp", source=str(f))
                assert sql_state(url) == state(target)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert len(seen) >= kills // 4  # the daemon made progress between many kills
    files = sorted(logs.glob("*.jellyp"))
    code = subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", str(logs), "--target", url, "--once"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert code.returncode == 0, code.stderr
    # The producer was killed too: its last file may end in a partial frame, never applied.
    expected = MemoryTarget()
    for f in files:
        apply_stream(io.BytesIO(_whole_frames(f.read_bytes())), expected, "jellyp", source=str(f))
    assert sql_state(url) == state(expected)
    assert len(files) >= 2


def _whole_frames(data: bytes) -> bytes:
    from patchsync.codec.framing import read_varint

    pos = 0
    while True:
        h = read_varint(data, pos, len(data))
        if h is None or h[1] + h[0] > len(data):
            return data[:pos]
        pos = h[1] + h[0]


def _prefix_bytes(path: Path, offset: int) -> bytes:
    """The log up to the end of the frame at ``offset`` (checkpoints sit at patch ends here)."""
    from patchsync.codec.framing import read_varint

    data = path.read_bytes()
    h = read_varint(data, offset, len(data))
    assert h is not None
    return data[: h[1] + h[0]]


@pytest.mark.slow
def test_kill_9_loop_sqlite(tmp_path: Path, sqlite_url: str) -> None:
    _kill_loop(sqlite_url, tmp_path, kills=20)


@pytest.mark.slow
@pytest.mark.postgres
def test_kill_9_loop_postgres(tmp_path: Path, pg_url: str) -> None:
    _kill_loop(pg_url, tmp_path, kills=6)


def test_restart_resumes_from_a_snapshot_not_the_start(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 50)
    state_dir = tmp_path / "state"
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        [first] = tailer.run_once()
    assert first.resumed_from == 0 and first.result.patches == 50
    write_patches(log, 51, 60)
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        [second] = tailer.run_once()
    assert second.resumed_from > 0 and second.result.patches == 10
    assert second.result.replayed == 0
    assert sql_state(sqlite_url) == reference(log)
    # A snapshot ahead of the target (a target restored from an older copy) is not used.
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with SqlTarget(other) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        [third] = tailer.run_once()
    assert third.resumed_from == 0 and third.result.patches == 60
    assert sql_state(other) == reference(log)


def test_snapshot_resume_mid_session_keeps_lookups_and_repeated_terms(tmp_path: Path, sqlite_url: str) -> None:
    # One writer session: later frames use lookup entries and repeated terms set earlier.
    data = log_bytes(1, 80, tmp_path)
    frames = _frame_ends(data)
    cut = frames[len(frames) // 2]
    log = tmp_path / "log.jellyp"
    log.write_bytes(data[:cut])
    state_dir = tmp_path / "state"
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        tailer.run_once()
    with open(log, "ab") as f:
        f.write(data[cut:])
    with SqlTarget(sqlite_url) as target, Tailer([log], target, TailOptions(state_dir=state_dir)) as tailer:
        [report] = tailer.run_once()
    assert report.resumed_from == cut and report.result.replayed == 0
    assert report.result.patches == 80 - len(frames) // 2 - 1
    assert sql_state(sqlite_url) == reference(log)


def _frame_ends(data: bytes) -> list[int]:
    from patchsync.codec.framing import read_varint

    ends = []
    pos = 0
    while pos < len(data):
        h = read_varint(data, pos, len(data))
        assert h is not None
        pos = h[1] + h[0]
        ends.append(pos)
    return ends


# -- errors ------------------------------------------------------------------------------


def test_two_daemons_do_not_both_apply_a_log(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 5)
    a = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(a)
    wait_for_value(lambda: patches_applied(sqlite_url), 5, "first daemon")
    b = subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", str(log), "--target", sqlite_url, "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert b.returncode == 1
    assert "another tail daemon is applying this log" in b.stderr
    assert "Traceback" not in b.stderr
    code, err = stop(a)
    assert code == 0, err


@pytest.mark.postgres
def test_two_daemons_on_postgres(tmp_path: Path, pg_url: str, daemons: list[Any]) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 5)
    a = start_daemon(str(log), "--target", pg_url)
    daemons.append(a)
    wait_for_value(lambda: patches_applied(pg_url), 5, "first daemon")
    # No state directory for PostgreSQL: the target's advisory lock refuses the second one.
    b = subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", str(log), "--target", pg_url, "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert b.returncode == 1 and "another applier is applying" in b.stderr, b.stderr
    write_patches(log, 6, 12)
    wait_for_value(lambda: patches_applied(pg_url), 12, "appended patches")
    code, err = stop(a)
    assert code == 0, err
    assert sql_state(pg_url) == reference(log)


def test_shrunk_log_stops_with_one_line(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 20)
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    wait_for_value(lambda: patches_applied(sqlite_url), 20, "patches")
    with open(log, "r+b") as f:
        f.truncate(log.stat().st_size // 2)
    _, err = d.communicate(timeout=120)
    assert d.returncode == 1
    [line] = [ln for ln in err.splitlines() if ln.startswith("patchsync:")]
    assert "shrank" in line and str(log.resolve()) in line
    # Restarting on the shrunk log refuses it: the checkpoint is past its end.
    again = subprocess.run(
        [sys.executable, "-m", "patchsync", "tail", str(log), "--target", sqlite_url, "--once"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1
    assert "Traceback" not in again.stderr and "shrank" in again.stderr


def test_replaced_log_and_keep_going(tmp_path: Path, sqlite_url: str) -> None:
    good = tmp_path / "good.jellyp"
    bad = tmp_path / "bad.jellyp"
    write_patches(good, 1, 5)
    write_patches(bad, 1, 5, seed=2)
    once = [sys.executable, "-m", "patchsync", "tail", "--target", sqlite_url, "--once", "--chain", "ignore"]
    r = subprocess.run([*once, str(good), str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    bad.unlink()
    write_patches(bad, 1, 3, seed=2, rows=2)  # another log under the same name
    write_patches(good, 6, 8)
    r = subprocess.run([*once, str(bad), str(good)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "it was replaced" in r.stderr and "Traceback" not in r.stderr
    assert checkpoints(sqlite_url)[str(good.resolve())].patches == 5  # stopped before good
    r = subprocess.run([*once, "--keep-going", str(bad), str(good)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert checkpoints(sqlite_url)[str(good.resolve())].patches == 8  # the other log went on
    status = subprocess.run(
        [sys.executable, "-m", "patchsync", "status", "--target", sqlite_url], capture_output=True, text=True
    )
    assert "tail failed" in status.stdout and "replaced" in status.stdout


def test_malformed_frame_names_file_and_offset(tmp_path: Path, sqlite_url: str, daemons: list[Any]) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 5)
    size = log.stat().st_size
    d = start_daemon(str(log), "--target", sqlite_url)
    daemons.append(d)
    wait_for_value(lambda: patches_applied(sqlite_url), 5, "patches")
    with open(log, "ab") as f:
        f.write(b"\x03\xff\xff\xff")  # a whole frame that is not an RdfPatchFrame
    _, err = d.communicate(timeout=120)
    assert d.returncode == 1
    [line] = [ln for ln in err.splitlines() if ln.startswith("patchsync:")]
    assert str(log.resolve()) in line and f"byte {size}" in line
    assert sql_state(sqlite_url) == reference_prefix(log, size)


def test_once_applies_what_is_there_and_waits_on_a_partial_frame(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    data = log_bytes(1, 10, tmp_path)
    log.write_bytes(data[: len(data) - 7])  # the last frame is still being written
    cmd = [sys.executable, "-m", "patchsync", "tail", str(log), "--target", sqlite_url, "--once"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert patches_applied(sqlite_url) == 9
    log.write_bytes(data)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sql_state(sqlite_url) == reference(log)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("chain", "loose"),
        ("poll_interval", 0),
        ("poll_interval", float("nan")),
        ("hold_events", 0),
        ("hold_events", 1.5),
        ("snapshot_seconds", -1),
        ("retry_max_delay", 0.01),
        ("retry_timeout", -1),
    ],
)
def test_tail_options_are_checked_and_name_the_parameter(field: str, value: object) -> None:
    with pytest.raises(UsageError, match=field) as info:
        TailOptions(**{field: value})  # type: ignore[arg-type]
    assert "--" not in str(info.value)  # parameter names, not CLI flags


def test_tail_options_are_frozen_and_hold_a_path(tmp_path: Path) -> None:
    options = TailOptions(state_dir=str(tmp_path))  # type: ignore[arg-type]
    assert options.state_dir == tmp_path and isinstance(options.state_dir, Path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.poll = True  # type: ignore[misc]
    assert TailOptions().state_dir is None and TailOptions().chain == "strict"
