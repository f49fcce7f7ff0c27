"""Presence lookups of a ``sparql+http`` target: only rows whose presence is unknown are looked
up, what the applier's own requests left is remembered without the store's state resting on
it, and ``counts=requested`` writes the same state with no lookups for rows touched once.

Differential against the memory target (docs/design.md §5, set semantics of the counts);
docs/sparql-stores.md ("Presence and counts"); RDF Patch: https://afs.github.io/rdf-delta/rdf-patch.html
(``A``/``D`` rows, "Add" and "Delete": adding a present quad or deleting an absent one is a no-op).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

from patchsync.apply import MemoryTarget
from patchsync.apply.registry import open_target
from patchsync.errors import UsageError

from .apply_helpers import apply_text, state
from .sparql_helpers import update
from .test_sparql_exactly_once import applied, clear, url
from .workloads.unit_logs import GeneratedLog, unit_logs

P = "<http://e/p>"
G = "<http://e/g>"
DEFAULT = "urn:x-patchsync:default"  # the Virtuoso layout's default graph


def rows(verb: str, first: int, last: int, graph: str = "") -> str:
    tail = f" {graph}" if graph else ""
    return "".join(f'{verb} <http://e/s{i}> {P} "v{i}"{tail} .\n' for i in range(first, last))


def patch(n: int, body: str) -> str:
    prev = f"H prev <urn:p{n - 1}> .\n" if n else ""
    return f"H id <urn:p{n}> .\n{prev}TX .\n{body}TC .\nZ .\n"


def counts(result: Any) -> tuple[int, int, int]:
    return result.added, result.deleted, result.noop


def test_rows_this_applier_wrote_are_not_looked_up_again(sparql_server: Any) -> None:
    target: Any = open_target(url(sparql_server))
    reference = MemoryTarget()
    first = patch(0, rows("A", 0, 50) + rows("A", 0, 20, G))
    assert counts(apply_text(first, target, source="one")) == counts(apply_text(first, reference, source="one"))
    before = target.lookups
    # Deletes and re-adds of rows the first apply wrote: known, no presence query.
    second = patch(1, rows("D", 0, 30) + rows("A", 10, 20, G) + rows("D", 0, 5, G))
    assert counts(apply_text(second, target, source="two")) == counts(apply_text(second, reference, source="two"))
    assert target.lookups == before
    # New rows are looked up, in one query for each kind of row.
    third = patch(2, rows("A", 100, 140) + rows("D", 200, 210))
    assert counts(apply_text(third, target, source="three")) == counts(apply_text(third, reference, source="three"))
    assert target.lookups == before + 2  # one for the adds, one for the deletes
    assert state(target)[0] == state(reference)[0]
    target.close()


def test_the_state_never_rests_on_what_is_remembered(sparql_server: Any) -> None:
    """Another writer changes rows the target remembers: the counts may be off (documented),
    the rows are still written, so the store reaches the memory target's state."""
    target: Any = open_target(url(sparql_server))
    apply_text(patch(0, rows("A", 0, 10)), target, source="one")
    # Behind the target's back: five of its rows deleted, one row it never wrote added.
    wrap = (lambda body: f"GRAPH <{DEFAULT}> {{ {body} }}") if sparql_server.name == "virtuoso" else str
    update(sparql_server.endpoints, "DELETE DATA { " + wrap(rows("", 0, 5).replace("\n", " ")) + " }")
    update(sparql_server.endpoints, "INSERT DATA { " + wrap(rows("", 99, 100).replace("\n", " ")) + " }")
    log = patch(0, rows("A", 0, 10)) + patch(1, rows("A", 0, 10) + rows("D", 99, 100))
    reference = MemoryTarget()
    apply_text(log, reference, source="one")
    apply_text(log, target, source="one")
    assert state(target)[0] == state(reference)[0]
    target.close()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(log=unit_logs(max_patches=4, max_rows=5))
def test_requested_counts_reach_the_memory_targets_state(sparql_server: Any, tmp_path: Any, log: GeneratedLog) -> None:
    """``counts=requested``: the same quads as the memory target, the same units and patches;
    every row is counted once (as requested: a no-op only where the group itself tells)."""
    assume(not log.star)
    clear(sparql_server)
    path = tmp_path / "log.jellyp"
    path.write_bytes(log.data)
    reference = MemoryTarget()
    expected = applied(path, reference)
    target: Any = open_target(url(sparql_server, counts="requested"))
    try:
        got = applied(path, target)
        assert got[1] == expected[1]
        if expected[0]:
            units, aborted, added, deleted, noop, patches, skipped = got[0]
            assert (units, aborted, patches, skipped) == (expected[0][0], expected[0][1], *expected[0][5:])
            assert added + deleted + noop == sum(expected[0][2:5])
        assert state(target)[0] == state(reference)[0]
    finally:
        target.close()


def test_requested_counts_send_no_lookup_and_reach_the_state(sparql_server: Any) -> None:
    """No presence query; rows the store held behind the target's back end as the log says,
    also where one group adds and then deletes them (taken as absent, deleted anyway)."""
    target: Any = open_target(url(sparql_server, counts="requested"))
    behind = rows("A", 0, 10) + rows("A", 200, 206)
    wrap = (lambda body: f"GRAPH <{DEFAULT}> {{ {body} }}") if sparql_server.name == "virtuoso" else str
    update(sparql_server.endpoints, "INSERT DATA { " + wrap(behind.replace("A ", "").replace("\n", " ")) + " }")
    log = patch(0, rows("A", 0, 40) + rows("D", 100, 110, G)) + patch(1, rows("D", 0, 5))
    log += patch(2, rows("A", 200, 204)) + patch(3, rows("D", 200, 204))  # one group: held before
    result = apply_text(log, target)
    assert counts(result) == (44, 19, 0)  # each row counted as requested
    assert target.lookups == 0
    reference = MemoryTarget()
    apply_text(behind, reference, source="behind")
    apply_text(log, reference)
    assert state(target)[0] == state(reference)[0]
    target.close()


def test_counts_option_is_checked() -> None:
    with pytest.raises(UsageError, match="counts= is exact or requested"):
        open_target("sparql+http://127.0.0.1:1?layout=oxigraph&counts=some")
