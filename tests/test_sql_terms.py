"""The SQL target's term dictionary (schema revision 0003): ids, hashes, rollbacks, writers.

Every test compares against the reference :class:`MemoryTarget` or checks the dictionary's
own invariants: each term stored once, every quad's ids present in ``ps_terms``.
"""

from __future__ import annotations

import random
import threading
import zlib

import pytest
from sqlalchemy import create_engine

import patchsync.apply.targets.sql.terms as sql_terms
from patchsync.apply.target import Checkpoint
from patchsync.apply.targets.sql import SqlTarget, current_revision, head_revision, upgrade_database
from patchsync.apply.targets.sql.migrate import upgrade
from patchsync.apply.targets.sql.schema import term_hash

from .apply_helpers import RecordingCursor, apply_text, iri, reference, state


def random_log(
    seed: int, patches: int = 30, *, aborts: bool = True, ids: str = "p", graphs: list[str] | None = None
) -> str:
    """A chained RDF Patch text log: adds, deletes, named graphs, literals, blank nodes, aborts."""
    rng = random.Random(seed)
    terms = [iri(f"t{i}") for i in range(25)]
    objects = terms + [f'"v{i}"' for i in range(20)] + ['"x"@en', '"1"^^<http://www.w3.org/2001/XMLSchema#integer>']
    objects += ["_:b1", "_:b2", '"it\'s; DROP TABLE ps_terms; --"']
    graphs = graphs or ["", iri("g1"), iri("g2")]
    lines = []
    prev = None
    for n in range(patches):
        lines.append(f"H id <urn:{ids}{n}> .")
        if prev:
            lines.append(f"H prev <urn:{ids}{prev}> .")
        prev = str(n)
        for _ in range(rng.randint(1, 3)):
            lines.append("TX .")
            for _ in range(rng.randint(1, 8)):
                op = rng.choice("AAD")
                g = rng.choice(graphs)
                lines.append(f"{op} {rng.choice(terms)} {rng.choice(terms[:5])} {rng.choice(objects)} {g} .")
            lines.append("TA ." if aborts and rng.random() < 0.2 else "TC .")
        lines.append("Z .")
    return "\n".join(lines) + "\n"


def dictionary_is_consistent(t: SqlTarget) -> None:
    with t.engine.connect() as conn:
        dupes = conn.exec_driver_sql("SELECT term FROM ps_terms GROUP BY term HAVING COUNT(*) > 1").all()
        dangling = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM ps_quads q WHERE NOT EXISTS (SELECT 1 FROM ps_terms t WHERE t.id = q.s) "
            "OR NOT EXISTS (SELECT 1 FROM ps_terms t WHERE t.id = q.p) "
            "OR NOT EXISTS (SELECT 1 FROM ps_terms t WHERE t.id = q.o) "
            "OR NOT EXISTS (SELECT 1 FROM ps_terms t WHERE t.id = q.g)"
        ).scalar()
    assert dupes == [], "a term is stored twice"
    assert dangling == 0, "a quad refers to a term id that is not stored"


def test_term_hash_is_the_stored_format() -> None:
    # schema.py: BLAKE2b-64 of the UTF-8 text, signed big-endian; revision 0002's hash
    # columns hold the same value, which the 0003 migration relies on.
    from hashlib import blake2b

    text = '"caf\u00e9"@fr'
    assert term_hash(text) == int.from_bytes(blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_logs_equal_the_reference(sql_url: str, seed: int) -> None:
    text = random_log(seed)
    with SqlTarget(sql_url) as t:
        apply_text(text, t, batch_rows=3)
        assert state(t) == reference(text, batch_rows=3)
        dictionary_is_consistent(t)


def test_a_tiny_term_cache_starts_over_and_looks_terms_up(sql_url: str) -> None:
    # Past ``term_cache`` entries the cache is dropped and is no longer complete, so
    # terms are looked up again instead of being stored twice.
    text = random_log(4, patches=40)
    with SqlTarget(sql_url, term_cache=8) as t:
        apply_text(text, t, batch_rows=3)
        assert len(t.terms.cache.ids) <= 8 + 4 * 8  # one batch's terms on top of a dropped cache
        assert not getattr(t.terms, "_fresh", False)  # on PostgreSQL a cache that started over lacks stored terms
        assert state(t) == reference(text, batch_rows=3)
        dictionary_is_consistent(t)


def long_literal_log(seed: int, patches: int, length: int) -> str:
    """Patches adding distinct literals of ``length`` characters (some units aborted, some
    literals repeated, some deleted again)."""
    rng = random.Random(seed)
    lines = []
    for n in range(patches):
        lines.append("TX .")
        for k in range(rng.randint(1, 3)):
            text = f"{n}-{k}-" + "x" * length
            if rng.random() < 0.2 and n:
                text = f"{n - 1}-0-" + "x" * length  # seen before: in the cache or the database
            lines.append(f'{rng.choice("AAD")} {iri(f"s{n % 7}")} {iri("p")} "{text}" .')
        lines.append("TA ." if rng.random() < 0.2 else "TC .")
    return "\n".join(lines) + "\n"


def test_long_literals_start_the_cache_over_at_its_character_budget(sql_url: str) -> None:
    # The entry count alone lets 524,288 long literals stay (GBs of 10 KB texts): past
    # ``term_cache_chars`` characters the cache starts over too, whatever its entry count.
    budget = 60_000
    text = long_literal_log(11, patches=120, length=5_000)
    with SqlTarget(sql_url, term_cache_chars=budget) as t:
        held = []
        for i, chunk in enumerate(text.split("TX .\n")[1:]):
            apply_text("TX .\n" + chunk, t, source=f"u{i}", batch_rows=3)
            held.append(sum(map(len, t.terms.cache.ids)))
            # The count kept for the bound is the text of what the cache holds, rollbacks included.
            assert t.terms.cache.chars == held[-1]
        # One batch (3 quads, 4 terms each) may come on top of a cache just started over.
        assert max(held) <= budget + 3 * 4 * 5_100
        literals = {line.split(" ", 3)[3] for line in text.splitlines() if '"' in line}
        assert sum(map(len, literals)) > 10 * budget  # what the entry count alone would keep
        assert state(t)[0] == reference(text, batch_rows=3)[0]
        dictionary_is_consistent(t)


def test_aborted_unit_forgets_the_terms_it_stored(sql_url: str) -> None:
    # docs/design.md §2: TA discards the unit, including the dictionary rows it added; a term
    # first seen there and used again later must be stored again, not taken from memory.
    new = iri("only-in-aborted")
    text = (
        f"TX .\nA {new} {iri('p')} {new} .\nTA .\n"
        f"TX .\nA {iri('s')} {iri('p')} {new} {new} .\nTC .\n"
        f'TX .\nA {new} {iri("p")} "x" .\nTA .\n'
    )
    with SqlTarget(sql_url) as t:
        apply_text(text, t)
        assert state(t) == reference(text)
        dictionary_is_consistent(t)


def test_terms_sharing_a_hash_stay_distinct(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A deliberately weak hash (16 values) makes most terms share a hash with others, in
    # a batch and in the database; distinct terms must still get distinct ids and every
    # quad must come back as written.
    def weak(text: str) -> int:
        return zlib.crc32(text.encode()) % 16

    monkeypatch.setattr(sql_terms, "term_hash", weak)
    text = random_log(7, patches=12)
    with SqlTarget(sql_url) as t:
        apply_text(text, t, batch_rows=5)
        assert state(t) == reference(text, batch_rows=5)
        dictionary_is_consistent(t)
    # A second applier starts with an empty cache and tells the stored terms apart by text.
    more = random_log(8, patches=8, ids="q").replace("H id <urn:q0> .", "H id <urn:q0> .\nH prev <urn:p11> .")
    with SqlTarget(sql_url) as t:
        apply_text(more, t, source="more", batch_rows=5)
        dictionary_is_consistent(t)
        assert frozenset(t.quads()) == reference(text + more, batch_rows=5)[0]


def test_collision_with_a_term_stored_by_someone_else(sql_url: str) -> None:
    # The hash of the term we are about to add is already held by another text (as after
    # a real 64-bit collision): both are stored under it, told apart by their text.
    mine = iri("mine")
    with SqlTarget(sql_url) as t:
        apply_text(f"A {iri('a')} {iri('p')} {iri('b')} .\n", t)
    engine = create_engine(sql_url)
    mark = "%s" if engine.dialect.name == "postgresql" else "?"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO ps_terms (h, term) VALUES ({mark}, {mark})", (term_hash(mine), "<http://other.example/>")
        )
    engine.dispose()
    text = f"A {mine} {iri('p')} {mine} .\n"
    with SqlTarget(sql_url) as t:
        apply_text(text, t, source="two")
        assert (mine, iri("p"), mine, "") in set(t.quads())
        dictionary_is_consistent(t)
    with create_engine(sql_url).connect() as conn:
        rows = dict(conn.exec_driver_sql("SELECT term, h FROM ps_terms").all())
    assert rows["<http://other.example/>"] == rows[mine] == term_hash(mine)


def test_another_sqlite_writer_between_our_transactions(sqlite_url: str) -> None:
    # Our cache may be complete; once another process adds terms between our
    # transactions it must notice (max id moved) and look terms up again, or it would
    # store a second copy of a term the other writer added.
    a, b = SqlTarget(sqlite_url), SqlTarget(sqlite_url)
    shared = iri("shared")
    apply_text(f'A {iri("s")} {iri("p")} "1" .\n', a, source="a")
    a.flush()
    apply_text(f'A {shared} {iri("p")} "2" .\n', b, source="b")
    b.flush()
    apply_text(f'A {shared} {iri("p")} "3" .\nA {iri("s")} {iri("p")} {shared} .\n', a, source="a2")
    a.close()
    b.close()
    with SqlTarget(sqlite_url) as t:
        dictionary_is_consistent(t)
        assert len(set(t.quads())) == 4


def test_concurrent_postgres_appliers_share_new_terms(pg_url: str) -> None:
    # Two appliers of different sources add the same new terms at the same time (each
    # log writes its own graph, the subjects, predicates and objects overlap); the unique
    # hash lets one insert win and both read its id.
    logs = [random_log(20 + i, patches=400, ids=f"c{i}", graphs=[iri(f"graph{i}")]) for i in range(2)]
    errors: list[BaseException] = []
    SqlTarget(pg_url).close()  # the schema first: this test is about terms, not first-use DDL

    def run(i: int) -> None:
        try:
            # Chain heads are per target (README), so two independent chains need "ignore".
            with SqlTarget(pg_url) as t:
                apply_text(logs[i], t, source=f"src{i}", chain="ignore")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    with SqlTarget(pg_url) as t:
        dictionary_is_consistent(t)
        assert frozenset(t.quads()) == reference(logs[0])[0] | reference(logs[1])[0]


def test_a_fresh_postgres_dictionary_stores_new_terms_without_a_lookup(pg_url: str) -> None:
    # A dictionary that found ps_terms empty trusts its cache: a term it lacks is new and
    # goes straight to a plain insert. Another applier storing a term behind its back fails
    # that insert on the unique index: the insert falls back to insert-or-ignore, the term
    # keeps its one id, and from then on terms are looked up before they are stored.
    shared = iri("shared")
    a = SqlTarget(pg_url)
    apply_text(f'A {iri("s")} {iri("p")} "1" .\n', a, source="a")
    assert a.terms._fresh
    cursor = a.terms._term_cur = RecordingCursor(a.terms._term_cur)
    apply_text(f'A {iri("s2")} {iri("p")} "2" .\n', a, source="a2")
    # s2 and "2": no lookup first, nothing returned; their ids were drawn after the last
    # insert, and this insert draws the next batch's.
    assert cursor.seen == ["INSERT", "SELECT"]
    with SqlTarget(pg_url) as b:
        apply_text(f'A {shared} {iri("p")} "3" .\n', b, source="b")
        assert not b.terms._fresh  # the table held terms when b first looked
    cursor.seen.clear()
    apply_text(f"A {iri('s')} {iri('p')} {shared} .\n", a, source="a3")
    assert cursor.seen[:2] == ["INSERT", "WITH RETURNING"] and not a.terms._fresh  # failed, then insert-or-ignore
    cursor.seen.clear()
    apply_text(f'A {iri("s3")} {iri("p")} "4" .\n', a, source="a4")
    # The lookup, the insert (with the ids drawn before), the ids for the next batch.
    assert cursor.seen == ["SELECT", "INSERT", "SELECT"]
    a.close()
    with SqlTarget(pg_url) as t:
        dictionary_is_consistent(t)
        quads = set(t.quads())
    assert len(quads) == 5 and (iri("s"), iri("p"), shared, "") in quads


@pytest.mark.parametrize("write", ["add_each", "add"])
def test_new_terms_sent_beside_the_quads_take_another_appliers_ids(pg_url: str, write: str) -> None:
    # PostgreSQL sends a batch's new terms on the dictionary's connection while the quads
    # go on the unit's (PostgresQuads.add_each), with the ids drawn for them. When another
    # applier stored some of those terms first, they take its ids: the quads written with
    # the drawn ones are deleted and written again, and each add (or the count) is still
    # told exactly: a quad the other applier stored is not added, though its drawn-id row was.
    a = SqlTarget(pg_url)
    a.begin()
    a.add_each([(iri("a0"), iri("p"), '"0"', None)])
    a.commit("a", Checkpoint(0, 0, 0), [])
    a.flush()
    assert a.terms._fresh  # a takes a term it lacks for new, with no lookup first
    both = (iri("shared"), iri("p"), '"both"', iri("g"))
    with SqlTarget(pg_url) as b:
        b.begin()
        assert b.add_each([both, (iri("x"), iri("shared2"), '"b"', None)]) == [True, True]
        b.commit("b", Checkpoint(0, 0, 0), [])
        b.flush()
        theirs = {t: b.terms.cache.ids[t] for t in (iri("shared"), iri("shared2"), '"both"', iri("g"))}
    mine = [(iri("a1"), iri("p"), '"1"', None), (iri("a2"), iri("shared2"), iri("shared"), None), both]
    a.begin()
    cursor = a.link.cur = RecordingCursor(a.link.cur)
    if write == "add_each":
        assert a.add_each(mine) == [True, True, False]
    else:
        assert a.add([*mine, mine[0]]) == 2
    assert "DELETE" in cursor.seen  # the rows written with the drawn ids, undone
    assert {t: a.terms.cache.ids[t] for t in theirs} == theirs and not a.terms._fresh
    a.commit("a", Checkpoint(0, 0, 1), [])
    a.flush()
    a.close()
    with SqlTarget(pg_url) as t:
        dictionary_is_consistent(t)
        assert set(t.quads()) == {
            (iri("a0"), iri("p"), '"0"', ""),
            (iri("x"), iri("shared2"), '"b"', ""),
            (*both[:3], iri("g")),
            (iri("a1"), iri("p"), '"1"', ""),
            (iri("a2"), iri("shared2"), iri("shared"), ""),
        }


def test_the_thread_that_sends_new_terms_ends_with_the_target(pg_url: str) -> None:
    # The dictionary's inserts run on a thread of the target's own (PostgresTerms.keys_beside),
    # started with the first batch of new terms; closing (or discarding) the target ends it.
    for end in ("close", "discard"):
        t = SqlTarget(pg_url)
        t.begin()
        t.add_each([(iri(f"s-{end}"), iri("p"), f'"{end}"', None)])
        sender = t.terms._term_sender
        assert sender is not None
        threads = list(sender._threads)
        assert threads and all(th.name.startswith("patchsync-terms") for th in threads)
        getattr(t, end)()
        assert t.terms._term_sender is None and t.terms._in_flight is None
        for th in threads:
            th.join(timeout=5)
            assert not th.is_alive()


def test_a_failed_insert_of_new_terms_leaves_none_of_them_cached(pg_url: str) -> None:
    # The ids drawn for terms sent beside the quads are cached before the insert is known
    # to succeed; when it fails for another reason than a duplicate, they are forgotten and
    # the error comes out as a target error (the unit's rows are rolled back with it).
    import dataclasses

    from patchsync.errors import PatchsyncError

    t = SqlTarget(pg_url)
    t.begin()
    t.add_each([(iri("s"), iri("p"), '"0"', None)])
    t.commit("log", Checkpoint(0, 0, 0), [])
    t.flush()
    t.terms.sql = dataclasses.replace(
        t.terms.sql, term_insert_new="INSERT INTO ps_terms_gone SELECT 1 WHERE %b AND %b AND %b"
    )
    t.begin()
    with pytest.raises(PatchsyncError):
        t.add_each([(iri("s"), iri("p"), '"new"', iri("new-graph"))])
    assert (
        '"new"' not in t.terms.cache.ids and iri("new-graph") not in t.terms.cache.ids and iri("s") in t.terms.cache.ids
    )
    t.discard()
    with SqlTarget(pg_url) as fresh:
        dictionary_is_consistent(fresh)
        assert set(fresh.quads()) == {(iri("s"), iri("p"), '"0"', "")}


def test_revision_0002_data_moves_into_the_dictionary(sql_url: str) -> None:
    # Migration 0003 builds ps_terms from 0002's hash columns and joins quads back.
    from hashlib import blake2b

    quads = [
        (iri("s"), iri("p"), '"caf\u00e9 \\"q\\""@fr', ""),
        (iri("s"), iri("p"), "_:b0", iri("g")),
        ("<< " + iri("a") + " " + iri("b") + " " + iri("c") + " >>", iri("p"), '"' + "x" * 5000 + '"', iri("g")),
        (iri("s"), iri("q"), iri("s"), iri("g")),
    ]
    engine = create_engine(sql_url)
    mark = "%s" if engine.dialect.name == "postgresql" else "?"
    with engine.begin() as conn:
        upgrade(conn, "0002")
        for s, p, o, g in quads:
            qh = blake2b(f"{g}\n{s}\n{p}\n{o}".encode(), digest_size=16).digest()
            conn.exec_driver_sql(
                f"INSERT INTO ps_quads (qh, gh, sh, ph, oh, g, s, p, o) VALUES ({', '.join([mark] * 9)})",
                (qh, term_hash(g), term_hash(s), term_hash(p), term_hash(o), g, s, p, o),
            )
    with engine.connect() as conn:
        assert current_revision(conn) == "0002"
    engine.dispose()
    assert upgrade_database(sql_url) == ("0002", head_revision())
    with SqlTarget(sql_url) as t:
        assert set(t.quads()) == set(quads)
        dictionary_is_consistent(t)
        # The migrated dictionary keeps working: the same terms are found, not re-added.
        apply_text(f"D {iri('s')} {iri('p')} _:b0 {iri('g')} .\nA {iri('s')} {iri('q')} {iri('s')} .\n", t)
        assert set(t.quads()) == (set(quads) - {quads[1]}) | {(iri("s"), iri("q"), iri("s"), "")}
        dictionary_is_consistent(t)


def test_downgrade_to_0002_and_back(sql_url: str) -> None:
    text = random_log(5, patches=10)
    with SqlTarget(sql_url) as t:
        apply_text(text, t)
        before = frozenset(t.quads())
    engine = create_engine(sql_url)
    with engine.begin() as conn:
        from alembic import command

        from patchsync.apply.targets.sql.migrate import _config

        command.downgrade(_config(conn), "0002")  # type: ignore[arg-type]
        assert current_revision(conn) == "0002"
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM ps_quads").scalar() == len(before)
    engine.dispose()
    upgrade_database(sql_url)
    with SqlTarget(sql_url) as t:
        assert frozenset(t.quads()) == before
        dictionary_is_consistent(t)
