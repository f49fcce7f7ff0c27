"""The contract between the applier and the stores it writes to (targets).

The applier (:mod:`patchsync.apply.applier`) owns every rule of units, chains, counts and
checkpoints; a target only stores, and answers a few questions. This module is that
contract; a new target (a SPARQL store, say) is written against it alone.

**What every target does** (:class:`Target`). It decodes nothing: ``adapter`` gives the
term values the applier hands it (N-Triples text for most). For each unit of atomicity
(docs/design.md §2) the applier calls, in this order and from one thread::

    begin()  (add(quads) | delete(quads) | add_prefix(...) | delete_prefix(...))*  commit(source, checkpoint, records)
    begin()  ...  rollback()

A :class:`Quad` is ``(s, p, o, g)`` in the adapter's terms, ``g`` ``None`` or ``""`` for
the default graph (a target takes both as it). ``add``/``delete`` take a batch of quads and return how many changed the
store (set semantics: an add of a present quad or a delete of an absent one is a no-op,
docs/design.md §5); one batch never holds a quad twice, and batches on one quad come in log
order. ``add_prefix``/``delete_prefix`` bind or unbind a prefix name (per graph, ``None``:
the default); a target that keeps no prefixes accepts and drops them. ``commit`` makes the
unit's rows, the source's :class:`Checkpoint` and the unit's :class:`PatchRecord` list (the
patches the unit ends, often none) one atomic step; ``rollback`` undoes everything since
``begin``. A unit may be empty: a ``begin``/``commit`` that only moves the checkpoint (a
patch end, a skipped patch). With commit groups (below) one target unit carries several
units of the log and the records of several patches; the target cannot tell, and need
not. ``flush`` makes every committed unit durable; ``close`` flushes and releases the
target. A target also has ``adapter`` (the :class:`~patchsync.terms.TermAdapter` it wants
events decoded with) and the class attribute ``capabilities`` (below).

**Errors.** A failure a user can cause or fix is a :class:`~patchsync.errors.PatchsyncError`
naming the store (:class:`~patchsync.errors.TargetUnavailable` for one out of reach); any
other exception is reported by the applier as the target failing at the source's byte
offset. After an error the applier calls ``rollback`` (if a unit is open) and ``flush``,
both best effort, and the caller closes the target (``discard`` where declared).

**When the checkpoint is written.** With every ``commit``, never alone: the checkpoint
names the last event of the unit committed, so after a crash the store and the checkpoint
agree and the applier resumes exactly after it (exactly once, docs/design.md §3). A
target may keep several committed units in one storage transaction for throughput, as
long as the checkpoint it stores with them is the last unit's and nothing of a later
unit is in it: a crash then loses a suffix of whole units, never half of one.

**What the applier reads.** ``checkpoint(source)`` once when it is built (a target that
admits one applier per source takes the source's lock there and raises
:class:`~patchsync.errors.SourceBusy` while another holds it); ``head()`` and
``has_patch(id)`` to check chains (docs/design.md §4). Under the strict policy the applier
reads ``head()`` again right after ``begin``: a target written by several processes must
make ``begin`` take what keeps its head and patch ids from changing until the commit
(the SQL target's write lock), or appliers may apply a patch twice.

**Optional abilities.** A target declares the ones it has by name in its class attribute
``capabilities`` (the ``CAN_*`` names below, rdflib's ``Store`` flags are the model); each
adds the methods of one typed protocol. :func:`abilities_of` checks them ONCE, when an
applier (or ``load_base``) takes the target: a declared ability whose methods are missing
is refused there (:class:`~patchsync.errors.UsageError`), and callers then hold typed views
of the target (:class:`Abilities`) instead of probing attributes:

=================  ===========================  ===============================================
capability         protocol                     what the applier does with it
=================  ===========================  ===============================================
``contains``       :class:`Presence`            one lookup for quads a unit touches twice
``last_writes``    :class:`LastWrites`          announces a unit's last writes (no savepoint)
``write_each``     :class:`WritesEach`          a group's quads touched once: written with no
                                                lookup, the write tells which changed
``write_later``    :class:`WritesLater`         a full group's adds left running while the
                                                next group is decoded (decision 0018)
``write_prefixes`` :class:`PrefixBatches`       a group's prefix rows in one call
``bulk_load``      :class:`BulkLoad`            ``load_base`` into an empty target
``discard``        :class:`Discardable`         closing after a failure without committing
``dump``           :class:`DumpableTarget`      ``patchsync dump``/``status`` read it back
``namespaces``     (none)                       prefix rows are stored, not dropped
``history``        ``history(source=None)``     ``patchsync history`` lists patch records
=================  ===========================  ===============================================

With both ``contains`` and ``last_writes`` (:class:`GroupTarget`) the applier holds complete
units back in commit groups and writes each group as one target unit, its rows right
before its commit (:mod:`patchsync.apply.group`). A target with none of them is complete:
units are then written one at a time, each at its commit. The abilities change only
speed, never what the store holds or the counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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


# -- optional abilities: one protocol each (see the module docstring) ---------------------


@runtime_checkable
class Presence(Protocol):
    """``contains``: presence in bulk."""

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is in the store, in order (inside the open unit: its writes count)."""
        ...


@runtime_checkable
class LastWrites(Protocol):
    """``last_writes``: the open unit's remaining writes end with its commit."""

    def last_writes(self) -> None:
        """The writes from now on are the open unit's last: ``commit`` follows them, so no
        ``rollback`` of this unit alone can come after them (the target need set no
        savepoint; a failure still rolls back, and may take the whole storage transaction)."""
        ...


@runtime_checkable
class WritesEach(Protocol):
    """``write_each``: writes that tell, quad by quad, whether they changed the store."""

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        """``add``, telling whether each quad was added (it was absent)."""
        ...

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        """``delete``, telling whether each quad was deleted (it was present)."""
        ...


@runtime_checkable
class WritesLater(Protocol):
    """``write_later``: ``add_each`` that may leave the write running (decision 0018)."""

    def add_each_later(self, quads: Sequence[Quad]) -> Callable[[], list[bool]]:
        """Start ``add_each``; the function returned waits for it and answers as it would.

        Until it is called the applier makes no other call on the target but ones that
        wait for the write themselves (every call of the SQL target does)."""
        ...


@runtime_checkable
class PrefixBatches(Protocol):
    """``write_prefixes``: the prefix rows of several units at once."""

    def write_prefixes(self, ops: Sequence[PrefixOp]) -> None:
        """Store what the prefix rows ``ops`` (in log order) leave, as ``add_prefix`` and
        ``delete_prefix`` one row at a time would."""
        ...


@runtime_checkable
class BulkLoad(Protocol):
    """``bulk_load``: an empty target about to receive many quads in one unit."""

    def defer_indexes(self) -> bool:
        """In an open unit of an empty target: leave out the indexes that only serve readers
        until the unit commits, and build them then (each with one sort). The unit stays
        one atomic change. Returns whether any index was deferred."""
        ...


@runtime_checkable
class Discardable(Protocol):
    """``discard``: closing after a failure without committing pending units."""

    def discard(self) -> None:
        """Release the target, dropping every unit not yet durable."""
        ...


#: The protocol each capability adds (capabilities without methods of their own are absent).
PROTOCOLS: dict[str, type] = {
    CAN_CONTAINS: Presence,
    CAN_LAST_WRITES: LastWrites,
    CAN_WRITE_EACH: WritesEach,
    CAN_WRITE_LATER: WritesLater,
    CAN_WRITE_PREFIXES: PrefixBatches,
    CAN_BULK_LOAD: BulkLoad,
    CAN_DISCARD: Discardable,
}


class GroupTarget(Target, Presence, LastWrites, Protocol):
    """A target that takes commit groups (:mod:`patchsync.apply.group`): ``contains`` and ``last_writes``."""


class Abilities:
    """Typed views of one target's declared abilities, each ``None`` where it is not declared.

    Made once by :func:`abilities_of`; ``group`` is the target itself where it takes commit
    groups (``contains`` and ``last_writes``), and ``writes_later`` is given only with
    ``writes_each`` (a write left running answers as ``add_each``). A plain class: a
    dataclass's generated methods cost every command's start-up more than they save here.
    """

    __slots__ = (
        "bulk_load",
        "discardable",
        "group",
        "last_writes",
        "prefix_batches",
        "presence",
        "writes_each",
        "writes_later",
    )

    def __init__(
        self,
        *,
        presence: Presence | None = None,
        last_writes: LastWrites | None = None,
        group: GroupTarget | None = None,
        writes_each: WritesEach | None = None,
        writes_later: WritesLater | None = None,
        prefix_batches: PrefixBatches | None = None,
        bulk_load: BulkLoad | None = None,
        discardable: Discardable | None = None,
    ) -> None:
        self.presence = presence
        self.last_writes = last_writes
        self.group = group
        self.writes_each = writes_each
        self.writes_later = writes_later
        self.prefix_batches = prefix_batches
        self.bulk_load = bulk_load
        self.discardable = discardable


def abilities_of(target: object) -> Abilities:
    """The typed views of ``target``'s declared abilities, checked here once (module docstring).

    Raises :class:`UsageError` naming the target's class, the capability and the methods
    missing when a declared ability lacks a method of its protocol.
    """
    declared = capabilities_of(target)
    for name in sorted(declared & PROTOCOLS.keys()):
        protocol = PROTOCOLS[name]
        if not isinstance(target, protocol):
            missing = [m for m in _methods(protocol) if not callable(getattr(target, m, None))]
            raise UsageError(
                f"{type(target).__name__} targets declare the {name!r} capability but lack "
                f"{', '.join(m + '()' for m in missing)}: see patchsync.apply.target"
            )
    # Checked just above: each view is the target itself, typed as the protocol it satisfies.
    presence = cast(Presence, target) if CAN_CONTAINS in declared else None
    last = cast(LastWrites, target) if CAN_LAST_WRITES in declared else None
    each = cast(WritesEach, target) if CAN_WRITE_EACH in declared else None
    return Abilities(
        presence=presence,
        last_writes=last,
        group=cast(GroupTarget, target) if presence is not None and last is not None else None,
        writes_each=each,
        writes_later=cast(WritesLater, target) if each is not None and CAN_WRITE_LATER in declared else None,
        prefix_batches=cast(PrefixBatches, target) if CAN_WRITE_PREFIXES in declared else None,
        bulk_load=cast(BulkLoad, target) if CAN_BULK_LOAD in declared else None,
        discardable=cast(Discardable, target) if CAN_DISCARD in declared else None,
    )


def _methods(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")]


def discard_target(target: Target) -> None:
    """Close ``target`` after a failure: without committing where it declares ``discard``."""
    discardable = abilities_of(target).discardable
    if discardable is not None:
        discardable.discard()
    else:
        target.close()


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
