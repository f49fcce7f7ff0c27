"""SQLite inserts sent as statements of many rows (dialects/sqlite.py ``RowInserts``).

Batches around the statement size (none, fewer than one statement, exactly one, one and a
few more) must insert every row once and count exactly the rows that changed the table.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from patchsync.apply.target import Checkpoint
from patchsync.apply.targets.sql import SqlTarget
from patchsync.apply.targets.sql.dialects.sqlite import ROWS_PER_INSERT, RowInserts
from patchsync.apply.targets.sql.statements import SQLITE

from .apply_helpers import iri

SIZES = (0, 1, ROWS_PER_INSERT - 1, ROWS_PER_INSERT, ROWS_PER_INSERT + 1, 2 * ROWS_PER_INSERT + 37)


def _table() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT NOT NULL)")
    return db


@pytest.mark.parametrize("size", SIZES)
def test_or_ignore_inserts_every_row_and_counts_the_new_ones(size: int) -> None:
    db = _table()
    present = {a: f"old{a}" for a in range(0, size, 3)}  # every third row already there
    db.executemany("INSERT INTO t VALUES (?, ?)", present.items())
    inserts = RowInserts("INSERT OR IGNORE INTO t (a, b) VALUES (?, ?)")
    rows = [(a, f"new{a}") for a in range(size)]
    assert inserts.rows(db.cursor(), rows) == size - len(present)
    expected = {a: present.get(a, f"new{a}") for a in range(size)}
    assert dict(db.execute("SELECT a, b FROM t").fetchall()) == expected


@pytest.mark.parametrize("size", [ROWS_PER_INSERT - 1, 2 * ROWS_PER_INSERT + 1])
def test_or_fail_stops_at_a_stored_key(size: int) -> None:
    db = _table()
    db.execute("INSERT INTO t VALUES (?, 'old')", (size - 1,))  # in the last statement sent
    inserts = RowInserts("INSERT OR FAIL INTO t (a, b) VALUES (?, ?)")
    flat = [v for a in range(size) for v in (a, f"new{a}")]
    with pytest.raises(sqlite3.IntegrityError):
        inserts.run(db.cursor(), flat)


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO t (a, b) VALUES (?, ?)",  # would need a statement journal
        "INSERT INTO t (a, b) VALUES (?, ?) ON CONFLICT DO NOTHING",
        "INSERT OR IGNORE INTO t (a, b) SELECT 1, 2",
    ],
)
def test_only_single_row_or_ignore_or_fail_inserts_are_taken(sql: str) -> None:
    with pytest.raises(ValueError, match="single-row"):
        RowInserts(sql)


def _quads(prefix: str, n: int) -> list[Any]:
    return [(iri(f"{prefix}{i}"), iri("p"), f'"{i}"', None if i % 2 else iri("g")) for i in range(n)]


def test_target_adds_count_exactly_across_statement_sizes(sqlite_url: str) -> None:
    before = _quads("s", 3 * ROWS_PER_INSERT)[::7]
    more = _quads("s", 3 * ROWS_PER_INSERT) + _quads("t", ROWS_PER_INSERT + 3)
    with SqlTarget(sqlite_url) as t:
        t.begin()
        assert t.add(before) == len(before)
        t.commit("first", Checkpoint(0, 0, 1), [])
        t.flush()
    # Reopened: the dictionary no longer knows it holds every term, and looks them up.
    with SqlTarget(sqlite_url) as t:
        t.begin()
        assert t.add(more) == len(more) - len(before)
        each = _quads("u", ROWS_PER_INSERT + 1) + before[:5]
        assert t.add_each(each) == [True] * (ROWS_PER_INSERT + 1) + [False] * 5
        t.commit("second", Checkpoint(0, 0, 1), [])
        t.flush()
        stored = set(t.quads())
    expected = {(s, p, o, g or "") for s, p, o, g in more + each}
    assert stored == expected
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        # Each term once, every quad's ids among them.
        terms = db.execute("SELECT count(*), count(DISTINCT term) FROM ps_terms").fetchone()
        assert terms[0] == terms[1] == len({term for quad in expected for term in quad})


def test_the_target_inserts_of_many_rows_read_no_table(sqlite_url: str) -> None:
    SqlTarget(sqlite_url).close()  # the schema, as the target creates it
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as db:
        for single in (SQLITE.insert_quads, SQLITE.term_insert):
            many = RowInserts(single).many
            plan = [str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {many}", [1] * many.count("?"))]
            assert plan == [f"SCAN {ROWS_PER_INSERT} CONSTANT ROWS"], plan
