"""RDF Delta's patch log lock, as pure functions of a lock table with a fake clock.

The authority is RDF Delta's own server and client, in <https://github.com/afs/rdf-delta>:
``S_DRPC`` (rdf-delta-server-http, the RPC operations and their replies), ``DeltaConst``
(op and field names), ``PatchLogIndexBase`` (rdf-delta-server-local, the lock itself),
``DeltaLinkLocal`` (unknown data sources) and ``DeltaLinkHTTP``/``LogLock``
(rdf-delta-client, what a client sends and how it waits). The lease is ours
(docs/decisions/0002-rdf-delta-http.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from patchsync.serve import delta_protocol as dp
from patchsync.serve.delta_locks import LEASE, LockTable
from patchsync.serve.errors import status_of

NAMES = ["a", "b"]
A, B = dp.datasource_id("a"), dp.datasource_id("b")
OTHER = "0a9b0f36-7bd4-4a7c-a4ac-1b8f6b4a1f01"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rpc(table: LockTable, op: str, **arg: Any) -> dict[str, Any]:
    """One RPC through the same parser the HTTP door uses."""
    call = dp.parse_rpc(json.dumps({"operation": op, "opid": "1", "arg": arg}).encode())
    return table.answer(call, NAMES)


def test_lock_ops_are_known_and_need_write() -> None:
    for op in ("lock", "lock-refresh", "lock-read", "lock-grab", "unlock"):
        assert op in dp.OPERATIONS and op in dp.WRITE_OPERATIONS


def test_acquire_is_exclusive_and_read_shows_owner_and_ticks() -> None:
    table = LockTable(Clock())
    assert rpc(table, "lock-read", datasource=A) == {}
    session = rpc(table, "lock", datasource=A)["lock-ref"]
    assert dp.looks_like_uuid(session)
    assert rpc(table, "lock", datasource=f"id:{A}") == {"lock-ref": None}  # held: null, not reentrant
    assert rpc(table, "lock-read", datasource=A) == {"lock-ref": session, "lock-ticks": 1}
    assert rpc(table, "lock-read", datasource=B) == {}  # one lock per data source
    assert rpc(table, "lock", datasource=B)["lock-ref"] not in (None, session)


def test_refresh_counts_ticks_and_returns_the_entries_not_refreshed() -> None:
    clock = Clock()
    table = LockTable(clock)
    session = rpc(table, "lock", datasource=A)["lock-ref"]
    wrong = {"datasource": A, "lock-ref": OTHER}
    unknown = {"datasource": OTHER, "lock-ref": session}
    mine = {"datasource": A, "lock-ref": session}
    assert rpc(table, "lock-refresh", array=[mine]) == {"array": []}
    assert rpc(table, "lock-refresh", array=[mine, wrong, unknown]) == {"array": [wrong, unknown]}
    assert rpc(table, "lock-read", datasource=A)["lock-ticks"] == 3
    assert rpc(table, "lock-refresh", array=[]) == {"array": []}


def test_refresh_extends_the_lease_and_expiry_frees_the_lock() -> None:
    clock = Clock()
    table = LockTable(clock)
    session = rpc(table, "lock", datasource=A)["lock-ref"]
    for _ in range(3):  # each refresh inside the lease keeps it
        clock.now += LEASE - 1
        assert rpc(table, "lock-refresh", array=[{"datasource": A, "lock-ref": session}]) == {"array": []}
    clock.now += LEASE - 1
    assert rpc(table, "lock", datasource=A) == {"lock-ref": None}
    clock.now += 1  # a full lease without a refresh
    assert rpc(table, "lock-read", datasource=A) == {}
    entry = {"datasource": A, "lock-ref": session}
    assert rpc(table, "lock-refresh", array=[entry]) == {"array": [entry]}
    assert rpc(table, "lock", datasource=A)["lock-ref"] not in (None, session)


def test_without_a_lease_the_lock_is_kept_as_rdf_delta_keeps_it() -> None:
    clock = Clock()
    table = LockTable(clock, lease=None)
    rpc(table, "lock", datasource=A)
    clock.now += 100 * LEASE
    assert rpc(table, "lock", datasource=A) == {"lock-ref": None}


def test_grab_needs_the_holders_session() -> None:
    table = LockTable(Clock())
    assert rpc(table, "lock-grab", datasource=A, **{"lock-ref": OTHER}) == {"lock-ref": None}  # free
    old = rpc(table, "lock", datasource=A)["lock-ref"]
    rpc(table, "lock-refresh", array=[{"datasource": A, "lock-ref": old}])
    assert rpc(table, "lock-grab", datasource=A, **{"lock-ref": OTHER}) == {"lock-ref": None}
    assert rpc(table, "lock-read", datasource=A) == {"lock-ref": old, "lock-ticks": 2}
    new = rpc(table, "lock-grab", datasource=A, **{"lock-ref": f"id:{old}"})["lock-ref"]
    assert new not in (None, old)
    assert rpc(table, "lock-read", datasource=A) == {"lock-ref": new, "lock-ticks": 1}  # ticks reset
    assert rpc(table, "lock-grab", datasource=A, **{"lock-ref": old}) == {"lock-ref": None}


def test_unlock_frees_only_for_the_holder() -> None:
    table = LockTable(Clock())
    session = rpc(table, "lock", datasource=A)["lock-ref"]
    assert rpc(table, "unlock", datasource=A, **{"lock-ref": OTHER}) == {}
    assert rpc(table, "lock-read", datasource=A)["lock-ref"] == session
    assert rpc(table, "unlock", datasource=A, **{"lock-ref": session.upper()}) == {}
    assert rpc(table, "lock-read", datasource=A) == {}
    assert rpc(table, "unlock", datasource=A, **{"lock-ref": session}) == {}  # free: no error
    assert rpc(table, "unlock", datasource=OTHER, **{"lock-ref": session}) == {}  # unknown: no error
    table.forget("a")


def test_unknown_data_source_is_404_for_lock_read_and_grab() -> None:
    table = LockTable(Clock())
    for op, extra in (("lock", {}), ("lock-read", {}), ("lock-grab", {"lock-ref": OTHER})):
        with pytest.raises(Exception) as caught:
            rpc(table, op, datasource=OTHER, **extra)
        assert status_of(caught.value).http == 404, op


@pytest.mark.parametrize(
    ("op", "arg"),
    [
        ("lock", {}),
        ("lock", {"datasource": 7}),
        ("lock", {"datasource": "not-a-uuid"}),
        ("lock-grab", {"datasource": A}),
        ("unlock", {"datasource": A}),
        ("unlock", {"datasource": A, "lock-ref": "x"}),
        ("lock-refresh", {}),
        ("lock-refresh", {"array": {"datasource": A}}),
        ("lock-refresh", {"array": ["x"]}),
        ("lock-refresh", {"array": [{"datasource": A}]}),
    ],
)
def test_bad_arguments_are_400(op: str, arg: dict[str, Any]) -> None:
    with pytest.raises(dp.BadRequest) as caught:
        rpc(LockTable(Clock()), op, **arg)
    assert status_of(caught.value).http == 400
