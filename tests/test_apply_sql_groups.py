"""Units grouped in one database transaction by the SQL target: savepoints, aborts, counts.

docs/design.md §2: a unit is atomic and several committed units may share one storage
transaction whose checkpoint is the last unit's. A unit gets a savepoint only when its rows
reach the database before its end (issue #14); these tests pin what must hold either way.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from patchsync.apply import MemoryTarget
from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import ApplyError

from .apply_helpers import apply_text, iri, reference, state

S, P = iri("s"), iri("p")


def _units(n: int, rows: int) -> str:
    return "".join(
        "TX .\n" + "".join(f"A {S} {P} {iri(f'{u}-{r}')} .\n" for r in range(rows)) + "TC .\n" for u in range(n)
    )


def _savepoints(target: SqlTarget) -> list[str]:
    """SQLite: every SAVEPOINT statement the target's connection runs from now on."""
    seen: list[str] = []
    driver: Any = target._conn.connection.driver_connection
    driver.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith("SAVEPOINT") else None)
    return seen


def test_units_whose_rows_come_with_their_commit_set_no_savepoint(sqlite_url: str) -> None:
    text = _units(3, 2)
    with SqlTarget(sqlite_url) as t:
        seen = _savepoints(t)
        r = apply_text(text, t)
        assert (r.units, r.added) == (3, 6)
        assert seen == []
        assert state(t) == reference(text)


def test_units_whose_rows_are_sent_early_get_a_savepoint(sqlite_url: str) -> None:
    # With batches of one row, each unit's first row is sent before its TC.
    text = _units(3, 2)
    with SqlTarget(sqlite_url) as t:
        seen = _savepoints(t)
        r = apply_text(text, t, batch_rows=1)
        assert (r.units, r.added) == (3, 6)
        assert len(seen) == 3
        assert state(t) == reference(text)


def test_abort_after_rows_were_sent_keeps_the_rest_of_the_group(sql_url: str) -> None:
    text = (
        f"TX .\nA {S} {P} {iri('a')} .\nTC .\n"
        f"TX .\nA {S} {P} {iri('b')} .\nA {S} {P} {iri('c')} .\nA {S} {P} {iri('d')} .\nPA ex <http://x/> .\nTA .\n"
        f"TX .\nA {S} {P} {iri('e')} .\nTC .\n"
    )
    with SqlTarget(sql_url) as t:
        r = apply_text(text, t, batch_rows=2)  # b and c reach the database before TA
        assert (r.units, r.aborted, r.added, r.noop) == (2, 1, 2, 0)
        assert state(t) == reference(text)
        assert state(t)[1] == {}
    with SqlTarget(sql_url) as t:  # and what was committed is durable
        assert state(t)[0] == {(S, P, iri("a"), ""), (S, P, iri("e"), "")}


def test_add_then_delete_of_one_quad_in_one_group_counts_per_patch(sql_url: str) -> None:
    q, other = f"{S} {P} {iri('q')}", f"{S} {P} {iri('other')}"
    text = (
        f"H id <urn:1> .\nA {q} .\nZ .\n"
        f"H id <urn:2> .\nH prev <urn:1> .\nD {q} .\nZ .\n"
        f"H id <urn:3> .\nH prev <urn:2> .\nTX .\nA {q} .\nA {q} .\nTC .\nTX .\nD {q} .\nA {q} .\nTC .\nZ .\n"
        f"H id <urn:4> .\nH prev <urn:3> .\nD {other} .\nZ .\n"
    )
    memory = MemoryTarget()
    expected = apply_text(text, memory)
    with SqlTarget(sql_url) as t:
        r = apply_text(text, t)
        history = [(h.patch_id, h.added, h.deleted, h.noop) for h in t.history()]
        assert state(t) == state(memory)
    assert (r.added, r.deleted, r.noop, r.units) == (expected.added, expected.deleted, expected.noop, expected.units)
    assert history == [("urn:1", 1, 0, 0), ("urn:2", 0, 1, 0), ("urn:3", 2, 1, 1), ("urn:4", 0, 0, 1)]


def test_database_error_in_a_units_last_writes_drops_the_open_group(pg_url: str) -> None:
    # A unit without a savepoint cannot be undone alone: the error drops the open
    # transaction, whose units had no checkpoint written, so a rerun applies each once.
    first = f"A {S} {P} {iri('bad')} .\n"
    with SqlTarget(pg_url) as t:
        apply_text(first, t, source="setup")
    with psycopg.connect(
        pg_url.replace("postgresql+psycopg", "postgresql").split("?")[0], options=_options(pg_url)
    ) as c:
        bad = c.execute("SELECT id FROM ps_terms WHERE term = %s", (iri("bad"),)).fetchone()
        assert bad is not None
        c.execute(f"ALTER TABLE ps_quads ADD CONSTRAINT no_bad CHECK (o <> {bad[0]}) NOT VALID")
    text = f"TX .\nA {S} {P} {iri('ok')} .\nTC .\nTX .\nA {S} {iri('p2')} {iri('bad')} .\nTC .\n"
    with SqlTarget(pg_url) as t, pytest.raises(ApplyError, match="no_bad"):
        apply_text(text, t)
    with SqlTarget(pg_url) as t:
        assert t.checkpoint("log") is None
        assert (S, P, iri("ok"), "") not in state(t)[0]
    with psycopg.connect(
        pg_url.replace("postgresql+psycopg", "postgresql").split("?")[0], options=_options(pg_url)
    ) as c:
        c.execute("ALTER TABLE ps_quads DROP CONSTRAINT no_bad")
    with SqlTarget(pg_url) as t:
        r = apply_text(text, t)
        assert (r.units, r.added) == (2, 2)
        assert apply_text(text, t).added == 0


def _options(url: str) -> str:
    from sqlalchemy.engine import make_url

    return str(make_url(url).query.get("options", ""))
