"""Two ``patchsync append`` processes on one head: exactly one appends, the other is refused
with one line naming the log, its head and the patch's prev (docs/design.md §6).

The chain is checked against the head read under the log's lock; read before it, both
writers saw the same head and both appended: a fork every reader then stops at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.logs.append import log_head
from patchsync.logs.patch_logs import read_events

from .process_helpers import wait_for
from .test_tail import write_patches

REPO = Path(__file__).resolve().parent.parent


def _chain(path: Path, name: str, first: int, count: int, after: str) -> Path:
    """``count`` patches ``urn:NAME:i`` chained on ``after``."""
    from patchsync import Add, Header, PatchEnd, TxCommit, TxStart
    from patchsync.logs.patch_logs import LogAppender
    from patchsync.terms.ntriples import NTriplesTerms

    events: list[object] = []
    prev = after
    for i in range(first, first + count):
        pid = f"urn:{name}:{i}"
        events += [Header("id", f"<{pid}>"), Header("prev", f"<{prev}>"), TxStart()]
        events += [Add(f"<http://{name}/s{i}>", "<http://x/p>", f'"{j}"', None) for j in range(4)]
        events += [TxCommit(), PatchEnd()]
        prev = pid
    from importlib import import_module

    options = import_module("tests.test_tail").producer.OPTIONS
    with LogAppender(path, options, NTriplesTerms()) as out:
        out.write(events)  # type: ignore[arg-type]
    return path


def _start(src: Path, dest: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", "append", str(src), "-o", str(dest)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _has_open(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == str(path) for fd in fds.iterdir())
    except OSError:  # the process ended or closed an fd while listed
        return False


def _patch_ids(log: Path) -> list[str]:
    from patchsync import Header

    ids = []
    for event in read_events(log):
        if type(event) is Header and event.key == "id":
            ids.append(str(event.value))
    return ids


@pytest.mark.parametrize("trial", range(3))
def test_two_appends_on_one_head_one_wins(tmp_path: Path, trial: int) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 10)
    head = log_head(log)
    assert head == "urn:patch:10"
    # A short source and a long one. The short append starts once the long one reads its
    # source to check the chain (after reading the log's head), and ends while that check
    # still runs: a head read before the lock is then the old one.
    short = _chain(tmp_path / "short.jellyp", "short", 1, 1 + trial, head)
    long = _chain(tmp_path / "long.jellyp", "long", 1, 8000, head)
    procs = {"long": _start(long, log)}
    wait_for(lambda: _has_open(procs["long"].pid, long), 120, "the long append to check its chain")
    procs["short"] = _start(short, log)
    results = {name: (p.wait(timeout=120), p.communicate()) for name, p in procs.items()}
    codes = {name: code for name, (code, _) in results.items()}
    assert sorted(codes.values())[0] == 0 and sorted(codes.values())[1] != 0, results
    loser = next(name for name, code in codes.items() if code != 0)
    winner = next(name for name, code in codes.items() if code == 0)
    err = results[loser][1][1]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    new_head = log_head(log)
    assert str(log) in lines[0] and f"<{head}>" in lines[0] and f"<{new_head}>" in lines[0], lines[0]
    assert "Traceback" not in err
    # The log is one chain: the first ten, then the winner's patches only.
    ids = _patch_ids(log)
    assert ids[:10] == [f"urn:patch:{i}" for i in range(1, 11)]
    assert all(i.startswith(f"urn:{winner}:") for i in ids[10:]), ids[10:12]
    assert new_head is not None and new_head.startswith(f"urn:{winner}:")


def test_a_second_recorder_on_a_directory_log_is_refused_at_a_rotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a rotation a writer lets go of the finished segment's lock before the next segment
    exists; a second writer starting right then found the old head free to continue. The
    directory's lock, held for the writer's life, refuses it."""
    from rdflib import URIRef

    from patchsync import Add, Header, PatchEnd, TxCommit, TxStart, UsageError
    from patchsync.capture._log import DIRECTORY_LOCK, LogWriter, segment_files

    logs = tmp_path / "logs"
    first = LogWriter(logs, max_segment_patches=1)
    open_file = LogWriter._open_file
    seen: list[BaseException | None] = []

    def rotate_with_a_rival(self: LogWriter, path: Path, options: object) -> None:
        if self is first and not seen:  # between closing segment 1 and creating segment 2
            try:
                LogWriter(logs, max_segment_patches=1).close()
                seen.append(None)
            except UsageError as exc:
                seen.append(exc)
        open_file(self, path, options)  # type: ignore[arg-type]

    monkeypatch.setattr(LogWriter, "_open_file", rotate_with_a_rival)
    try:
        for event in (
            Header("id", URIRef("urn:p:1")),
            TxStart(),
            Add(URIRef("http://x/s"), URIRef("http://x/p"), URIRef("http://x/o")),
            TxCommit(),
            PatchEnd(),
        ):
            first.sink.send(event)  # type: ignore[attr-defined]
        first.commit("urn:p:1")  # one patch fills the segment: the writer rotates
    finally:
        first.close()
    assert len(seen) == 1 and seen[0] is not None, "a second writer took the log during a rotation"
    assert "another writer holds the log's lock" in str(seen[0])
    assert (logs / DIRECTORY_LOCK).exists() and DIRECTORY_LOCK not in {p.name for p in segment_files(logs)}
