"""The in-memory reference target: the plainest correct store, every other target is tested against it.

Terms are N-Triples strings (:class:`patchsync.terms.ntriples.NTriplesTerms`) and the default
graph is ``""``, so two targets compare by comparing sets of string tuples. Each unit
keeps an undo log, so ``rollback`` restores the state before ``begin`` exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from patchsync.apply.target import CAN_CONTAINS, CAN_DUMP, CAN_NAMESPACES, Checkpoint, LocalLedger, PatchRecord, Quad
from patchsync.errors import UsageError
from patchsync.terms.ntriples import NTriplesTerms

_ADD = 0
_DEL = 1


class MemoryTarget(LocalLedger):
    """A dataset, namespaces, checkpoints and patch history held in Python containers."""

    capabilities: ClassVar[frozenset[str]] = frozenset({CAN_DUMP, CAN_NAMESPACES, CAN_CONTAINS})

    def __init__(self) -> None:
        self.adapter = NTriplesTerms()
        self.data: set[tuple[str, str, str, str]] = set()
        self.prefixes: dict[tuple[str, str], str] = {}
        self._init_ledger()
        self._undo: list[tuple[int, Any]] | None = None
        self._prefix_undo: dict[tuple[str, str], str | None] = {}

    # -- reads -------------------------------------------------------------------------

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        return iter(sorted(self.data))

    def namespaces(self) -> dict[tuple[str, str], str]:
        return dict(self.prefixes)

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        self._undo = []
        self._prefix_undo = {}

    def add(self, quads: Sequence[Quad]) -> int:
        data, undo = self.data, self._undo
        assert undo is not None, "add outside a unit"
        changed = 0
        for s, p, o, g in quads:
            q = (s, p, o, g or "")
            if q not in data:
                data.add(q)
                undo.append((_ADD, q))
                changed += 1
        return changed

    def delete(self, quads: Sequence[Quad]) -> int:
        data, undo = self.data, self._undo
        assert undo is not None, "delete outside a unit"
        changed = 0
        for s, p, o, g in quads:
            q = (s, p, o, g or "")
            if q in data:
                data.discard(q)
                undo.append((_DEL, q))
                changed += 1
        return changed

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present (lets the applier resolve repeated quads in bulk)."""
        return [(s, p, o, g or "") in self.data for s, p, o, g in quads]

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        key = (graph or "", name)
        self._prefix_undo.setdefault(key, self.prefixes.get(key))
        self.prefixes[key] = iri

    def delete_prefix(self, graph: Any, name: str) -> None:
        key = (graph or "", name)
        self._prefix_undo.setdefault(key, self.prefixes.get(key))
        self.prefixes.pop(key, None)

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        self._record(source, checkpoint, records)
        self._undo = None
        self._prefix_undo = {}

    def rollback(self) -> None:
        undo = self._undo or []
        for op, q in reversed(undo):
            if op == _ADD:
                self.data.discard(q)
            else:
                self.data.add(q)
        for key, old in self._prefix_undo.items():
            if old is None:
                self.prefixes.pop(key, None)
            else:
                self.prefixes[key] = old
        self._undo = None
        self._prefix_undo = {}

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def open_memory_target(rest: str = "", **options: Any) -> MemoryTarget:
    """``memory:`` from the target registry: a fresh in-memory target (it takes no name or options)."""
    if rest or options:
        raise UsageError(f"memory:{rest} takes no path or options; use memory:")
    return MemoryTarget()
