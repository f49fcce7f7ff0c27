"""A replica started from a snapshot (``--base``) follows its own sources only
(docs/snapshots-and-bootstrap.md, docs/design.md §10).

The snapshot holds the position of every source of the target it was taken from; a replica
copied them all, so ``status`` listed, and asked for a lag on every call, servers the replica
never followed, and showed the sentinel row of a whole applied message
(``4611686018427387904``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from patchsync.apply import open_target
from patchsync.apply.base import BASE_SOURCE_PREFIX
from patchsync.apply.target import PAST, Checkpoint

from .grpc_helpers import ServeProcess, cli
from .serve_helpers import chain_log, patch_id

RUN = [sys.executable, "-m", "patchsync"]
#: Addresses nobody serves (port 9: discard, closed on a test machine): asking them for a
#: lag fails, which ``status`` would show.
ELSEWHERE = ("grpc://127.0.0.1:9/other", "http://127.0.0.1:9/other", "nats://127.0.0.1:9/other")


def _status(target: str, cwd: Path) -> tuple[list[dict[str, object]], str]:
    done = subprocess.run([*RUN, "status", "--target", target, "--json"], capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    text = subprocess.run([*RUN, "status", "--target", target], capture_output=True, text=True, cwd=cwd)
    assert text.returncode == 0, text.stderr
    return json.loads(done.stdout)["sources"], text.stdout


def _primary_following_elsewhere(tmp_path: Path, log: Path) -> str:
    """A primary that applied ``log`` and also followed sources this test's replicas do not."""
    primary = f"sqlite:///{tmp_path / 'primary.db'}"
    subprocess.run([*RUN, "apply", str(log), "--target", primary], check=True, capture_output=True)
    target = open_target(primary)
    try:
        for n, name in enumerate(ELSEWHERE, start=1):
            target.checkpoint(name)
            target.begin()
            target.commit(name, Checkpoint(n, PAST, PAST, n, patch_id(n), name), [])
        target.flush()
    finally:
        target.close()
    return primary


def test_a_replica_keeps_the_checkpoints_of_its_own_sources_only(tmp_path: Path) -> None:
    first = chain_log(tmp_path / "first.jellyp", 5)
    primary = _primary_following_elsewhere(tmp_path, first)
    snap = tmp_path / "snap.jelly"
    subprocess.run([*RUN, "snapshot", "--target", primary, "-o", str(snap)], check=True, capture_output=True)
    rows, _ = _status(primary, tmp_path)
    assert {r["source"] for r in rows} >= set(ELSEWHERE)  # the snapshot holds them

    later = chain_log(tmp_path / "later.jellyp", 8)
    replica = f"sqlite:///{tmp_path / 'replica.db'}"
    done = subprocess.run(
        [*RUN, "apply", "--base", str(snap), str(later), "--target", replica], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    rows, text = _status(replica, tmp_path)
    sources = {str(r["source"]) for r in rows}
    assert sources == {str(later.resolve()), BASE_SOURCE_PREFIX + str(snap.resolve())}, sources
    assert "127.0.0.1:9" not in text and "lag unknown" not in text, text
    assert str(PAST) not in text
    later_row = next(r for r in rows if r["source"] == str(later.resolve()))
    assert (later_row["patches"], later_row["last_id"], later_row["lag_bytes"]) == (8, patch_id(8), 0)


def test_a_replica_of_a_served_topic_shows_no_sentinel(tmp_path: Path) -> None:
    first = chain_log(tmp_path / "first.jellyp", 5)
    everything = chain_log(tmp_path / "all.jellyp", 9)
    primary = _primary_following_elsewhere(tmp_path, first)
    snap = tmp_path / "snap.jelly"
    subprocess.run([*RUN, "snapshot", "--target", primary, "-o", str(snap)], check=True, capture_output=True)
    server = ServeProcess(["--topic", "log=log"], tmp_path).start()
    try:
        cli("publish", str(everything), server.url("log"), cwd=tmp_path)
        replica = f"sqlite:///{tmp_path / 'replica.db'}"
        args = ["tail", server.url("log"), "--target", replica, "--once"]
        done = cli(*args, "--base", str(snap), cwd=tmp_path)
        assert "continuing after patch" in done.stderr
        again = cli(*args, cwd=tmp_path)  # resumes from the checkpoint the base installed
        rows, text = _status(replica, tmp_path)
    finally:
        server.close()
    for output in (done.stderr, again.stderr, text, json.dumps(rows)):
        assert str(PAST) not in output, output
    assert "127.0.0.1:9" not in text
    topic = next(r for r in rows if r["source"] == server.url("log"))
    assert (topic["patches"], topic["last_id"], topic["lag_messages"]) == (9, patch_id(9), 0)
