"""A base loaded into an empty SQL target builds the quad table's lookup indexes after the
quads (patchsync.apply.targets.sql.bulk), inside the base's one unit.

What must hold: the indexes are left out while the quads go in (else nothing was gained),
they are back, as the migrations made them, when the unit commits; a failed or killed load
leaves the indexes and an empty table (the unit is atomic, docs/design.md §2, and DDL is
transactional in both databases); a table that already holds quads is never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect

from patchsync.apply.api import apply_file
from patchsync.apply.base import load_base
from patchsync.apply.target import CAN_BULK_LOAD, Checkpoint, Quad, capabilities_of, dumpable
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.apply.targets.sql import SqlTarget, bulk
from patchsync.codec.rdf_encoder import encode_statements
from patchsync.errors import ApplyError
from patchsync.events import Add, PatchEnd, TxCommit, TxStart
from patchsync.logs.patch_logs import write_events
from patchsync.terms.ntriples import NTriplesTerms

ROOT = Path(__file__).resolve().parents[1]
EX = "http://example.org/"


def write_base(path: Path, count: int) -> Path:
    """A Jelly-RDF base of ``count`` quads in two graphs and the default one."""
    graphs = [None, f"<{EX}g1>", f"<{EX}g2>"]
    statements = ((f"<{EX}s{i // 3}>", f"<{EX}p{i % 7}>", f'"value {i}"', graphs[i % 3]) for i in range(count))
    path.write_bytes(encode_statements(statements, None, NTriplesTerms()))
    return path


def indexes(url: str) -> list[tuple[str, tuple[str, ...], bool]]:
    """The quad table's indexes as the database reports them: (name, columns, unique)."""
    engine = create_engine(url)
    try:
        found = inspect(engine).get_indexes("ps_quads")
    finally:
        engine.dispose()
    return sorted((str(i["name"]), tuple(str(c) for c in i["column_names"]), bool(i["unique"])) for i in found)


def quads_of(target: Any) -> list[tuple[str, str, str, str]]:
    return sorted(dumpable(target).quads())


class Watching(SqlTarget):
    """A SQL target noting, at each add, which secondary indexes the open unit sees; and
    failing at the add numbered ``fail_at`` (a fault after quads went in)."""

    def __init__(self, url: str, fail_at: int = 0) -> None:
        super().__init__(url)
        self.seen: list[int] = []
        self.fail_at = fail_at

    def add(self, quads: Sequence[Quad]) -> int:
        self.seen.append(len(bulk.secondary_indexes(self.link.cur, self.dialect)))
        if len(self.seen) == self.fail_at:
            raise ApplyError("injected fault after quads were added")
        return super().add(quads)


def test_the_sql_target_declares_bulk_loads(sql_url: str) -> None:
    with SqlTarget(sql_url) as target:
        assert CAN_BULK_LOAD in capabilities_of(target)
    assert CAN_BULK_LOAD not in capabilities_of(MemoryTarget())


def test_a_base_goes_in_without_the_indexes_and_ends_with_them(tmp_path: Path, sql_url: str) -> None:
    base = write_base(tmp_path / "base.jelly", 12_000)  # three batches of base.BATCH
    with SqlTarget(sql_url):
        pass  # the schema, as the migrations make it
    before = indexes(sql_url)
    assert len([i for i in before if not i[2]]) == 3, before  # posg, ogsp, gspo
    target = Watching(sql_url)
    report = load_base(target, base)
    target.close()
    assert report.quads == 12_000
    assert target.seen == [0, 0, 0]  # every batch went in with no secondary index
    assert indexes(sql_url) == before
    reference = MemoryTarget()
    load_base(reference, base)
    with SqlTarget(sql_url) as replica:
        assert quads_of(replica) == quads_of(reference)
        assert replica.checkpoint(f"base:{base.resolve()}") is not None


def test_a_failed_base_load_keeps_the_indexes_and_loads_nothing(tmp_path: Path, sql_url: str) -> None:
    base = write_base(tmp_path / "base.jelly", 12_000)
    with SqlTarget(sql_url):
        pass
    before = indexes(sql_url)
    target = Watching(sql_url, fail_at=3)
    with pytest.raises(ApplyError, match="injected fault"):
        load_base(target, base)
    # Committing what is left (the CLI discards instead) must not drop the indexes: the
    # unit's rollback restored them with the empty table.
    target.close()
    assert target.seen == [0, 0, 0]
    assert indexes(sql_url) == before
    with SqlTarget(sql_url) as replica:
        assert quads_of(replica) == []
        assert replica.head() is None


def test_a_table_holding_quads_keeps_its_indexes(sql_url: str) -> None:
    quad = (f"<{EX}s>", f"<{EX}p>", f"<{EX}o>", None)
    with SqlTarget(sql_url) as target:
        target.begin()
        target.add([quad])
        target.commit("a", Checkpoint(1, 0, 0), [])
        target.flush()
        before = indexes(sql_url)
        target.begin()
        assert target.defer_indexes() is False
        target.add([(f"<{EX}s2>", f"<{EX}p>", f"<{EX}o>", None)])
        target.commit("a", Checkpoint(2, 0, 0), [])
    assert indexes(sql_url) == before


def test_a_load_killed_midway_leaves_the_indexes_and_an_empty_table(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.jelly", 300_000)
    db = tmp_path / "replica.db"
    url = f"sqlite:///{db}"
    with SqlTarget(url):
        pass
    before = indexes(url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "import sys; from patchsync.apply.base import load_base; from patchsync.apply.targets.sql import SqlTarget;"
        "load_base(SqlTarget(sys.argv[1]), sys.argv[2]); print('done')"
    )
    child = subprocess.Popen([sys.executable, "-c", code, url, str(base)], env=env, stdout=subprocess.PIPE)
    wal = Path(f"{db}-wal")
    deadline = time.monotonic() + 60
    # Killed once the load has written well past its index drop (the WAL holds its pages).
    while child.poll() is None and time.monotonic() < deadline:
        if wal.exists() and wal.stat().st_size > 4_000_000:
            break
        time.sleep(0.01)
    assert child.poll() is None, "the load ended before it could be killed: make the base larger"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=120)
    assert indexes(url) == before
    with SqlTarget(url) as replica:
        assert quads_of(replica) == []


def test_cli_apply_base_into_sqlite_ends_with_the_indexes(tmp_path: Path) -> None:
    base = write_base(tmp_path / "base.jelly", 6_000)
    log = tmp_path / "after.jellyp"
    added = Add(f"<{EX}new>", f"<{EX}p0>", '"after the base"', None)
    with open(log, "wb") as f:
        write_events([TxStart(), added, TxCommit(), PatchEnd()], f, "jellyp", adapter=NTriplesTerms())
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with SqlTarget(url):
        pass
    before = indexes(url)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", "--base", str(base), str(log), "--target", url],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert indexes(url) == before
    reference = MemoryTarget()
    load_base(reference, base)
    apply_file(log, reference)
    with SqlTarget(url) as replica:
        assert quads_of(replica) == quads_of(reference)
        assert len(quads_of(replica)) == 6_001
