"""``apply`` resumes a ``.jellyp`` log from a validated decoder snapshot (issue #14).

docs/design.md §3: the checkpoint is authoritative and resuming passes over every event up
to it; persisting the decoder state with the checkpoint makes that pass O(1). These tests
count what the second apply decodes (``ApplyResult.replayed``: events decoded and passed
over as applied before; the snapshot's offset), not time, and check the state against an
apply from scratch into the reference target.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.resume import LogReader, resume_point_file
from patchsync.apply.targets.file import FileTarget
from patchsync.apply.targets.sql import SqlTarget
from patchsync.codec.rdfp import read_rdfp
from patchsync.logs.patch_logs import LogAppender
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms

from .apply_helpers import iri, state

OPTIONS = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS)


def _patch(n: int) -> str:
    prev = f"H prev <urn:p{n - 1}> .\n" if n else ""
    rows = "".join(f"A {iri(f's{n}')} {iri('p')} {iri(f'o{i}')} {iri('g')} .\n" for i in range(20))
    return f"H id <urn:p{n}> .\n{prev}TX .\n{rows}D {iri(f's{n - 1}')} {iri('p')} {iri('o3')} {iri('g')} .\nTC .\nZ .\n"


def _append(path: Path, first: int, count: int) -> None:
    text = "".join(_patch(n) for n in range(first, first + count))
    with LogAppender(path, OPTIONS, NTriplesTerms()) as appender:
        appender.write(read_rdfp(text, NTriplesTerms()))


def _targets(tmp_path: Path) -> dict[str, Any]:
    return {
        "sqlite": lambda: SqlTarget(f"sqlite:///{tmp_path / 'db.sqlite'}"),
        "file": lambda: FileTarget(str(tmp_path / "out.nq")),
    }


@pytest.mark.parametrize("kind", ["sqlite", "file"])
def test_second_apply_decodes_only_the_appended_patch(tmp_path: Path, kind: str) -> None:
    log, snaps = tmp_path / "log.jellyp", tmp_path / "snaps"
    _append(log, 0, 30)
    size = log.stat().st_size
    open_target = _targets(tmp_path)[kind]
    with closing(open_target()) as t:
        first = apply_file(log, t, snapshot_dir=snaps)
    assert (first.patches, first.replayed) == (30, 0)
    assert resume_point_file(snaps, str(log.resolve())).is_file()
    _append(log, 30, 1)
    with closing(open_target()) as t:
        with open(log, "rb") as f:
            assert LogReader(f, t, source=str(log.resolve()), limits=None, snapshot_dir=snaps).resumed_at == size
        second = apply_file(log, t, snapshot_dir=snaps)
        got = state(t)
    # Nothing before the snapshot is decoded again: no event is passed over.
    assert (second.patches, second.replayed, second.added) == (1, 0, 20)
    reference = MemoryTarget()
    apply_file(log, reference)
    assert got == state(reference)


def test_without_a_snapshot_resuming_decodes_the_whole_log(tmp_path: Path) -> None:
    # The differential baseline of the test above: the same second apply, no snapshot.
    log = tmp_path / "log.jellyp"
    _append(log, 0, 30)
    with SqlTarget(f"sqlite:///{tmp_path / 'db.sqlite'}") as t:
        apply_file(log, t)
        _append(log, 30, 1)
        second = apply_file(log, t)
    assert second.patches == 1
    assert second.replayed > 30 * 20


@pytest.mark.parametrize("damage", ["corrupt", "truncate", "foreign"])
def test_a_bad_snapshot_falls_back_to_decoding_from_the_start(tmp_path: Path, damage: str) -> None:
    log, snaps = tmp_path / "log.jellyp", tmp_path / "snaps"
    _append(log, 0, 10)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    with SqlTarget(url) as t:
        apply_file(log, t, snapshot_dir=snaps)
    path = resume_point_file(snaps, str(log.resolve()))
    data = path.read_bytes()
    if damage == "corrupt":
        path.write_bytes(data[:-40] + bytes(b ^ 1 for b in data[-40:]))
    elif damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:  # a valid snapshot of another log stored under this log's name
        other = tmp_path / "other.jellyp"
        _append(other, 100, 12)
        apply_file(other, MemoryTarget(), source=str(log.resolve()), snapshot_dir=snaps, chain="ignore")
    _append(log, 10, 1)
    with SqlTarget(url) as t:
        with open(log, "rb") as f:
            reader = LogReader(f, t, source=str(log.resolve()), limits=None, snapshot_dir=snaps)
            assert (reader.resumed_at, reader.ignored is not None) == (0, True)
        second = apply_file(log, t, snapshot_dir=snaps)
        got = state(t)
    assert second.patches == 1 and second.replayed > 10 * 20
    reference = MemoryTarget()
    apply_file(log, reference)
    assert got == state(reference)


def test_a_snapshot_ahead_of_the_targets_checkpoint_is_not_used(tmp_path: Path) -> None:
    # The snapshot was saved after applying to one target; a new target has no checkpoint.
    log, snaps = tmp_path / "log.jellyp", tmp_path / "snaps"
    _append(log, 0, 10)
    with SqlTarget(f"sqlite:///{tmp_path / 'a.sqlite'}") as a:
        apply_file(log, a, snapshot_dir=snaps)
    with SqlTarget(f"sqlite:///{tmp_path / 'b.sqlite'}") as b:
        result = apply_file(log, b, snapshot_dir=snaps)
        got = state(b)
    assert result.patches == 10
    reference = MemoryTarget()
    apply_file(log, reference)
    assert got == state(reference)
