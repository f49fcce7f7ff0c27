"""The plans of every statement of the SQL write path, on tables of a million quads (issue #14).

Each statement of :mod:`patchsync.apply.targets.sql.statements` (the table the target
itself executes) is planned on a ``ps_quads`` of 1M rows, a term dictionary of 200k terms
and 100k patch records, with batches of one to 50,000 keys, and must reach
the big tables through an index: a sequential scan costs time proportional to the table
for every batch, which is what made PostgreSQL applies slow down as the table grew.

On PostgreSQL the statements are prepared and run on the target's own connection while
the tables are nearly empty, as psycopg does after a few executions, and explained
(``EXPLAIN EXECUTE``) only after the tables were filled: a plan made for the small table
must not be what runs on the big one.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from patchsync.apply.applier import DEFAULT_BATCH_ROWS
from patchsync.apply.targets.sql.dialects import DIALECTS
from patchsync.apply.targets.sql.statements import LOOKUP_CHUNK, Statements
from patchsync.apply.targets.sql.target import SqlTarget

QUADS = 1_000_000
TERMS = 200_000
PATCHES = 100_000
BIG_TABLES = ("ps_quads", "ps_terms", "ps_patches")
# Keys per statement: one, the applier's batch, and a batch of a whole commit group (by
# its estimates PostgreSQL prefers scanning a table to probing its index for as many keys
# as the table has rows over a few dozen).
BATCHES = (1, DEFAULT_BATCH_ROWS, 50_000)


def _key(i: int) -> tuple[int, int, int, int]:
    """The quad key of row ``i`` of the filled table (the fills below compute the same)."""
    return (i, i % 1000 + 1, i % 100_003 + 1, i % 5 + 1)


def _params(batch: int) -> dict[str, Callable[[str], tuple[Any, ...]]]:
    """Representative parameters of each statement for a dialect ("postgresql" / "sqlite")."""
    keys = [_key(i * 97 % QUADS + 1) for i in range(batch)]
    columns = tuple(list(c) for c in zip(*keys, strict=True))
    hashes = [i * 7 % TERMS + 1 for i in range(batch)]
    texts = [f"<http://example.org/t{h}>" for h in hashes]

    def quads(dialect: str) -> tuple[Any, ...]:
        return columns if dialect == "postgresql" else keys[0]

    def lookup(dialect: str) -> tuple[Any, ...]:
        return (hashes, texts) if dialect == "postgresql" else tuple(hashes[:LOOKUP_CHUNK])

    def term_insert(dialect: str) -> tuple[Any, ...]:
        return (
            (hashes, texts, hashes, texts) if dialect == "postgresql" else (TERMS + 1, 42, "<http://example.org/new>")
        )

    fresh = itertools.count(TERMS + 1)

    def term_insert_new(dialect: str) -> tuple[Any, ...]:
        # New terms on every run (a plain insert of a stored term fails).
        if dialect == "sqlite":
            return (TERMS + 1, 42, "<http://example.org/new>")
        new = [next(fresh) for _ in hashes]
        return (new, new, [f"<http://example.org/new{h}>" for h in new])

    stored = itertools.count(QUADS + 1)

    def quads_new(dialect: str) -> tuple[Any, ...]:
        # Quads not stored yet on every run, as term_insert_new.
        new = [_key(next(stored)) for _ in keys]
        return tuple(list(c) for c in zip(*new, strict=True)) if dialect == "postgresql" else new[0]

    cp = ("fp", 10, 1, 2, 3, "p1", 1.0)
    return {
        "insert_quads": quads,
        "delete_quads": quads,
        "insert_quads_each": quads,
        "delete_quads_each": quads,
        "insert_quads_new": quads_new,
        "contains_quads": quads,
        "term_lookup": lookup,
        "term_insert": term_insert,
        "term_insert_new": term_insert_new,
        "term_ids": lambda d: (batch,) if d == "postgresql" else (),
        "has_patch": lambda d: ("p77",),
        "record": lambda d: ("x", "p1", "src", 1, 2, 3, 4, 5, 6, 1.0, "[]", False),
        "ns_upsert": lambda d: ("", "ex", "http://example.org/"),
        "ns_delete": lambda d: ("", "ex"),
        "ns_upsert_many": lambda d: (
            [""] * batch,
            [f"ex{i}" for i in range(batch)],
            [f"http://example.org/{i}/" for i in range(batch)],
        ),
        "ns_delete_many": lambda d: ([""] * batch, [f"ex{i}" for i in range(batch)]),
        "checkpoint_insert": lambda d: ("src", *cp, 1),
        "checkpoint_update": lambda d: (*cp, 2, "src", 1),
    }


def _statements(sql: Statements) -> Iterator[tuple[str, str]]:
    for field in dataclasses.fields(sql):
        if field.name != "dialect":
            yield field.name, getattr(sql, field.name)


def test_every_statement_has_parameters_here() -> None:
    # A statement added to the table without a plan check here would go unchecked.
    for sql in (d.statements for d in DIALECTS.values()):
        assert {name for name, _ in _statements(sql)} == set(_params(1))


# -- PostgreSQL ---------------------------------------------------------------------------

_PG_FILL = (
    f"INSERT INTO ps_quads SELECT i, i % 1000 + 1, i % 100003 + 1, i % 5 + 1 FROM generate_series(1, {QUADS}) i "
    "ON CONFLICT DO NOTHING",
    f"INSERT INTO ps_terms (h, term) SELECT i, '<http://example.org/t' || i || '>' FROM generate_series(1, {TERMS}) i "
    "ON CONFLICT DO NOTHING",
    "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, noop, "
    f"applied_at, headers) SELECT 'p' || i, NULL, 'src', i, 0, 0, 1, 0, 0, 0, '[]' FROM generate_series(1, {PATCHES}) i",
)


def _dollars(sql: str) -> str:
    """``%s`` and ``%b`` placeholders as ``$1, $2, …`` (for PREPARE)."""
    counter = iter(range(1, 1000))
    return re.sub(r"%[sb]", lambda _: f"${next(counter)}", sql)


def _pg_scans(plan: Any) -> Iterator[tuple[str, str]]:
    """(node type, relation) of every node of a JSON plan that reads a relation."""
    if isinstance(plan, dict):
        if "Relation Name" in plan:
            yield plan["Node Type"], plan["Relation Name"]
        for value in plan.values():
            yield from _pg_scans(value)
    elif isinstance(plan, list):
        for value in plan:
            yield from _pg_scans(value)


@pytest.mark.slow
def test_postgres_plans_use_the_indexes_whatever_the_table_held_when_prepared(pg_url: str) -> None:
    import psycopg

    target = SqlTarget(pg_url)
    try:
        conn = target._conn.connection.driver_connection  # the write path's own session
        assert conn is not None
        cur = psycopg.ClientCursor(conn)
        small = _params(3)
        statements = list(_statements(target.sql))
        # Prepared and run six times on tables of a few rows: psycopg prepares a statement
        # on its fifth run, and PostgreSQL may keep a generic plan from the sixth.
        cur.execute("INSERT INTO ps_quads VALUES (1, 2, 3, 4), (2, 3, 4, 5)")
        for name, sql in statements:
            cur.execute(f"PREPARE check_{name} AS {_dollars(sql)}")
            args = ", ".join(["%s"] * len(small[name]("postgresql")))
            for _ in range(6):
                cur.execute(f"EXECUTE check_{name}({args})", small[name]("postgresql"))
        for fill in _PG_FILL:
            cur.execute(fill)
        conn.commit()
        offending = {}
        for (name, _), batch in itertools.product(statements, BATCHES):
            params = _params(batch)[name]("postgresql")
            args = ", ".join(["%s"] * len(params))
            plan = cur.execute(f"EXPLAIN (FORMAT JSON) EXECUTE check_{name}({args})", params).fetchone()
            assert plan is not None
            scans = set(_pg_scans(plan[0]))
            bad = {(node, rel) for node, rel in scans if rel in BIG_TABLES and node == "Seq Scan"}
            if bad:
                offending[name, batch] = sorted(bad)
            if name in ("delete_quads", "contains_quads", "delete_quads_each"):
                # The quads are reached by index probes (and deleted by the rows they found).
                assert any(rel == "ps_quads" and "Index" in node for node, rel in scans), (name, scans)
        assert offending == {}
        # The plan of a statement run again by the target itself (psycopg's own prepared
        # statement, not ours) reads the index too: the counts of deleted rows are exact.
        keys = [_key(i) for i in range(1, 2001)]
        columns = tuple(list(c) for c in zip(*keys, strict=True))
        deleted = [target.link.cur.execute(target.sql.delete_quads, columns).rowcount for _ in range(6)]
        assert deleted == [2000, 0, 0, 0, 0, 0]
        conn.rollback()
    finally:
        target.discard()


# -- SQLite -------------------------------------------------------------------------------

_SQLITE_FILL = (
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) ",
    "INSERT INTO ps_quads SELECT i, i % 1000 + 1, i % 100003 + 1, i % 5 + 1 FROM c",
    "INSERT INTO ps_terms (id, h, term) SELECT i, i, '<http://example.org/t' || i || '>' FROM c",
    "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, noop, "
    "applied_at, headers) SELECT 'p' || i, NULL, 'src', i, 0, 0, 1, 0, 0, 0, '[]' FROM c",
)


def test_sqlite_plans_use_the_indexes(tmp_path: Any) -> None:
    path = tmp_path / "plans.db"
    SqlTarget(f"sqlite:///{path}").close()  # the schema, as the target creates it
    db = sqlite3.connect(path)
    try:
        with_c = _SQLITE_FILL[0]
        for fill, n in zip(_SQLITE_FILL[1:], (QUADS, TERMS, PATCHES), strict=True):
            db.execute(with_c.format(n=n) + fill)
        db.commit()
        params = _params(LOOKUP_CHUNK)
        offending = {}
        for name, sql in _statements(DIALECTS["sqlite"].statements):
            if not sql:
                # A form this dialect does not use (SQLite runs the single-pair form many times).
                assert name.endswith("_many"), name
                continue
            rows = db.execute(f"EXPLAIN QUERY PLAN {sql}", params[name]("sqlite")).fetchall()
            details = [str(r[-1]) for r in rows]
            # "SCAN t" (also "SCAN t USING [COVERING] INDEX i") reads the whole table;
            # "SEARCH t USING …" is a B-tree descent.
            bad = [d for d in details if d.startswith("SCAN") and any(t in d for t in BIG_TABLES)]
            if bad:
                offending[name] = bad
            if name in ("delete_quads", "delete_quads_each", "contains_quads", "term_lookup", "has_patch"):
                assert any(d.startswith("SEARCH") for d in details), (name, details)
        assert offending == {}
    finally:
        db.close()
