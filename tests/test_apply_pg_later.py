"""PostgreSQL groups whose adds are left running while the applier decodes on (issue #35).

A full commit group's lone adds go to the server from a thread (``add_each_later``); the
group's counts, patch records and commit follow when the next group is written or anything
else needs the target. These tests drive that path with groups of many lone adds (the
plain insert only runs for batches of at least eight) and hold it to the reference target:
the same state, counts and patch records (docs/design.md §2 and §5: units are atomic, counts
follow set semantics row by row), and after a database error in a write left running,
nothing half applied and every patch applied once on a rerun (§3).
"""

from __future__ import annotations

import random
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from patchsync.apply import CAN_WRITE_LATER, MemoryTarget
from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.targets.sql import SqlTarget
from patchsync.codec.rdfp import read_rdfp
from patchsync.errors import ApplyError

from .apply_helpers import iri, state

pytestmark = pytest.mark.postgres


def _apply(target: Any, text: str, source: str = "log", **kwargs: Any) -> ApplyResult:
    return Applier(target, source=source, **kwargs).apply(read_rdfp(text, target.adapter))


def _counts(r: ApplyResult) -> tuple[int, ...]:
    return (r.units, r.aborted, r.added, r.deleted, r.noop, r.patches, r.skipped)


def _history(target: Any) -> list[tuple[Any, ...]]:
    records = target.history() if callable(target.history) else target.history
    return [(r.patch_id, r.prev, r.offset, r.added, r.deleted, r.noop) for r in records]


def _log(seed: int, patches: int, pool: int) -> str:
    """Chained patches of 1-3 units of 8-20 rows over ``pool`` quads: adds of new and of
    stored quads, deletes of stored and absent ones, aborted units, blank nodes, graphs."""
    rng = random.Random(seed)
    quads = [
        f"{iri(f's{i % 37}') if i % 5 else f'_:b{i % 7}'} {iri(f'p{i % 4}')} "
        f"{iri(f'o{i}') if i % 3 else chr(34) + f'v{i} é' + chr(34)}"
        f"{'' if i % 4 else ' ' + iri('g1')}"
        for i in range(pool)
    ]
    text = ""
    for n in range(patches):
        text += f"H id <urn:l{n}> .\n" + (f"H prev <urn:l{n - 1}> .\n" if n else "")
        for _ in range(rng.randint(1, 3)):
            rows = "".join(
                f"{'A' if rng.random() < 0.7 else 'D'} {rng.choice(quads)} .\n" for _ in range(rng.randint(8, 20))
            )
            text += f"TX .\n{rows}{'TA' if rng.random() < 0.1 else 'TC'} .\n"
        text += "Z .\n"
    return text


def _psql(pg_url: str) -> psycopg.Connection[Any]:
    url = make_url(pg_url)
    options = str(url.query.get("options", ""))
    return psycopg.connect(
        f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}",
        options=options,
        autocommit=True,
    )


def test_the_sql_target_offers_writes_left_running() -> None:
    assert CAN_WRITE_LATER in SqlTarget.capabilities
    assert CAN_WRITE_LATER not in MemoryTarget.capabilities


@pytest.mark.parametrize("seed", [1, 2])
def test_groups_left_running_match_the_reference(pg_url: str, seed: int) -> None:
    # A pool small enough that groups add quads already stored (the plain insert fails and
    # the batch is written again returning rows) and large enough for lone adds.
    text = _log(seed, patches=60, pool=300)
    reference = MemoryTarget()
    expected = _counts(_apply(reference, text))
    with SqlTarget(pg_url) as t:
        got = _counts(_apply(t, text, group_rows=40))
        assert t.writes._writer is not None  # the adds were left running at least once
        assert got == expected
        assert _history(t) == _history(reference)
        assert state(t) == state(reference)
        # Applied again: every patch is skipped, nothing written twice.
        again = _apply(t, text, group_rows=40)
        assert (again.patches, again.added, again.deleted) == (0, 0, 0)


def test_lone_adds_of_stored_quads_left_running_count_as_noops(pg_url: str) -> None:
    s, p = iri("s"), iri("p")
    stored = "".join(f"A {s} {p} {iri(f'old{i}')} .\n" for i in range(10))
    fresh = "".join(f"A {s} {p} {iri(f'new{i}')} .\n" for i in range(10))
    # Patch 1 stores ten quads; patch 2 adds them again with ten new ones in a full group
    # (its adds left running), patch 3 follows so that the group is finished by the next one.
    text = (
        f"H id <urn:1> .\nTX .\n{stored}TC .\nZ .\n"
        f"H id <urn:2> .\nH prev <urn:1> .\nTX .\n{stored}{fresh}TC .\nZ .\n"
        f"H id <urn:3> .\nH prev <urn:2> .\nTX .\nA {s} {p} {iri('last')} .\nTC .\nZ .\n"
    )
    with SqlTarget(pg_url) as t:
        _apply(
            t, f"H id <urn:0> .\nA {s} {iri('q')} {iri('seed')} .\nZ .\n", source="seed"
        )  # the dictionary is no longer empty
        r = _apply(t, text.replace("H id <urn:1> .\n", "H id <urn:1> .\nH prev <urn:0> .\n", 1), group_rows=10)
        assert (r.added, r.noop) == (21, 10)
        assert [(h.patch_id, h.added, h.noop) for h in t.history()][1:] == [
            ("urn:1", 10, 0),
            ("urn:2", 10, 10),
            ("urn:3", 1, 0),
        ]


def test_an_error_in_adds_left_running_keeps_whole_groups_and_a_rerun_applies_each_once(pg_url: str) -> None:
    s, p = iri("s"), iri("p")
    with SqlTarget(pg_url) as t:
        _apply(t, f"H id <urn:bad> .\nA {s} {p} {iri('bad')} .\nZ .\n", source="seed")
    with _psql(pg_url) as c:
        bad = c.execute("SELECT id FROM ps_terms WHERE term = %s", (iri("bad"),)).fetchone()
        assert bad is not None
        c.execute(f"ALTER TABLE ps_quads ADD CONSTRAINT no_bad CHECK (o <> {bad[0]}) NOT VALID")
    patches = []
    for n in range(30):
        rows = "".join(f"A {iri(f's{n}')} {p} {iri(f'o{n}-{r}')} .\n" for r in range(12))
        if n == 20:
            rows += f"A {iri('s20')} {iri('p2')} {iri('bad')} .\n"
        prev = f"H prev <urn:n{n - 1}> .\n" if n else "H prev <urn:bad> .\n"
        patches.append(f"H id <urn:n{n}> .\n{prev}TX .\n{rows}TC .\nZ .\n")
    text = "".join(patches)
    with SqlTarget(pg_url) as t, pytest.raises(ApplyError, match="no_bad"):
        _apply(t, text, group_rows=24)
    with SqlTarget(pg_url) as t:
        # What committed is whole patches, named by the checkpoint and the history alike.
        held = [h.patch_id for h in t.history()][1:]
        assert held == [f"urn:n{n}" for n in range(len(held))] and len(held) < 20
        subjects = {q[0] for q in state(t)[0]} - {s}
        assert subjects == {iri(f"s{n}") for n in range(len(held))}
        checkpoint = t.checkpoint("log")
        assert (checkpoint.patches if checkpoint else 0) == len(held)
    with _psql(pg_url) as c:
        c.execute("ALTER TABLE ps_quads DROP CONSTRAINT no_bad")
    reference = MemoryTarget()
    _apply(reference, f"H id <urn:bad> .\nA {s} {p} {iri('bad')} .\nZ .\n", source="seed")
    _apply(reference, text, chain="ignore")
    with SqlTarget(pg_url) as t:
        r = _apply(t, text, group_rows=24)
        assert r.patches == 30 - len(held)
        assert [h.patch_id for h in t.history()][1:] == [f"urn:n{n}" for n in range(30)]
        assert state(t) == state(reference)
