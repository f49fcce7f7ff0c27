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
from patchsync.nats import publish_logs

from .apply_helpers import state
from .nats_helpers import patch_id, write_chain
from .process_helpers import stop, wait_for_value

#: Trials of each race. Before the fix, two copies applied at once doubled the history in 7
#: of 8 trials on PostgreSQL and 3 of 8 on SQLite (there only when the second process read
#: the head before the first one's write transaction began), and 7 of 8 first starts of four
#: processes on an empty PostgreSQL schema failed; one trial takes a few seconds.
TRIALS = {"sqlite": 8, "postgres": 3}


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


@pytest.mark.slow
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
    for trial in range(TRIALS[dialect]):
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


@pytest.mark.slow
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
    for trial in range(TRIALS["postgres"]):
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
    from patchsync.nats import parse_stream_url

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
    wait_for_value(lambda: stream_patches(target, nats_stream), 50, "the daemon to catch up")
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", str(logs[100]), "--target", target],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert counts(done.stdout) == (50, 50)
    publish_logs([logs[60]], nats_stream)
    wait_for_value(lambda: stream_patches(target, nats_stream), 60, "the daemon to pass 51-60")
    with SqlTarget(target) as t:
        assert [r.patch_id for r in t.history()] == [patch_id("t", n) for n in range(1, 101)]
        assert t.head() == patch_id("t", 100)
    assert sql_state(target) == reference(logs[100])
    # The next patches follow 100: the daemon applies them (no fork with its own past).
    publish_logs([logs[120]], nats_stream)
    wait_for_value(lambda: stream_patches(target, nats_stream), 120, "the daemon to apply 101-120")
    code, err = stop(daemon)
    assert code == 0, err
    assert sql_state(target) == reference(logs[120])
    assert [r.patch_id for r in history(target)] == [patch_id("t", n) for n in range(1, 121)]


def _delete_streams(urls: list[str]) -> None:
    from patchsync.nats import NatsLog

    for url in urls:
        with NatsLog(url) as log:
            log.delete_stream()


@pytest.mark.postgres
def test_a_tail_and_an_apply_of_the_same_patches_at_once_apply_each_once(
    tmp_path: Path, daemons: list[Any], nats_server: str, request: pytest.FixtureRequest
) -> None:
    from .nats_helpers import unique_stream

    count = 2000
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "m", count, size=3)
    expected = reference(log)
    streams: list[str] = []
    request.addfinalizer(lambda: _delete_streams(streams))
    for trial in range(2):
        url = fresh_url(request, "postgres", tmp_path, trial)
        SqlTarget(url).close()
        stream = f"{nats_server}/{unique_stream('xo')}"
        streams.append(stream)
        publish_logs([log], stream)
        # Started together, the daemon (from the stream) and the apply (from the file) each
        # apply a part of the patches and skip the other's (usually; either may win whole).
        daemon = start_tail(stream, url)
        daemons.append(daemon)
        applying = apply_proc(log, url)
        out, err = applying.communicate(timeout=120)
        assert applying.returncode == 0, err
        wait_for_value(lambda u=url, s=stream: stream_patches(u, s), count, "the daemon to pass every patch")
        code, err = stop(daemon)
        assert code == 0, err
        assert [r.patch_id for r in history(url)] == ids, f"trial {trial}"
        assert sql_state(url) == expected
        applied, skipped = counts(out)
        assert applied + skipped == count


# -- forks, the ignore policy, the constraint ----------------------------------------------


def write_fork(path: Path, shared: int, count: int) -> list[str]:
    """Patches 1..shared of chain ``x``, then ``shared+1..count`` of chain ``y`` on top."""
    from patchsync.logs.patch_logs import write_events
    from patchsync.options import PatchOptions
    from patchsync.terms.ntriples import NTriplesTerms

    from .nats_helpers import patch_events

    events: list[Any] = []
    ids: list[str] = []
    prev: str | None = None
    for n in range(1, count + 1):
        tag = "x" if n <= shared else "y"
        events += patch_events(tag, n, prev, size=3)
        prev = patch_id(tag, n)
        ids.append(prev)
    with open(path, "wb") as f:
        write_events(events, f, "jellyp", options=PatchOptions(), adapter=NTriplesTerms())
    return ids


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_sources_forking_one_target_at_once_one_is_refused_naming_both(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    x = tmp_path / "x.jellyp"
    x_ids = write_chain(x, "x", 1000, size=3)
    y = tmp_path / "y.jellyp"
    y_ids = write_fork(y, 500, 1000)
    url = fresh_url(request, dialect, tmp_path, 0)
    SqlTarget(url).close()
    results = run_together([apply_proc(x, url), apply_proc(y, url)])
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 1], results
    won, (_code, _out, err) = (x, results[1]) if results[0][0] == 0 else (y, results[0])
    lines = [line for line in err.splitlines() if line.startswith("patchsync:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    ids = x_ids if won == x else y_ids
    other = y_ids if won == x else x_ids
    # The refused patch is the loser's first own one; the head named is the winner's.
    assert other[500] in lines[0] and "fork" in lines[0], lines[0]
    assert any(i in lines[0] for i in ids[500:]), lines[0]
    assert [r.patch_id for r in history(url)] == ids
    assert sql_state(url) == reference(won)


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_ignore_policy_still_applies_a_repeated_id_and_the_strict_record_is_unique(
    dialect: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from sqlalchemy.exc import IntegrityError

    log = tmp_path / "a.rdfp"
    write_chain(log, "i", 3)
    url = fresh_url(request, dialect, tmp_path, 0)
    with SqlTarget(url) as t:
        apply_file(log, t, source="one")
        apply_file(log, t, source="two", chain="ignore")
        records = t.history()
    assert [r.patch_id for r in records] == [patch_id("i", n) for n in (1, 2, 3)] * 2
    assert [r.chained for r in records] == [True] * 3 + [False] * 3
    # A second strict record of one id is refused by the database itself.
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with pytest.raises(IntegrityError), engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, "
                    "deleted, noop, applied_at, headers, chained) "
                    "VALUES (:id, NULL, 'x', 0, 0, 0, 0, 0, 0, 0, '[]', :t)"
                ),
                {"id": patch_id("i", 2), "t": True},
            )
    finally:
        engine.dispose()


def test_a_history_repeating_an_id_upgrades_to_the_unique_strict_record(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    from patchsync.apply.targets.sql import upgrade_database
    from patchsync.apply.targets.sql.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        upgrade(conn, "0003")
        for _ in range(2):
            conn.exec_driver_sql(
                "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, "
                "noop, applied_at, headers) VALUES ('urn:p:1', NULL, 's', 0, 0, 0, 0, 0, 0, 0, '[]')"
            )
    engine.dispose()
    assert upgrade_database(url) == ("0003", "0004")
    with SqlTarget(url) as t:
        assert [(r.patch_id, r.chained) for r in t.history()] == [("urn:p:1", False)] * 2
        assert t.has_patch("urn:p:1") and t.head() == "urn:p:1"


def test_a_second_process_on_one_oxigraph_store_is_refused_with_one_line(tmp_path: Path) -> None:
    pytest.importorskip("pyoxigraph")
    log = tmp_path / "a.jellyp"
    ids = write_chain(log, "o", 200, size=3)
    b = tmp_path / "b.jellyp"
    shutil.copyfile(log, b)
    store = f"oxigraph:{tmp_path / 'store'}"
    results = run_together([apply_proc(log, store), apply_proc(b, store)])
    for code, _out, err in results:
        # RocksDB lets one process open a store: the other waits for nothing and says so.
        assert code == 0 or ("LOCK" in err and len(err.strip().splitlines()) == 1), err
    from patchsync.apply.targets.oxigraph import OxigraphTarget

    target = OxigraphTarget(tmp_path / "store")
    try:
        assert [r.patch_id for _seq, r in target._records] == ids
        assert state(target)[0] == reference(log)[0]
    finally:
        target.close()


# -- the applier's decisions again, in one process, step by step ---------------------------


def test_held_patches_another_applier_applied_are_skipped_and_a_fork_is_named(tmp_path: Path) -> None:
    from patchsync.apply import apply_events
    from patchsync.apply.applier import Applier
    from patchsync.errors import ChainError

    from .nats_helpers import patch_events

    def patches(tag: str, first: int, last: int, prev: str | None) -> list[Any]:
        events: list[Any] = []
        for n in range(first, last + 1):
            events += patch_events(tag, n, prev, size=2)
            prev = patch_id(tag, n)
        return events

    url = f"sqlite:///{tmp_path / 'state.db'}"
    daemon_target = SqlTarget(url)
    try:
        daemon = Applier(daemon_target, source="stream")
        daemon.feed(patches("x", 1, 5, None))
        assert daemon.pause()
        # Another applier (another source) moves the target on while the daemon waits.
        with SqlTarget(url) as other:
            apply_events(patches("x", 1, 10, None), other, source="file")
        # The daemon's next patches follow the head it remembers: held, then decided
        # again when written, under the lock, on the head the target has.
        daemon.feed(patches("x", 6, 8, patch_id("x", 5)))
        assert daemon.pause()
        assert (daemon.result.patches, daemon.result.skipped) == (5, 3)
        assert [r.patch_id for r in daemon_target.history()] == [patch_id("x", n) for n in range(1, 11)]
        # A patch that follows the target's head is applied: no fork with its own past.
        daemon.feed(patches("x", 9, 11, patch_id("x", 8)))
        assert daemon.pause()
        assert (daemon.result.patches, daemon.result.skipped) == (6, 5)
        # Another applier applies x12; the daemon's y12 on the same prev is a fork, named.
        with SqlTarget(url) as other:
            apply_events(patches("x", 12, 12, patch_id("x", 11)), other, source="file2")
        with pytest.raises(ChainError) as failed:
            daemon.feed(patches("y", 12, 12, patch_id("x", 11)))
            daemon.pause()
        message = str(failed.value)
        assert patch_id("y", 12) in message and patch_id("x", 12) in message and "fork" in message
    finally:
        daemon_target.discard()
    assert [r.patch_id for r in history(url)] == [patch_id("x", n) for n in range(1, 13)]
    reference_target = MemoryTarget()
    apply_events(patches("x", 1, 12, None), reference_target, source="ref")
    assert sql_state(url) == state(reference_target)
