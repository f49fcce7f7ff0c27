"""Exactly once across sources and processes: real ``patchsync`` processes on one target.

The same patches reaching one target by several ways at once (a log under two file names,
a file and a NATS stream) are applied once each; concurrent first starts on an empty
PostgreSQL database all succeed; a tail daemon whose target another process moved on does
not apply a patch again (docs/design.md §3, "Exactly once across sources and processes").
Each scenario is compared with a plain sequential apply of the log.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply import MemoryTarget, apply_file
from patchsync.apply.targets.sql import SqlTarget
from patchsync.streams import publish_logs

from .apply_helpers import state
from .nats_helpers import patch_id, write_chain
from .process_helpers import stop, wait_for

#: Trials of each race: before the fix the PostgreSQL race applied patches twice in most
#: trials (see the report of the change); one trial is a few seconds.
TRIALS = 3


def apply_proc(log: Path, target: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", "apply", str(log), "--target", target, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_together(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[int, str, str]]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        out.append((proc.returncode, stdout, stderr))
    return out


def reference(log: Path) -> Any:
    target = MemoryTarget()
    apply_file(log, target)
    return state(target)


def history(url: str) -> list[Any]:
    with SqlTarget(url) as t:
        return t.history()


def sql_state(url: str) -> Any:
    with SqlTarget(url) as t:
        return state(t)


def counts(stdout: str) -> tuple[int, int]:
    """``(applied, skipped)`` patches from an apply's total line."""
    line = [x for x in stdout.splitlines() if x.startswith("total:")][-1]
    applied = int(re.search(r"(\d[\d,]*) patches applied", line).group(1).replace(",", ""))  # type: ignore[union-attr]
    skipped = re.search(r"(\d[\d,]*) re-delivered skipped", line)
    return applied, int(skipped.group(1).replace(",", "")) if skipped else 0


def fresh_url(request: pytest.FixtureRequest, dialect: str, tmp_path: Path, n: int) -> str:
    if dialect == "sqlite":
        return f"sqlite:///{tmp_path / f'state{n}.db'}"
    return str(request.getfixturevalue("pg_url")) if n == 0 else _new_pg_schema(request)


def _new_pg_schema(request: pytest.FixtureRequest) -> str:
    # pg_url gives one schema per test; more trials need more schemas.
    import psycopg
    from sqlalchemy.engine import make_url

    base = make_url(str(request.getfixturevalue("pg_database")))
    schema = f"xo{os.getpid()}_{next(_extra)}"
    with psycopg.connect(host=base.host, port=base.port or 5432, user=base.username, dbname=base.database) as conn:
        conn.autocommit = True
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return base.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


_extra = itertools.count()


# -- two copies of one log, applied at once --------------------------------------------


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_copies_of_a_log_applied_at_once_apply_each_patch_once(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    count = 1500
    a = tmp_path / "a.jellyp"
    ids = write_chain(a, "c", count, size=3)
    b = tmp_path / "b.jellyp"
    shutil.copyfile(a, b)
    expected = reference(a)
    for trial in range(TRIALS):
        url = fresh_url(request, dialect, tmp_path, trial)
        SqlTarget(url).close()  # the schema exists: this race is about the patches
        results = run_together([apply_proc(a, url), apply_proc(b, url)])
        for code, _out, err in results:
            assert code == 0, err
        records = history(url)
        assert [r.patch_id for r in records] == ids, f"trial {trial}: {len(records)} records for {count} ids"
        assert sql_state(url) == expected
        applied = [counts(out) for _code, out, _err in results]
        # Every patch applied by one of the two and skipped as re-delivered by the other.
        assert sum(a for a, _s in applied) == count and sum(s for _a, s in applied) == count, applied


# -- first starts on an empty PostgreSQL database ----------------------------------------


@pytest.mark.postgres
def test_concurrent_first_starts_on_an_empty_postgres_database_all_succeed(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "f", 20, size=2)
    copies = []
    for i in range(4):
        copy = tmp_path / f"copy{i}.jellyp"
        shutil.copyfile(log, copy)
        copies.append(copy)
    expected = reference(log)
    for trial in range(TRIALS):
        url = fresh_url(request, "postgres", tmp_path, trial)
        results = run_together([apply_proc(c, url) for c in copies])
        for code, _out, err in results:
            assert code == 0, f"trial {trial}: {err}"
        assert [r.patch_id for r in history(url)] == ids
        assert sql_state(url) == expected


# -- a NATS tail and file applies carrying the same patches ------------------------------


def start_tail(url: str, target: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "patchsync", "tail", url, "--target", target, "--poll-interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stream_patches(target: str, stream: str) -> int:
    """Messages of ``stream`` the target has passed (-1 while it cannot be read)."""
    from patchsync.streams import parse_stream_url

    name = str(parse_stream_url(stream))
    try:
        # sources(), not checkpoint(): that takes the source's lock, which the daemon holds.
        with SqlTarget(target) as t:
            found = [s.checkpoint.patches for s in t.sources() if s.source == name]
    except Exception:
        return -1
    return found[0] if found else 0


def test_a_tail_whose_target_another_apply_moved_on_skips_what_that_apply_applied(
    tmp_path: Path, nats_stream: str, daemons: list[Any]
) -> None:
    # Deterministic: the daemon caught up from the stream (1-50) while a file apply moves
    # its target to 100; the stream then brings 51-60 again, and later 61-120.
    target = f"sqlite:///{tmp_path / 'replica.db'}"
    logs = {}
    for n in (50, 60, 100, 120):
        logs[n] = tmp_path / f"upto{n}.jellyp"
        write_chain(logs[n], "t", n, size=3)
    publish_logs([logs[50]], nats_stream)
    daemon = start_tail(nats_stream, target)
    daemons.append(daemon)
    wait_for(lambda: stream_patches(target, nats_stream) == 50, what="the daemon to catch up")
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", str(logs[100]), "--target", target],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout) == (50, 50)
    publish_logs([logs[60]], nats_stream)
    wait_for(lambda: stream_patches(target, nats_stream) == 60, what="the daemon to pass 51-60")
    with SqlTarget(target) as t:
        assert [r.patch_id for r in t.history()] == [patch_id("t", n) for n in range(1, 101)]
        assert t.head() == patch_id("t", 100)
    assert sql_state(target) == reference(logs[100])
    # The next patches follow 100: the daemon applies them (no fork with its own past).
    publish_logs([logs[120]], nats_stream)
    wait_for(lambda: stream_patches(target, nats_stream) == 120, what="the daemon to apply 101-120")
    code, err = stop(daemon)
    assert code == 0, err
    assert sql_state(target) == reference(logs[120])
    assert [r.patch_id for r in history(target)] == [patch_id("t", n) for n in range(1, 121)]


@pytest.mark.postgres
def test_a_tail_and_an_apply_of_the_same_patches_at_once_apply_each_once(
    tmp_path: Path, nats_stream: str, daemons: list[Any], pg_url: str
) -> None:
    count = 1000
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "m", count, size=3)
    SqlTarget(pg_url).close()
    # The daemon waits on the empty stream; the patches then reach the target through the
    # stream (published while the apply runs) and from the file at once.
    daemon = start_tail(nats_stream, pg_url)
    daemons.append(daemon)
    wait_for(lambda: stream_patches(pg_url, nats_stream) == 0, what="the daemon to start")
    applying = apply_proc(log, pg_url)
    publish_logs([log], nats_stream)
    out, err = applying.communicate(timeout=120)
    assert applying.returncode == 0, err
    wait_for(lambda: stream_patches(pg_url, nats_stream) == count, what="the daemon to pass every patch")
    code, err = stop(daemon)
    assert code == 0, err
    assert [r.patch_id for r in history(pg_url)] == ids
    assert sql_state(pg_url) == reference(log)
    applied, skipped = counts(out)
    assert applied + skipped == count
