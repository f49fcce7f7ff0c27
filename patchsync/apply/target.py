"""The contract between the applier state machine and the stores it writes to.

The applier (:mod:`patchsync.apply.applier`) owns every rule of units, chains and checkpoints; a target only
stores. It is driven in this order for each unit of atomicity (docs/design.md §2)::

    begin()  (add(batch) | delete(batch) | add_prefix(...) | delete_prefix(...))*  commit(...) | rollback()

and ``flush()`` makes every committed unit durable. A target may group several committed
units in one storage transaction for throughput, as long as the checkpoint written with
them is the one of the last unit in the group (docs/design.md §2, §3): a crash then loses a
suffix of whole units and the checkpoint still names exactly what the store holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

from patchsync.errors import UsageError
from patchsync.terms import TermAdapter

#: ``(s, p, o, g)`` in the target's adapter terms; ``g`` is ``None`` in TRIPLES streams.
Quad = tuple[Any, Any, Any, Any]
#: One prefix row: ``(bind, graph, name, iri)``, ``bind`` False (and ``iri`` None) for ``PD``.
PrefixOp = tuple[bool, Any, str, Any]
#: A checkpoint's ``frame`` and ``row`` past every event at its offset: the whole message (one
#: patch of a stream or a served topic) there was applied, and resuming starts at the next.
PAST = 1 << 62


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where applying one source log stopped (docs/design.md §3).

    ``offset``/``frame``/``row`` are the position of the last event of the last applied
    unit (a frame offset and row index for Jelly-Patch, a line offset and number for
    text); resuming skips every event at or before it. ``patches`` counts the patches of
    the source passed so far (applied or skipped as re-delivered), ``last_id`` is the id
    of the last of them that had one.
    """

    offset: int
    frame: int
    row: int
    patches: int = 0
    last_id: str | None = None
    fingerprint: str | None = None
    updated_at: float | None = None

    @property
    def row_at(self) -> int | None:
        """The row of the last applied event at ``offset``; ``None`` when every event there
        was (:data:`PAST`), which is how positions are shown."""
        return None if self.row >= PAST else self.row


@dataclass(frozen=True, slots=True)
class PatchRecord:
    """One applied patch, kept for audit (docs/design.md §4): chain ids, position, counts, headers.

    ``chained`` is true when the patch was applied under the strict chain policy, which
    applies an id at most once per target (a SQL target holds such records to one per id).
    """

    patch_id: str | None
    prev: str | None
    source: str
    offset: int
    frame: int
    row: int
    added: int
    deleted: int
    noop: int
    applied_at: float
    headers: tuple[tuple[str, str], ...] = field(default=())
    chained: bool = False


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """What ``patchsync status`` shows for one source."""

    source: str
    checkpoint: Checkpoint


#: Capability names a target may declare in ``capabilities`` (rdflib's ``Store`` flags are
#: the model): callers test ``CAN_X in target.capabilities`` instead of probing attributes.
#: ``dump``: :class:`DumpableTarget` reads (``quads``, ``namespaces``, ``sources``).
CAN_DUMP = "dump"
#: ``namespaces``: ``add_prefix``/``delete_prefix`` are stored (not accepted and dropped).
CAN_NAMESPACES = "namespaces"
#: ``history``: ``history(source=None) -> list[PatchRecord]`` (the SQL target).
CAN_HISTORY = "history"
#: ``contains``: ``contains(quads) -> list[bool]`` answers presence in bulk.
CAN_CONTAINS = "contains"
#: ``discard``: ``discard()`` closes without committing pending units (after a failure).
CAN_DISCARD = "discard"
#: ``last_writes``: ``last_writes()`` announces that the writes from now on are the open
#: unit's last: ``commit()`` follows them, so no abort can come after them and the target
#: need not be able to undo them alone (a SQL target then sets no savepoint for the unit).
CAN_LAST_WRITES = "last_writes"
#: ``write_each``: ``add_each(quads) -> list[bool]`` and ``delete_each(quads) -> list[bool]``
#: write like ``add``/``delete`` and tell whether each quad changed the target.
CAN_WRITE_EACH = "write_each"
#: ``bulk_load``: ``defer_indexes() -> bool``, called in an open unit of an empty target
#: that is about to receive many quads, leaves out the indexes that only serve readers'
#: pattern lookups until the unit commits, and builds them then, each with one sort
#: instead of an insert at a random place per quad. The unit stays one atomic change.
CAN_BULK_LOAD = "bulk_load"
#: ``write_prefixes``: ``write_prefixes(ops)`` takes the prefix rows (:data:`PrefixOp`) of
#: several units in log order and stores what they leave, as ``add_prefix``/``delete_prefix``
#: one row at a time would, in a few statements.
CAN_WRITE_PREFIXES = "write_prefixes"
#: ``write_later``: ``add_each_later(quads)`` is ``add_each`` that may leave the write
#: running while the caller goes on; it returns a function that waits for the write and
#: answers as ``add_each`` would. Until then the caller makes no other call on the target
#: except ones that wait for the write themselves (every call of the SQL target does).
CAN_WRITE_LATER = "write_later"
CAPABILITIES = frozenset(
    {
        CAN_DUMP,
        CAN_NAMESPACES,
        CAN_HISTORY,
        CAN_CONTAINS,
        CAN_DISCARD,
        CAN_LAST_WRITES,
        CAN_WRITE_EACH,
        CAN_BULK_LOAD,
        CAN_WRITE_PREFIXES,
        CAN_WRITE_LATER,
    }
)


def capabilities_of(target: object) -> frozenset[str]:
    """What ``target`` declares it can do (empty for a target declaring nothing)."""
    declared: frozenset[str] = getattr(type(target), "capabilities", frozenset())
    return frozenset(declared)


def discard_target(target: object) -> None:
    """Close ``target`` after a failure: without committing where it declares ``discard``."""
    closer = target.discard if CAN_DISCARD in capabilities_of(target) else target.close  # type: ignore[attr-defined]
    closer()


@runtime_checkable
class Target(Protocol):
    """A store the applier writes to. See the module docstring for the call order."""

    #: The term adapter the target wants events decoded with.
    adapter: TermAdapter[Any]
    #: Optional abilities the target declares (``CAN_*`` names above).
    capabilities: ClassVar[frozenset[str]]

    def checkpoint(self, source: str) -> Checkpoint | None:
        """The stored checkpoint of ``source``, or ``None`` if it was never applied.

        This is an applier's read: a target that lets one applier at a time apply a source
        takes the source's lock here, and raises :class:`~patchsync.errors.SourceBusy` while
        another holds it (an observer reads :meth:`sources`, which takes no lock).
        """
        ...

    def head(self) -> str | None:
        """The id of the last patch applied to this target (from any source)."""
        ...

    def has_patch(self, patch_id: str) -> bool:
        """Whether a patch with this id was applied (re-delivery detection)."""
        ...

    def begin(self) -> None:
        """Start a unit."""
        ...

    def add(self, quads: Sequence[Quad]) -> int:
        """Add quads in order; returns how many were absent (the others are no-ops)."""
        ...

    def delete(self, quads: Sequence[Quad]) -> int:
        """Delete quads in order; returns how many were present."""
        ...

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        """Bind ``name`` to ``iri`` (replacing any binding of ``name``)."""
        ...

    def delete_prefix(self, graph: Any, name: str) -> None:
        """Remove the binding of ``name`` whatever its IRI (docs/design.md §5)."""
        ...

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        """End the unit: its changes, the checkpoint and patch records become one atomic step."""
        ...

    def rollback(self) -> None:
        """Undo everything since :meth:`begin`."""
        ...

    def flush(self) -> None:
        """Make every committed unit durable."""
        ...

    def close(self) -> None:
        """Flush and release the target's resources and locks."""
        ...


class DumpableTarget(Target, Protocol):
    """A target whose state can be read back (``patchsync dump`` and ``status``)."""

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        """Every quad as N-Triples term strings; the default graph is ``""``."""
        ...

    def namespaces(self) -> dict[tuple[str, str], str]:
        """``(graph, prefix) -> iri`` with graph and IRI as N-Triples strings (``""`` default)."""
        ...

    def sources(self) -> list[SourceStatus]:
        """Every source applied to this target with its checkpoint."""
        ...


class LocalLedger:
    """Checkpoints and applied-patch history held by the target object itself.

    For targets with no database of their own to keep them in (memory, rdflib objects and,
    through the memory target, files, which persist them in a sidecar). ``_record`` is
    called from ``commit``, after the unit's data changes are final.
    """

    #: Memory and rdflib targets can be dumped and keep prefixes (subclasses add more).
    capabilities: ClassVar[frozenset[str]] = frozenset({CAN_DUMP, CAN_NAMESPACES})
    checkpoints: dict[str, Checkpoint]
    history: list[PatchRecord]
    _ids: set[str]

    def _init_ledger(self) -> None:
        self.checkpoints = {}
        self.history = []
        self._ids = set()

    def checkpoint(self, source: str) -> Checkpoint | None:
        return self.checkpoints.get(source)

    def head(self) -> str | None:
        for record in reversed(self.history):
            if record.patch_id is not None:
                return record.patch_id
        return None

    def has_patch(self, patch_id: str) -> bool:
        return patch_id in self._ids

    def sources(self) -> list[SourceStatus]:
        return [SourceStatus(name, cp) for name, cp in sorted(self.checkpoints.items())]

    def _record(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        self.checkpoints[source] = checkpoint
        for record in records:
            self.history.append(record)
            if record.patch_id is not None:
                self._ids.add(record.patch_id)


def dumpable(target: Target) -> DumpableTarget:
    """``target`` as a :class:`DumpableTarget`, or :class:`UsageError` if it declares no ``dump``."""
    if CAN_DUMP not in capabilities_of(target):
        raise UsageError(f"{type(target).__name__} targets cannot be dumped (no {CAN_DUMP!r} capability)")
    return cast(DumpableTarget, target)
