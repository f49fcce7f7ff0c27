"""``oxigraph:DIR`` targets: a persistent, SPARQL-queryable pyoxigraph store.

Atomicity. pyoxigraph writes a batch of additions atomically (``Store.extend``) but has no
transaction that mixes removals and additions without going through SPARQL text, and
SPARQL ``INSERT DATA`` cannot name an existing blank node (RDF Patch labels are system
identifiers). So a unit is buffered as its net effect per quad and committed as:

* additions only (the common case): one ``extend`` holding the data and the checkpoint;
* with removals: a redo journal (``DIR.journal``, written and renamed atomically) holding
  the unit's removals, additions and checkpoint, then the removals, then one ``extend``,
  then the journal is deleted. Opening the store finds a leftover journal and redoes it,
  which is safe because adding and removing are set operations.

Checkpoints and patch records are quads in the named graph ``<urn:patchsync:meta>``:
written with the unit's data, never updated in place (each carries a sequence number, the
highest wins), older checkpoints pruned on flush. ``dump`` leaves that graph out.

Writers. RocksDB locks the store directory for as long as a store object has it open, across
processes and within one (a second open fails, as :class:`~patchsync.errors.TargetHeld`:
``apply`` waits for it), so this object is the store's only writer: ``head`` and ``has_patch``, answered from the metadata it loaded
and keeps up to date, always reflect every committed patch, and ``begin`` needs no lock of its
own to meet the target contract (docs/design.md §3, exactly once across processes).

RDF-star: pyoxigraph follows RDF 1.2, where a triple term may only be an object; a quoted
triple in subject position fails with :class:`ApplyError`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from patchsync._lazy import optional_dependency
from patchsync.apply.target import CAN_DUMP, Checkpoint, PatchRecord, Quad, SourceStatus
from patchsync.errors import (
    DISK_FULL,
    READ_ONLY,
    ApplyError,
    EncodeError,
    ErrorRule,
    ErrorTable,
    TargetHeld,
    UsageError,
    errno_in,
)
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, Unpacked
from patchsync.terms.ntriples import format_term

META = "urn:patchsync:meta"
_CHECKPOINT = "urn:patchsync:checkpoint"
_RECORD = "urn:patchsync:record"


# What a store that a retry cannot fix says (RocksDB often reports the errno only in text).
_FULL_OR_READ_ONLY_TEXT = ("No space left", "Read-only file system", "Permission denied", "Disk quota")


def _text_has(*needles: str) -> Any:
    return lambda exc: any(n in str(exc) for n in needles)


#: pyoxigraph errors translated, most specific first: a disk that is full or read-only is
#: not transient; another process holding the store's RocksDB ``LOCK`` file is (it may
#: exit, as a SQLite writer may commit); every other error is an ``ApplyError``.
ERRORS = ErrorTable(
    (
        ErrorRule("disk full / read-only (errno)", (OSError,), ApplyError, errno_in(DISK_FULL | READ_ONLY)),
        ErrorRule("disk full / read-only (message)", (OSError,), ApplyError, _text_has(*_FULL_OR_READ_ONLY_TEXT)),
        ErrorRule("store locked by another process", (OSError,), TargetHeld, _text_has("/LOCK:", "lock hold")),
        ErrorRule("any other I/O error", (OSError,), ApplyError),
        ErrorRule("malformed data (journal, terms)", (ValueError, TypeError, SyntaxError), ApplyError),
    ),
    chain=False,
)


def _ox() -> Any:
    with optional_dependency("an oxigraph: target"):
        import pyoxigraph
    return pyoxigraph


class OxigraphTerms:
    """A term adapter building pyoxigraph terms directly (no conversion pass on apply)."""

    def __init__(self) -> None:
        ox = _ox()
        self._ox = ox
        self._default = ox.DefaultGraph()
        self._datatypes: dict[str, Any] = {}

    def iri(self, value: str) -> Any:
        return self._ox.NamedNode(value)

    def bnode(self, label: str) -> Any:
        return self._ox.BlankNode(label)

    def literal(self, lex: str, lang: str | None = None, datatype: str | None = None) -> Any:
        if lang:
            return self._ox.Literal(lex, language=lang)
        if datatype is None:
            return self._ox.Literal(lex)
        dt = self._datatypes.get(datatype)
        if dt is None:
            dt = self._datatypes[datatype] = self._ox.NamedNode(datatype)
        return self._ox.Literal(lex, datatype=dt)

    def triple(self, s: Any, p: Any, o: Any) -> Any:
        try:
            return self._ox.Triple(s, p, o)
        except (TypeError, ValueError) as exc:
            raise EncodeError(
                f"oxigraph cannot hold this quoted triple (RDF 1.2 allows triple terms only as objects): {exc}"
            ) from exc

    def default_graph(self) -> Any:
        return self._default

    def unpack(self, term: Any) -> Unpacked:
        ox = self._ox
        if isinstance(term, ox.NamedNode):
            return (IRI, term.value)
        if isinstance(term, ox.BlankNode):
            return (BNODE, term.value)
        if isinstance(term, ox.Literal):
            lang = term.language
            dt = term.datatype.value
            if lang:
                return (LITERAL, term.value, lang, None)
            return (LITERAL, term.value, None, None if dt == "http://www.w3.org/2001/XMLSchema#string" else dt)
        if isinstance(term, ox.Triple):
            return (TRIPLE, term.subject, term.predicate, term.object)
        if isinstance(term, ox.DefaultGraph):
            return (DEFAULT_GRAPH,)
        raise EncodeError(f"not a pyoxigraph term: {term!r}")


class OxigraphTarget:
    """A pyoxigraph store in directory ``path`` (created if missing) as an apply target.

    Every method that touches the store raises pyoxigraph's errors as patchsync errors
    (:data:`ERRORS`).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({CAN_DUMP})

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.fspath(path):
            raise UsageError("oxigraph: names no directory: use oxigraph:DIR")
        ox = _ox()
        self._ox = ox
        self.adapter = OxigraphTerms()
        self.path = Path(path)
        self.journal = self.path.with_name(self.path.name + ".journal")
        self.store: Any = None
        with self._guard("cannot open the oxigraph store"):
            self.store = ox.Store(str(self.path))
        self._meta = ox.NamedNode(META)
        self._cp_pred = ox.NamedNode(_CHECKPOINT)
        self._rec_pred = ox.NamedNode(_RECORD)
        self._default = ox.DefaultGraph()
        self._pending: dict[Any, bool] | None = None
        self._stale: list[Any] = []
        try:
            with self._guard("cannot read the oxigraph store"):
                self._load_meta()
                if self.journal.exists():
                    self._redo()
        except BaseException:
            self.store = None  # releases RocksDB's lock on the directory
            raise

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            raise ERRORS.translate(exc, f"{self.path}: {what}") from exc

    # -- meta --------------------------------------------------------------------------

    def _load_meta(self) -> None:
        self.checkpoints: dict[str, tuple[int, Checkpoint, Any]] = {}
        self._records: list[tuple[int, PatchRecord]] = []
        self._ids: set[str] = set()
        self._seq = 0
        for quad in self.store.quads_for_pattern(None, None, None, self._meta):
            data = json.loads(quad.object.value)
            seq = int(data.pop("seq"))
            self._seq = max(self._seq, seq)
            if quad.predicate == self._cp_pred:
                source = data.pop("source")
                cp = Checkpoint(**data)
                old = self.checkpoints.get(source)
                if old is None or old[0] < seq:
                    if old is not None:
                        self._stale.append(old[2])
                    self.checkpoints[source] = (seq, cp, quad)
                else:
                    self._stale.append(quad)
            elif quad.predicate == self._rec_pred:
                data["headers"] = tuple(tuple(h) for h in data["headers"])
                record = PatchRecord(**data)
                self._records.append((seq, record))
                if record.patch_id is not None:
                    self._ids.add(record.patch_id)
        self._records.sort(key=lambda r: r[0])

    def _meta_quad(self, pred: Any, data: dict[str, Any]) -> Any:
        self._seq += 1
        data["seq"] = self._seq
        ox = self._ox
        return ox.Quad(
            ox.BlankNode(f"ps{self._seq}"), pred, ox.Literal(json.dumps(data, ensure_ascii=False)), self._meta
        )

    # -- reads -------------------------------------------------------------------------

    def checkpoint(self, source: str) -> Checkpoint | None:
        entry = self.checkpoints.get(source)
        return None if entry is None else entry[1]

    def head(self) -> str | None:
        for _seq, record in reversed(self._records):
            if record.patch_id is not None:
                return record.patch_id
        return None

    def has_patch(self, patch_id: str) -> bool:
        return patch_id in self._ids

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        a = self.adapter
        with self._guard("reading the oxigraph store failed"):
            for q in self.store:
                g = q.graph_name
                if g == self._meta:
                    continue
                gtext = "" if isinstance(g, self._ox.DefaultGraph) else format_term(a, g)
                yield (format_term(a, q.subject), format_term(a, q.predicate), format_term(a, q.object), gtext)

    def namespaces(self) -> dict[tuple[str, str], str]:
        # Oxigraph stores no prefixes; PA/PD are accepted and have no effect on it.
        return {}

    def sources(self) -> list[SourceStatus]:
        return [SourceStatus(name, entry[1]) for name, entry in sorted(self.checkpoints.items())]

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        self._pending = {}

    def _quad(self, s: Any, p: Any, o: Any, g: Any) -> Any:
        try:
            return self._ox.Quad(s, p, o, self._default if g is None else g)
        except TypeError as exc:
            raise ApplyError(
                "oxigraph cannot hold this statement (RDF 1.2: a triple term may only be an object)"
            ) from exc

    def _change(self, quads: Sequence[Quad], present: bool) -> int:
        pending = self._pending
        assert pending is not None, "change outside a unit"
        store = self.store
        changed = 0
        for s, p, o, g in quads:
            quad = self._quad(s, p, o, g)
            now = pending.get(quad)
            if now is None:
                now = quad in store
            if now != present:
                changed += 1
            pending[quad] = present
        return changed

    def add(self, quads: Sequence[Quad]) -> int:
        with self._guard("reading the oxigraph store failed"):
            return self._change(quads, True)

    def delete(self, quads: Sequence[Quad]) -> int:
        with self._guard("reading the oxigraph store failed"):
            return self._change(quads, False)

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        pass

    def delete_prefix(self, graph: Any, name: str) -> None:
        pass

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        pending = self._pending or {}
        self._pending = None
        adds = [q for q, present in pending.items() if present]
        removes = [q for q, present in pending.items() if not present]
        cp_data = {name: getattr(checkpoint, name) for name in checkpoint.__slots__}
        cp_data["source"] = source
        meta = [self._meta_quad(self._cp_pred, cp_data)]
        new_records = []
        for record in records:
            data = {name: getattr(record, name) for name in record.__slots__}
            meta.append(self._meta_quad(self._rec_pred, data))
            new_records.append((self._seq, record))
        with self._guard("oxigraph write failed"):
            if removes:
                self._write_journal(removes, adds + meta)
                self._apply(removes, adds + meta)
                self.journal.unlink()
            else:
                self.store.extend(adds + meta)
        old = self.checkpoints.get(source)
        if old is not None:
            self._stale.append(old[2])
        self.checkpoints[source] = (self._seq - len(records), checkpoint, meta[0])
        for seq, record in new_records:
            self._records.append((seq, record))
            if record.patch_id is not None:
                self._ids.add(record.patch_id)

    def _apply(self, removes: list[Any], adds: list[Any]) -> None:
        for quad in removes:
            self.store.remove(quad)
        self.store.extend(adds)

    def _write_journal(self, removes: list[Any], adds: list[Any]) -> None:
        nq = self._ox.RdfFormat.N_QUADS
        body = json.dumps(
            {
                "remove": self._ox.serialize(removes, format=nq).decode("utf-8"),
                "add": self._ox.serialize(adds, format=nq).decode("utf-8"),
            }
        )
        fd, tmp = tempfile.mkstemp(prefix=f".{self.journal.name}.", dir=self.journal.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.journal)

    def _redo(self) -> None:
        nq = self._ox.RdfFormat.N_QUADS
        body = json.loads(self.journal.read_text(encoding="utf-8"))
        removes = list(self._ox.parse(body["remove"].encode("utf-8"), format=nq))
        adds = list(self._ox.parse(body["add"].encode("utf-8"), format=nq))
        self._apply(removes, adds)
        self.store.flush()
        self.journal.unlink()
        self._load_meta()

    def rollback(self) -> None:
        self._pending = None

    def flush(self) -> None:
        with self._guard("oxigraph flush failed"):
            for quad in self._stale:
                self.store.remove(quad)
            self._stale = []
            self.store.flush()

    def close(self) -> None:
        """Flush and release the store (RocksDB allows one open store per directory)."""
        if self.store is None:
            return
        try:
            self.flush()
        finally:
            self.store = None
