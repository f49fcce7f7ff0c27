"""The state graphs: one log's checkpoint, its guard, the applied patch ids (sans I/O).

Per log (0019, decision 2), with ``S`` = ``STATE/<sha-256 of the log's name, 24 hex>``:

- ``<S>`` holds ``<S> ps:source "name"``, ``<S> ps:at N`` (how many requests moved the log,
  its *position*), ``<S> ps:checkpoint "json"`` (offset, frame, row, patch count, last patch id,
  fingerprint: nothing writer-specific, so two writers of one unit write the same bytes) and
  ``<S> ps:applied "id"`` for every applied patch id (the chain rule's re-delivery check);
- ``<S/at/N>`` holds ``<S> ps:guard N``: it exists while the position is N. A unit's request
  starts by dropping it (``DROP GRAPH``, not ``SILENT``, which fails when the graph is missing,
  SPARQL 1.1 Update §3.2.2), so a request made against a stale position fails before it
  writes; it ends by creating ``<S/at/N+1>``.
- ``<STATE/head>`` holds ``<STATE> ps:head "id"``, the last applied patch id of any log.

A request: guard drop, the data operations, the checkpoint replaced, the next guard. On a
store that applies a request whole (Oxigraph) it is exactly once by construction; on one
that commits operation by operation (Virtuoso), the checkpoint comes after the data and the
data are a net change, so what a failed request left is made right by sending it again
(:func:`settle` decides, from the state read back).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from patchsync.apply.target import Checkpoint, PatchRecord
from patchsync.errors import SourceBusy
from patchsync.terms.ntriples import format_iri, format_string

from .text import APPLIED, AT, CHECKPOINT, GUARD, HEAD, SOURCE

#: The checkpoint fields kept in the store (``updated_at`` is the writer's clock: left out).
_FIELDS = ("offset", "frame", "row", "patches", "last_id", "fingerprint")


def log_graph(state: str, source: str) -> str:
    """The IRI of one log's state graph."""
    return f"{state}/{hashlib.sha256(source.encode('utf-8')).hexdigest()[:24]}"


def encode_checkpoint(cp: Checkpoint) -> str:
    return json.dumps({name: getattr(cp, name) for name in _FIELDS}, sort_keys=True, ensure_ascii=False)


def decode_checkpoint(text: str) -> Checkpoint:
    return Checkpoint(**json.loads(text))


@dataclass(frozen=True, slots=True)
class LogState:
    """What the store holds of one log: its positions, guards and checkpoints (normally one each)."""

    positions: frozenset[int]
    guards: frozenset[int]
    checkpoints: tuple[str, ...]
    applied: frozenset[str]

    @property
    def position(self) -> int | None:
        return next(iter(self.positions)) if len(self.positions) == 1 else None

    def checkpoint(self) -> Checkpoint | None:
        """The checkpoint to resume from: the lowest where two appliers' requests overlapped on
        a store that lets both commit (Oxigraph; 0019): replaying from it is harmless, its
        writes being net changes, and the next request replaces both."""
        found = [decode_checkpoint(c) for c in self.checkpoints]
        return min(found, key=lambda cp: (cp.offset, cp.row), default=None)


def state_query(s: str) -> str:
    """Everything of one log's state (:class:`LogState`), by subject: no scan of the data."""
    iri = format_iri(s)
    return (
        f"SELECT ?p ?o ?g WHERE {{ {{ GRAPH {iri} {{ {iri} ?p ?o }} }} UNION {{ GRAPH ?g {{ {iri} {GUARD} ?o }} }} }}"
    )


def read_state(rows: list[dict[str, Any]]) -> LogState:
    positions: set[int] = set()
    guards: set[int] = set()
    checkpoints: list[str] = []
    applied: set[str] = set()
    for row in rows:
        value = row["o"]["value"]
        if "g" in row:
            guards.add(int(value))
            continue
        p = "<" + row["p"]["value"] + ">"
        if p == AT:
            positions.add(int(value))
        elif p == CHECKPOINT:
            checkpoints.append(value)
        elif p == APPLIED:
            applied.add(value)
    return LogState(frozenset(positions), frozenset(guards), tuple(sorted(checkpoints)), frozenset(applied))


def _guard(s: str, n: int) -> str:
    return format_iri(f"{s}/at/{n}")


def _guard_triple(s: str, n: int) -> str:
    return f"GRAPH {_guard(s, n)} {{ {format_iri(s)} {GUARD} {n} }}"


def setup_request(s: str, source: str) -> str:
    """A new log's first guard and position 0; fails whole (first operation) if it exists."""
    iri = format_iri(s)
    return (
        f"CREATE GRAPH {_guard(s, 0)} ;\n"
        f"INSERT DATA {{ {_guard_triple(s, 0)}\n GRAPH {iri} {{ {iri} {SOURCE} {format_string(source)} . {iri} {AT} 0 }} }}"
    )


def guard_first(s: str, n: int) -> str:
    """A request's first operation: fails unless the log is still at ``n``."""
    return f"DROP GRAPH {_guard(s, n)}"


def keep_guard(s: str, n: int) -> list[str]:
    """An intermediate request's guard (a unit too large for one request): checked, kept."""
    return [guard_first(s, n), f"CREATE GRAPH {_guard(s, n)}", f"INSERT DATA {{ {_guard_triple(s, n)} }}"]


def checkpoint_last(s: str, state: str, n: int, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> list[str]:
    """A request's last operations: the checkpoint at ``n + 1``, the applied ids, the new guard."""
    iri = format_iri(s)
    ops = [
        f"DELETE {{ GRAPH {iri} {{ {iri} ?p ?o }} }} WHERE {{ GRAPH {iri} {{ {iri} ?p ?o "
        f"FILTER (?p = {AT} || ?p = {CHECKPOINT}) }} }}"
    ]
    ids = [r.patch_id for r in records if r.patch_id is not None]
    facts = [f"{iri} {AT} {n + 1} .", f"{iri} {CHECKPOINT} {format_string(encode_checkpoint(checkpoint))} ."]
    facts += [f"{iri} {APPLIED} {format_string(i)} ." for i in ids]
    data = f"GRAPH {iri} {{ " + " ".join(facts) + " }"
    if ids:
        head_g, head_s = format_iri(f"{state}/head"), format_iri(state)
        ops.append(
            f"DELETE {{ GRAPH {head_g} {{ {head_s} {HEAD} ?h }} }} WHERE {{ GRAPH {head_g} {{ {head_s} {HEAD} ?h }} }}"
        )
        data += f"\nGRAPH {head_g} {{ {head_s} {HEAD} {format_string(ids[-1])} }}"
    ops.append(f"INSERT DATA {{ {data} }}")
    ops.append(f"CREATE GRAPH {_guard(s, n + 1)}")
    ops.append(f"INSERT DATA {{ {_guard_triple(s, n + 1)} }}")
    return ops


def make_guard(s: str, n: int) -> str:
    """The guard of position ``n`` made again after a request that stopped halfway (Virtuoso).

    Guarded the other way round: it fails (and makes nothing) if the guard of ``n + 1`` exists,
    that is, if the next unit has been applied meanwhile; and ``CREATE GRAPH`` of ``n``, not
    ``SILENT``, lets one applier win."""
    return ";\n".join(
        [
            f"CREATE GRAPH {_guard(s, n + 1)}",
            f"DROP GRAPH {_guard(s, n + 1)}",
            f"CREATE GRAPH {_guard(s, n)}",
            f"INSERT DATA {{ {_guard_triple(s, n)} }}",
        ]
    )


def consolidate(s: str, st: LogState, position: int) -> str:
    """One log's state made whole again at ``position`` with its lowest checkpoint (see
    :meth:`LogState.checkpoint`): every guard dropped, one position, one guard."""
    iri = format_iri(s)
    ops = [f"DROP SILENT GRAPH {_guard(s, g)}" for g in sorted(st.guards)]
    ops.append(
        f"DELETE {{ GRAPH {iri} {{ {iri} ?p ?o }} }} WHERE {{ GRAPH {iri} {{ {iri} ?p ?o "
        f"FILTER (?p = {AT} || ?p = {CHECKPOINT}) }} }}"
    )
    facts = [f"{iri} {AT} {position} ."]
    lowest = st.checkpoint()
    if lowest is not None:
        facts.append(f"{iri} {CHECKPOINT} {format_string(encode_checkpoint(lowest))} .")
    ops.append(f"INSERT DATA {{ GRAPH {iri} {{ " + " ".join(facts) + " } }")
    ops.append(f"CREATE SILENT GRAPH {_guard(s, position)}")
    ops.append(f"INSERT DATA {{ {_guard_triple(s, position)} }}")
    return " ;\n".join(ops)


def head_query(state: str) -> str:
    return f"SELECT ?h WHERE {{ GRAPH {format_iri(state + '/head')} {{ {format_iri(state)} {HEAD} ?h }} }}"


def _under(state: str) -> str:
    return f'FILTER (STRSTARTS(STR(?s), "{state}/"))'


def applied_query(state: str) -> str:
    return f"SELECT ?id WHERE {{ GRAPH ?s {{ ?s {APPLIED} ?id }} {_under(state)} }}"


def sources_query(state: str) -> str:
    return (
        f"SELECT ?src ?at ?cp WHERE {{ GRAPH ?s {{ ?s {SOURCE} ?src ; {AT} ?at "
        f"OPTIONAL {{ ?s {CHECKPOINT} ?cp }} }} {_under(state)} }}"
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the state read back after a request says: ``applied`` (at ``n + 1``), or to send it
    again, and a repair to make first (a guard a half-done request dropped or did not make)."""

    applied: bool
    repair: str | None = None


def settle(source: str, s: str, n: int, st: LogState, mine: str | None) -> Outcome:
    """Decide, from ``st`` read back after a request moving ``source`` from ``n`` to ``n + 1``
    (answered or not), whether it is applied; raise :class:`MovedError` when another applier
    moved the log. ``mine`` is the checkpoint the request wrote (encoded), None for a request
    that keeps the position (a part of a unit too large for one request).

    Positions count requests, not units: two appliers that grouped units differently both
    reach ``n + 1``, so only the checkpoint itself says whose request the store holds."""
    if len(st.positions) > 1:
        raise MovedError(
            f"{source}: another applier wrote this log in the store at the same time (positions "
            f"{sorted(st.positions)}): apply it again to resume from the lower checkpoint"
        )
    at = st.position
    if at == n + 1 and mine is not None and st.checkpoints == (mine,):
        repair = (
            None
            if n + 1 in st.guards
            else f"CREATE GRAPH {_guard(s, n + 1)} ;\nINSERT DATA {{ {_guard_triple(s, n + 1)} }}"
        )
        return Outcome(True, repair)
    if at == n:
        return Outcome(False, None if n in st.guards else make_guard(s, n))
    ids = " and ".join(sorted({str(decode_checkpoint(c).last_id) for c in st.checkpoints}))
    raise MovedError(
        f"{source}: another applier moved this log in the store meanwhile (position {at}, last patch {ids}; "
        f"this applier was at {n}): apply it again to resume from the store's checkpoint"
    )


class MovedError(SourceBusy):
    """Another applier moved the log meanwhile: reopen and resume from the store's checkpoint."""


__all__ = [
    "LogState",
    "MovedError",
    "Outcome",
    "applied_query",
    "checkpoint_last",
    "decode_checkpoint",
    "encode_checkpoint",
    "guard_first",
    "head_query",
    "keep_guard",
    "log_graph",
    "read_state",
    "settle",
    "setup_request",
    "sources_query",
    "state_query",
]
