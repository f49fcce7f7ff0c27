"""``file:`` targets written by several processes at once: each write takes the target's lock
and starts from what the others committed, so no process overwrites another's units
(docs/design.md §3, "file targets and other processes")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from patchsync import Add, Header, PatchEnd, PatchOptions, StatementType, TxCommit, TxStart
from patchsync.apply.targets.file import FileTarget
from patchsync.logs.patch_logs import LogAppender

from .process_helpers import stop, wait_for_value

REPO = Path(__file__).resolve().parent.parent
OPTS = PatchOptions(statement_type=StatementType.TRIPLES)
PATCHES = 150
ROWS = 8


def write_log(path: Path, name: str, patches: int = PATCHES, first: int = 0) -> Path:
    """A chained log of ``patches`` patches of ``ROWS`` triples each, its IRIs under ``name``."""
    events: list[object] = []
    for n in range(first, first + patches):
        events.append(Header("id", URIRef(f"urn:{name}:{n}")))
        if n:
            events.append(Header("prev", URIRef(f"urn:{name}:{n - 1}")))
        events += [
            TxStart(),
            *(Add(URIRef(f"http://{name}/s{n}"), URIRef("http://x/p"), Literal(i)) for i in range(ROWS)),
        ]
        events += [TxCommit(), PatchEnd()]
    with LogAppender(path, OPTS) as appender:
        appender.write(events)  # type: ignore[arg-type]
    return path


def patchsync(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def quads_of(path: Path) -> set[tuple[str, str, str, str]]:
    return set(FileTarget(path).quads())


@pytest.mark.parametrize("trial", range(3))
def test_two_appliers_of_different_logs_keep_both(tmp_path: Path, trial: int) -> None:
    a = write_log(tmp_path / "a.jellyp", "a")
    b = write_log(tmp_path / "b.jellyp", "b")
    out = tmp_path / "out.nq"
    procs = [
        patchsync("apply", str(log), "--target", f"file:{out}", "--chain", "ignore", "--no-progress") for log in (a, b)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    quads = quads_of(out)
    subjects = {q[0].split("/")[2] for q in quads}
    assert subjects == {"a", "b"}
    assert len(quads) == 2 * PATCHES * ROWS
    target = FileTarget(out)
    assert {cp.source.rsplit("/", 1)[1] for cp in target.sources()} == {"a.jellyp", "b.jellyp"}
    ids = [r.patch_id for r in target.history]
    assert len(ids) == len(set(ids)) == 2 * PATCHES


def test_tail_daemon_and_manual_apply_on_one_file(tmp_path: Path) -> None:
    a = write_log(tmp_path / "a.jellyp", "a", patches=20)
    b = write_log(tmp_path / "b.jellyp", "b")
    out = tmp_path / "out.nq"

    def tailed() -> int:
        cp = FileTarget(out).checkpoint(str(a.resolve())) if out.exists() else None
        return 0 if cp is None else cp.patches

    tail = patchsync(
        "tail", str(a), "--target", f"file:{out}", "--chain", "ignore", "--poll", "--poll-interval", "0.05"
    )
    try:
        wait_for_value(lambda: tailed(), 20, "the daemon's first units")
        apply = patchsync("apply", str(b), "--target", f"file:{out}", "--chain", "ignore", "--no-progress")
        for step in range(1, 4):  # the daemon keeps applying while the manual apply runs
            write_log(a, "a", patches=20, first=20 * step)
        _, err = apply.communicate(timeout=120)
        assert apply.returncode == 0, err
        # And after it: the daemon's next write starts from the file the apply left.
        write_log(a, "a", patches=20, first=80)
        wait_for_value(lambda: tailed(), 100, "the daemon's last units")
    finally:
        code, err = stop(tail)
    assert code == 0, err
    quads = quads_of(out)
    assert {q[0].split("/")[2] for q in quads} == {"a", "b"}
    assert len(quads) == (100 + PATCHES) * ROWS
    ids = [r.patch_id for r in FileTarget(out).history]
    assert len(ids) == len(set(ids)) == 100 + PATCHES


def test_a_lock_file_sits_beside_the_data(tmp_path: Path) -> None:
    a = write_log(tmp_path / "a.jellyp", "a", patches=2)
    out = tmp_path / "out.trig"
    proc = patchsync("apply", str(a), "--target", f"file:{out}", "--no-progress")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert (tmp_path / "out.trig.lock").exists()
    assert len(quads_of(out)) == 2 * ROWS


def test_begin_reloads_what_another_writer_committed(tmp_path: Path) -> None:
    """The contract the applier relies on: after ``begin`` the target holds the lock and its
    head, applied ids, checkpoints and quads include every other writer's committed units."""
    from patchsync.apply.target import Checkpoint, PatchRecord

    out = tmp_path / "out.nq"
    first, second = FileTarget(out), FileTarget(out)  # both opened before either writes
    quad = ("<http://x/s>", "<http://x/p>", '"1"', "")
    first.begin()
    first.add([quad])
    record = PatchRecord("urn:p:1", None, "log-a", 10, 1, 0, 1, 0, 0, 0.0)
    first.commit("log-a", Checkpoint(10, 1, 0, 1, "urn:p:1"), [record])
    first.flush()
    assert second.head() is None and not second.has_patch("urn:p:1")  # loaded before the write
    second.begin()
    assert second.head() == "urn:p:1" and second.has_patch("urn:p:1")
    assert second.checkpoint("log-a") is not None and quad in set(second.quads())
    second.add([("<http://x/s>", "<http://x/p>", '"2"', "")])
    second.commit("log-b", Checkpoint(5, 1, 0, 1, None), [])
    second.close()
    first.close()
    assert len(quads_of(out)) == 2
    assert {s.source for s in FileTarget(out).sources()} == {"log-a", "log-b"}
