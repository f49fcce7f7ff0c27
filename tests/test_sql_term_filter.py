"""The SQLite term dictionary's Bloom filter of stored hashes (issue #14's scaling on SQLite).

Once the bounded term cache has started over it no longer knows every stored term; the
filter (``term_filter.HashFilter``) says which uncached terms are certainly new, so only
the others are looked up. A false negative would store a term twice, so the tests check
the dictionary's invariants (each term once, no dangling ids) and the applied state
against the reference target, and that the filter really spares the lookups.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable
from typing import Any

import pytest

import patchsync.apply.targets.sql.term_filter as term_filter
import patchsync.apply.targets.sql.terms as sql_terms
from patchsync.apply.targets.sql import SqlTarget
from patchsync.apply.targets.sql.term_filter import BITS_PER_TERM, HashFilter

from .apply_helpers import apply_text, iri, reference, state
from .test_sql_terms import dictionary_is_consistent, random_log


def random_hashes(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(64) - (1 << 63) for _ in range(n)]  # signed, as term_hash gives


def test_the_filter_holds_every_hash_added() -> None:
    added = [*random_hashes(1, 50_000), 0, -1, 1, (1 << 63) - 1, -(1 << 63)]
    known = HashFilter.of(iter(added), len(added))
    assert all(h in known for h in added)  # never "no" for a hash it holds
    assert known.count == len(added)


def test_false_positives_stay_near_the_design_rate_at_capacity() -> None:
    known = HashFilter(10_000)
    known.add_many(random_hashes(2, known.capacity))
    assert known.layers == 1
    others = random_hashes(3, 100_000)
    rate = sum(h in known for h in others) / len(others)
    # Two probes into 16 bits per hash: (1 - e^(-2/16))^2 = 1.4%.
    assert 0.005 < rate < 0.025, rate


def test_a_full_filter_grows_by_layers_and_keeps_every_hash() -> None:
    # No rescan of the stored hashes: past its capacity the filter adds a layer twice as
    # large, and a hash is found in whichever layer took it.
    known = HashFilter(1_000)
    first = known.capacity
    added = random_hashes(4, 7 * first)
    known.add_many(added[: first + 1])
    assert known.layers == 2
    for start in range(first + 1, len(added), 999):  # batches that straddle the layer ends
        known.add_many(added[start : start + 999])
    assert known.layers == 3  # 1 + 2 + 4 capacities hold 7
    assert known.count == len(added) and known.capacity == 7 * first
    assert all(h in known for h in added)
    rate = sum(h in known for h in random_hashes(5, 50_000)) / 50_000
    assert rate < 3 * 0.025, rate  # at most the layers' rates together


def test_a_filter_is_sized_for_growth() -> None:
    known = HashFilter.of(iter(random_hashes(6, 70_000)), 70_000)
    assert known.layers == 1 and known.count == 70_000
    assert known.capacity >= term_filter.GROWTH * 70_000
    assert len(known._layers[0].bits) * 8 == known.capacity * BITS_PER_TERM


class LookupCounter:
    """Wraps ``TermDictionary._lookup``: how many hashes were asked and how many of them found nothing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked = self.unmatched = 0
        original = sql_terms.TermDictionary._lookup

        def counted(target: Any, hashes: Iterable[int]) -> dict[str, int]:
            wanted = set(hashes)
            found = original(target, wanted)
            matched = {sql_terms.term_hash(term) for term in found}
            self.asked += len(wanted)
            self.unmatched += len(wanted - matched)
            return found

        monkeypatch.setattr(sql_terms.TermDictionary, "_lookup", counted)


def growing_log(seed: int, patches: int) -> str:
    """Many new terms per patch (fresh subjects and literals), some revisited, deletes and aborts."""
    rng = random.Random(seed)
    lines = []
    for n in range(patches):
        lines.append("TX .")
        for k in range(rng.randint(2, 6)):
            s = iri(f"s{n}-{k}") if rng.random() < 0.7 else iri(f"s{rng.randrange(n + 1)}-0")
            op = "D" if rng.random() < 0.15 else "A"
            lines.append(f'{op} {s} {iri(f"p{k % 4}")} "{n}-{k}" {rng.choice(["", iri("g")])} .')
        lines.append("TA ." if rng.random() < 0.1 else "TC .")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("use_filter", [True, False])
def test_new_terms_are_not_looked_up_once_the_cache_started_over(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, use_filter: bool
) -> None:
    # A cache of 32 terms starts over again and again on this log; without the filter
    # every uncached term is looked up, most of them new (the second case shows the
    # count the first one must stay far below, so the assertion can fail).
    if not use_filter:
        monkeypatch.setattr(sql_terms.TermDictionary, "_stored_hashes", lambda target: None)
    lookups = LookupCounter(monkeypatch)
    text = growing_log(5, patches=300)
    with SqlTarget(sqlite_url, term_cache=32) as t:
        apply_text(text, t, batch_rows=4)
        assert (t._filter is not None) is use_filter
        assert state(t) == reference(text, batch_rows=4)
        dictionary_is_consistent(t)
    if use_filter:
        # Lookups ask for stored terms, plus the filter's rare false positives.
        assert lookups.unmatched <= 0.03 * lookups.asked + 3, (lookups.unmatched, lookups.asked)
    else:
        assert lookups.unmatched > 500


def test_the_filter_built_mid_transaction_grows_with_new_terms(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A filter of 64 bits (capacity 4) is full at once: it is built from the stored hashes
    # (our own uncommitted ones included) and takes every later new term in new layers.
    monkeypatch.setattr(term_filter, "MIN_BITS", 64)
    text = growing_log(6, patches=200)
    with SqlTarget(sqlite_url, term_cache=16) as t:
        apply_text(text, t, batch_rows=3)
        assert t._filter is not None and t._filter.layers >= 3
        with t.engine.connect() as conn:
            stored = [h for (h,) in conn.exec_driver_sql("SELECT h FROM ps_terms")]
        assert all(h in t._filter for h in stored)
        assert state(t) == reference(text, batch_rows=3)
        dictionary_is_consistent(t)


def test_a_build_in_slices_takes_the_terms_stored_meanwhile(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Slices of ~8 hashes, one read per call: the build spans many batches, during which
    # new terms are stored in slices it has read already and in slices it has not; the
    # filter it ends with must hold every stored hash.
    monkeypatch.setattr(term_filter, "SLICE_ROWS", 8)
    monkeypatch.setattr(sql_terms, "FILTER_STEP_ROWS", 1)
    steps: list[bool] = []
    original = term_filter.FilterBuild.step

    def counted(build: term_filter.FilterBuild, scan: Any, budget: int) -> bool:
        steps.append(original(build, scan, budget))
        return steps[-1]

    monkeypatch.setattr(term_filter.FilterBuild, "step", counted)
    text = growing_log(8, patches=300)
    with SqlTarget(sqlite_url, term_cache=64) as t:
        apply_text(text, t, batch_rows=4)
        assert t._filter is not None and t._building is None
        assert steps.count(False) >= 5 and steps[-1]  # built over several calls, then used
        with t.engine.connect() as conn:
            stored = [h for (h,) in conn.exec_driver_sql("SELECT h FROM ps_terms")]
        assert all(h in t._filter for h in stored)
        assert state(t) == reference(text, batch_rows=4)
        dictionary_is_consistent(t)


def test_a_slice_is_read_from_the_hash_index(sqlite_url: str) -> None:
    # Each slice a build reads is a range of the covering index on h, not a table scan
    # (statements.py's rule for the write path: no cost that grows with the table per call).
    with SqlTarget(sqlite_url) as t:
        apply_text(f"A {iri('s')} {iri('p')} {iri('o')} .\n", t)
        with t.engine.connect() as conn:
            for sql, params in ((sql_terms._HASH_SLICE, (0, 10)), (sql_terms._HASH_TAIL, (0,))):
                plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params))
                assert "USING COVERING INDEX ix_ps_terms_h" in plan, plan


def test_a_filter_is_dropped_when_another_writer_adds_terms(sqlite_url: str) -> None:
    # Our filter lacks the hash of a term another process stored between our
    # transactions; trusting it would store that term a second time.
    a = SqlTarget(sqlite_url, term_cache=8)
    apply_text(growing_log(7, patches=60), a, source="a", batch_rows=3)
    a.flush()
    assert a._filter is not None
    shared = iri("shared")
    with SqlTarget(sqlite_url) as b:
        apply_text(f'A {shared} {iri("p")} "from b" .\n', b, source="b")
    apply_text(f'A {shared} {iri("p0")} "from a" .\nA {iri("s1-0")} {iri("p1")} {shared} .\n', a, source="a2")
    assert a._filter is None or shared in a._ids
    a.close()
    with SqlTarget(sqlite_url) as t:
        dictionary_is_consistent(t)
        quads = set(t.quads())
    assert (shared, iri("p"), '"from b"', "") in quads
    assert (shared, iri("p0"), '"from a"', "") in quads


def test_a_build_under_way_is_dropped_when_another_writer_adds_terms(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, with the build half done: the slices it has read lack the other writer's
    # terms, so it must start over rather than finish.
    monkeypatch.setattr(term_filter, "SLICE_ROWS", 1)  # a slice per stored term or so
    monkeypatch.setattr(sql_terms, "FILTER_STEP_ROWS", 1)
    a = SqlTarget(sqlite_url, term_cache=8)
    units = ["TX .\n" + unit for unit in growing_log(7, patches=80).split("TX .\n")[1:]]
    for i, unit in enumerate(units):  # until a transaction ends with the build half done
        apply_text(unit, a, source=f"a{i}", batch_rows=3)
        a.flush()
        if a._building is not None:
            break
    assert a._building is not None and a._filter is None
    theirs = [iri(f"theirs{i}") for i in range(60)]
    with SqlTarget(sqlite_url) as b:
        apply_text("".join(f'A {t} {iri("p")} "b" .\n' for t in theirs), b, source="b")
    apply_text(f'A {theirs[0]} {iri("q")} "a" .\n', a, source="mine", batch_rows=2)
    assert a._building is None and a._filter is None  # dropped, not finished
    ours = "".join(f'TX .\nA {t} {iri("q")} "a" .\nTC .\n' for t in theirs[1:])
    apply_text(ours, a, source="ours", batch_rows=2)
    a.close()
    with SqlTarget(sqlite_url) as t:
        dictionary_is_consistent(t)
        assert {(s, p) for s, p, _, _ in t.quads() if s in theirs} == {(x, iri(y)) for x in theirs for y in "pq"}


def on_slice_edges(text: str) -> int:
    """Four hash values, each on an edge between slices whenever a build makes four or more."""
    return -(1 << 63) + (zlib.crc32(text.encode()) % 4) * (1 << 62)


def sixteen_values(text: str) -> int:
    return zlib.crc32(text.encode()) % 16


@pytest.mark.parametrize("weak", [on_slice_edges, sixteen_values])
def test_terms_sharing_a_hash_with_the_filter_built(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, weak: Any
) -> None:
    # With a handful of hash values the filter answers "maybe" for nearly every term: they
    # are all looked up, told apart by text, and none is stored twice. Hashes exactly on
    # the edges between slices (each slice is lo <= h < hi) must be read by the build, or
    # their terms would be stored twice.
    monkeypatch.setattr(term_filter, "SLICE_ROWS", 2)
    monkeypatch.setattr(sql_terms, "term_hash", weak)
    text = random_log(9, patches=40)
    with SqlTarget(sqlite_url, term_cache=8) as t:
        apply_text(text, t, batch_rows=3)
        assert t._filter is not None
        assert state(t) == reference(text, batch_rows=3)
        dictionary_is_consistent(t)
