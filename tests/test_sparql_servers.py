"""The SPARQL stores the tests start (tests/sparql_helpers.py) run, take updates and Graph Store
writes, and behave as docs/decisions/0019-sparql-stores.md says a target must allow for.

These pin the facts a ``sparql+http`` target is designed on: if a new release of either store
changes one, its test says so. Every request goes over plain HTTP (``urllib``), nothing of
patchsync's.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from .sparql_helpers import SparqlHttpError, count, gsp, http, quads, select, update

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"


def test_update_then_query_round_trips_every_term_kind(sparql_server: Any) -> None:
    """SPARQL 1.1 Update §3.1.1 INSERT DATA and §3.1.2 DELETE DATA
    (https://www.w3.org/TR/sparql11-update/#insertData), read back by a SELECT."""
    ep = sparql_server.endpoints
    g = f"{EX}g"
    update(
        ep,
        f'INSERT DATA {{ GRAPH <{g}> {{ <{EX}s> <{EX}p> <{EX}o>, "plain", "chat"@fr, "7"^^<{XSD}integer>, "gone" }} }} ;\n'
        f'DELETE DATA {{ GRAPH <{g}> {{ <{EX}s> <{EX}p> "gone" }} }}',
    )
    assert quads(ep, [g]) == {
        (f"<{EX}s>", f"<{EX}p>", f"<{EX}o>", f"<{g}>"),
        (f"<{EX}s>", f"<{EX}p>", '"plain"', f"<{g}>"),
        (f"<{EX}s>", f"<{EX}p>", '"chat"@fr', f"<{g}>"),
        (f"<{EX}s>", f"<{EX}p>", f'"7"^^<{XSD}integer>', f"<{g}>"),
    }


def test_graph_store_put_replaces_and_post_adds(sparql_server: Any) -> None:
    """Graph Store HTTP Protocol §5.3 PUT and §5.5 POST
    (https://www.w3.org/TR/sparql11-http-rdf-update/#http-put), N-Triples bodies."""
    ep = sparql_server.endpoints
    g = f"{EX}gsp"
    nt = "application/n-triples"
    assert gsp(ep, "PUT", g, f'<{EX}a> <{EX}p> "1" .\n<{EX}a> <{EX}p> "2" .\n'.encode(), nt) in (200, 201, 204)
    assert gsp(ep, "PUT", g, f'<{EX}b> <{EX}p> "3" .\n'.encode(), nt) in (200, 201, 204)
    assert gsp(ep, "POST", g, f'<{EX}c> <{EX}p> "4" .\n'.encode(), nt) in (200, 201, 204)
    assert {(s, o) for s, _, o, _ in quads(ep, [g])} == {(f"<{EX}b>", '"3"'), (f"<{EX}c>", '"4"')}


def _failing_last_operation(ep: Any) -> tuple[int, int]:
    """Send one request of three operations whose last fails when executed (SPARQL 1.1 Update
    §3.2.3: CREATE of an existing graph without SILENT is an error); the sizes of the graphs
    the first two changed, afterwards."""
    update(ep, f"CREATE GRAPH <{EX}made>")
    update(ep, f'INSERT DATA {{ GRAPH <{EX}g0> {{ <{EX}s> <{EX}p> "old" }} }}')
    with pytest.raises(SparqlHttpError) as refused:
        update(
            ep,
            f'DELETE DATA {{ GRAPH <{EX}g0> {{ <{EX}s> <{EX}p> "old" }} }} ;\n'
            f'INSERT DATA {{ GRAPH <{EX}g1> {{ <{EX}s> <{EX}p> "new" }} }} ;\n'
            f"CREATE GRAPH <{EX}made>",
        )
    assert refused.value.status == 500
    return count(ep, f"{EX}g0"), count(ep, f"{EX}g1")


def test_oxigraph_applies_a_request_whole_or_not_at_all(oxigraph_server: Any) -> None:
    """Oxigraph runs one update request in one transaction: nothing of it stays."""
    assert _failing_last_operation(oxigraph_server.endpoints) == (1, 0)


def test_virtuoso_keeps_the_operations_before_a_failing_one(virtuoso_server: Any) -> None:
    """Virtuoso's /sparql commits what a request did before the operation that failed, and
    answers 500: one request is not atomic there."""
    assert _failing_last_operation(virtuoso_server.endpoints) == (0, 1)


def test_virtuoso_refuses_blank_nodes_in_insert_data(virtuoso_server: Any) -> None:
    """Virtuoso refuses a blank node in INSERT DATA (SPARQL 1.1 Update §3.1.1 allows it), at
    compile time, in one line; the template of INSERT … WHERE {} takes it, fresh each time."""
    ep = virtuoso_server.endpoints
    g = f"{EX}b"
    with pytest.raises(SparqlHttpError) as refused:
        update(ep, f'INSERT DATA {{ GRAPH <{g}> {{ _:b1 <{EX}p> "x" }} }}')
    assert refused.value.status == 400 and "Blank node '_:b1' is not allowed" in refused.value.body
    for _ in range(2):
        update(ep, f'INSERT {{ GRAPH <{g}> {{ _:b1 <{EX}p> "x" }} }} WHERE {{}}')
    assert len(select(ep, f"SELECT DISTINCT ?s WHERE {{ GRAPH <{g}> {{ ?s <{EX}p> ?o }} }}")) == 2


def test_oxigraph_reads_a_quoted_subject_as_a_fresh_rdf12_reifier(oxigraph_server: Any) -> None:
    """Oxigraph 0.5 speaks RDF 1.2: ``<< s p o >> :p :o`` is sugar for a new blank reifier
    (https://www.w3.org/TR/rdf12-turtle/#reifying-triples), so the same INSERT DATA twice makes
    two; a quoted triple as the subject of an N-Quads line is refused (400)."""
    ep = oxigraph_server.endpoints
    g = f"{EX}star"
    for _ in range(2):
        update(ep, f'INSERT DATA {{ GRAPH <{g}> {{ << <{EX}a> <{EX}b> <{EX}c> >> <{EX}p> "said" }} }}')
    reifiers = select(ep, f'SELECT ?r ?t WHERE {{ GRAPH <{g}> {{ ?r <{EX}p> "said" ; <{RDF}reifies> ?t }} }}')
    assert len({r["r"]["value"] for r in reifiers}) == 2
    assert {r["t"]["type"] for r in reifiers} == {"triple"}
    with pytest.raises(SparqlHttpError) as refused:
        http(
            "POST",
            ep.store,
            f'<< <{EX}a> <{EX}b> <{EX}c> >> <{EX}p> "x" <{g}> .\n'.encode(),
            content_type="application/n-quads",
        )
    assert refused.value.status == 400


def test_virtuoso_refuses_quoted_triples(virtuoso_server: Any) -> None:
    """Virtuoso 7.2 has no RDF-star: a quoted triple is a syntax error (400), nothing applied."""
    ep = virtuoso_server.endpoints
    with pytest.raises(SparqlHttpError) as refused:
        update(ep, f'INSERT DATA {{ GRAPH <{EX}star> {{ << <{EX}a> <{EX}b> <{EX}c> >> <{EX}p> "said" }} }}')
    assert refused.value.status == 400 and "syntax error" in refused.value.body


def test_blank_nodes_are_refused_in_delete_data(sparql_server: Any) -> None:
    """SPARQL 1.1 Update §3.1.2: blank nodes are not allowed in DELETE DATA; both stores refuse
    the request with 400 before applying any of it."""
    ep = sparql_server.endpoints
    update(ep, f'INSERT DATA {{ GRAPH <{EX}b> {{ <{EX}s> <{EX}p> "kept" }} }}')
    with pytest.raises(SparqlHttpError) as refused:
        update(
            ep,
            f'DELETE DATA {{ GRAPH <{EX}b> {{ <{EX}s> <{EX}p> "kept" }} }} ; DELETE DATA {{ GRAPH <{EX}b> {{ _:x <{EX}p> "1" }} }}',
        )
    assert refused.value.status == 400
    assert count(ep, f"{EX}b") == 1


def test_virtuoso_serializes_writers_guarded_by_the_checkpoint_graph(virtuoso_server: Any) -> None:
    """Writers racing to move one checkpoint, each request guarded by ``DROP GRAPH`` of the
    graph named by the checkpoint it read (SPARQL 1.1 Update §3.2.2: an error unless SILENT
    when the graph does not exist): on Virtuoso the guard is serialized, so each position is
    taken by exactly one writer and no loser's data lands (docs/decisions/0019-sparql-stores.md)."""
    ep = virtuoso_server.endpoints
    cp, positions = "urn:x-test:checkpoint/", 15
    update(ep, f"CREATE GRAPH <{cp}0> ; INSERT DATA {{ GRAPH <{cp}0> {{ <{EX}log> <{EX}at> 0 }} }}")
    won: list[int] = []

    def current() -> int:
        rows = select(
            ep, f"SELECT ?n WHERE {{ GRAPH ?g {{ <{EX}log> <{EX}at> ?n }} FILTER STRSTARTS(STR(?g), '{cp}') }}"
        )
        assert len(rows) == 1, rows
        return int(rows[0]["n"]["value"])

    failures: list[BaseException] = []

    def writer(me: int) -> None:
        try:
            write(me)
        except BaseException as exc:  # a thread's failure fails the test
            failures.append(exc)

    def write(me: int) -> None:
        while (at := current()) < positions:
            new = at + 1
            data = " ".join(f'<{EX}d{new}_{i}> <{EX}by> "{me}" .' for i in range(50))
            try:
                update(
                    ep,
                    f"DROP GRAPH <{cp}{at}> ;\n"
                    f"INSERT DATA {{ GRAPH <{EX}data> {{ {data} }} }} ;\n"
                    f"CREATE GRAPH <{cp}{new}> ;\n"
                    f"INSERT DATA {{ GRAPH <{cp}{new}> {{ <{EX}log> <{EX}at> {new} }} }}",
                )
                won.append(new)
            except SparqlHttpError as exc:  # the guard failed (another writer moved on), or a deadlock
                assert exc.status == 500 and ("not been explicitly created" in exc.body or "40001" in exc.body)

    threads = [threading.Thread(target=writer, args=(me,)) for me in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert sorted(won) == list(range(1, positions + 1))
    rows = select(
        ep, f"SELECT ?s (COUNT(DISTINCT ?by) AS ?n) WHERE {{ GRAPH <{EX}data> {{ ?s <{EX}by> ?by }} }} GROUP BY ?s"
    )
    assert len(rows) == positions * 50 and {r["n"]["value"] for r in rows} == {"1"}


def test_virtuoso_delete_data_over_several_graph_blocks_deletes_part(virtuoso_server: Any) -> None:
    """SPARQL 1.1 Update §3.1.2 (https://www.w3.org/TR/sparql11-update/#deleteData): every
    triple of the QuadData is removed. Virtuoso 7.2.5 removes one of two per graph when one
    DELETE DATA names two GRAPH blocks (and answers 200), all of them with one block an
    operation, which is why a sparql+http target writes one graph an operation
    (patchsync/apply/targets/sparql/text.py, data_ops). If this starts failing, Virtuoso fixed it."""
    ep = virtuoso_server.endpoints
    graphs = [f"{EX}d0", f"{EX}d1"]
    blocks = [f'GRAPH <{g}> {{ <{EX}s> <{EX}p> "v"@en . <{EX}s> <{EX}p> <{EX}o> }}' for g in graphs]
    update(ep, "INSERT DATA { " + "\n".join(blocks) + " }")
    update(ep, "DELETE DATA { " + "\n".join(blocks) + " }")
    assert [count(ep, g) for g in graphs] == [1, 1]
    update(ep, " ;\n".join(f"DELETE DATA {{ {b} }}" for b in blocks))
    assert [count(ep, g) for g in graphs] == [0, 0]
