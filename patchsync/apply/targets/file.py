"""``file:PATH`` targets: an RDF file rewritten atomically, with its checkpoint in a sidecar.

The dataset is held as N-Triples strings, as in :class:`~patchsync.apply.targets.memory.MemoryTarget`
(which this target extends): the decoder's strings are stored as they come, and the file is
written from them on ``flush`` (end of an apply) as a temporary file renamed into place, then
the sidecar ``PATH.patchsync.json`` (checkpoints, patch history and prefixes) likewise
(docs/design.md §3). A crash between the two renames leaves new data with an old checkpoint:
the next run replays a suffix of the log, which set semantics make harmless.

The sidecar is read on open; the data file only when the data is first needed (a unit
begins, or the quads or prefixes are read), so ``patchsync status`` reads the sidecar alone.

Other processes may write the same file (two ``apply`` runs, a ``tail`` daemon and an
``apply``): every write takes an exclusive ``flock`` on ``PATH.lock`` beside the data, from
the first ``begin`` until the committed units are written by ``flush`` (or, when none
were committed, until ``rollback``). Each write stores a new random generation in the lock
file; a target taking the lock compares it, and the identity (inode, size, mtime) of the
data and sidecar files, with what it loaded, and reads both again if anything differs.
So after ``begin`` the quads, checkpoints, history (the applied patch ids) and ``head``
are what every process committed, and no writer overwrites another's units
(docs/design.md §3, "file targets and other processes").

Blank node labels are the system identifiers RDF Patch names nodes by (docs/design.md §1, "blank
node labels"), so every file is read keeping them as written: files this target wrote by
its own line reader, other files by :mod:`patchsync.logs.rdf_labels` (rdflib's parsers
would rename blank nodes per document, and every patch row naming one would miss). It
writes ``.nq``/``.nt`` as N-Quads/N-Triples and ``.trig``/``.ttl`` in a line-per-triple
subset of TriG/Turtle (prefixes, then one triple per line, named graphs as blocks), blank
nodes as ``_:label``, everything sorted so the same state gives the same bytes.

Prefixes are one table for the whole file, as TriG writes them and as this target kept them
when it was built on rdflib: a name has one IRI and an IRI one name, so binding a name to
an IRI that another name holds moves the IRI (docs/design.md §5). RDF-star quoted triples are
refused (the formats written here have no syntax for them), as are named graphs in
``.ttl``/``.nt`` files.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.apply.registry import require_directory
from patchsync.apply.target import Checkpoint, PatchRecord, Quad
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.errors import (
    DISK_FULL,
    READ_ONLY,
    ApplyError,
    ErrorRule,
    ErrorTable,
    FormatError,
    PatchsyncError,
    errno_in,
)
from patchsync.logs.patch_logs import exclusive_lock
from patchsync.terms.ntriples import TermSyntaxError, format_iri, scan_term, skip_ws

FILE_FORMATS = {
    suffix: f.rdflib_name for f in formats.with_role(formats.FILE_TARGET) if f.rdflib_name for suffix in f.suffixes
}
SIDECAR_SUFFIX = ".patchsync.json"
#: The lock file beside the data: its ``flock`` serialises writers, its text is the generation.
LOCK_SUFFIX = ".lock"
#: Suffixes of the files that hold named graphs; the others hold the default graph only.
DATASET_SUFFIXES = (".trig", ".nq")


class FileTarget(MemoryTarget):
    """An RDF file (``.trig``, ``.nq``, ``.ttl``, ``.nt``) as an apply target."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in FILE_FORMATS:
            raise FormatError(f"{self.path}: file targets are {', '.join(FILE_FORMATS)} files")
        # Found here, not at the first unit's lock, where it would read as the log's fault.
        require_directory(self.path)
        self.suffix = suffix
        self.is_dataset = suffix in DATASET_SUFFIXES
        self.sidecar = self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        self.lock_path = self.path.with_name(self.path.name + LOCK_SUFFIX)
        self._dirty = False
        self._loaded = False
        #: The prefix table before the open unit's first prefix row (``None``: untouched).
        self._saved_prefixes: dict[tuple[str, str], str] | None = None
        self._own = False
        self._lock_fd: int | None = None
        self._in_unit = False
        #: What was loaded: the generation, the sidecar's and the data file's identity.
        self._stamp: tuple[bytes, Identity, Identity] | None = None
        self._load_sidecar()

    # -- load --------------------------------------------------------------------------

    def _load_sidecar(self) -> None:
        # The generation is read before the files: a write between the two reads shows
        # as a changed generation under the lock, and the target then loads again.
        generation = _read_generation(self.lock_path)
        sidecar_id = _identity(self.sidecar)
        try:
            self._read_sidecar()
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise file_error(exc, self.sidecar, "cannot read the target's sidecar") from exc
        self._stamp = (generation, sidecar_id, None)

    def _read_sidecar(self) -> None:
        if not self.sidecar.exists():
            return
        side: dict[str, Any] = json.loads(self.sidecar.read_text(encoding="utf-8"))
        # A sidecar means this target wrote the file: its own line reader reads it back.
        self._own = bool(side)
        for name, cp in side.get("checkpoints", {}).items():
            self.checkpoints[name] = Checkpoint(**cp)
        for rec in side.get("history", []):
            rec["headers"] = tuple(tuple(h) for h in rec["headers"])
            record = PatchRecord(**rec)
            self.history.append(record)
            if record.patch_id is not None:
                self._ids.add(record.patch_id)
        # N-Quads and N-Triples have no prefix syntax: the bindings live here (for all four
        # formats; a TriG file's own @prefix lines repeat them).
        for name, iri in side.get("prefixes", {}).items():
            self._bind(name, format_iri(iri))

    def _data(self) -> None:
        """Read the data file, once, when the data is first needed."""
        if self._loaded:
            return
        if self._stamp is not None:
            self._stamp = (self._stamp[0], self._stamp[1], _identity(self.path))
        if self.path.exists():
            try:
                if self._own:
                    self._read_own()
                else:
                    self._read_foreign()
            except (OSError, ValueError, TermSyntaxError) as exc:
                # Stay unloaded: every later use fails the same way, and nothing can be
                # committed (and written over the file) on top of a partial read.
                self.data.clear()
                raise file_error(exc, self.path, "cannot read the target") from exc
        self._loaded = True

    def _read_foreign(self) -> None:
        # rdflib loads only here, for a file this target did not write.
        from patchsync.logs.rdf_labels import read_labelled
        from patchsync.terms.ntriples import format_term
        from patchsync.terms.rdflib_adapter import RdflibTerms

        found = read_labelled(self.path, FILE_FORMATS[self.suffix])
        rd: Any = RdflibTerms()
        for name, iri in found.prefixes.items():
            # Kept as bindings of the target so they are written back with the data.
            self._bind(name, format_term(rd, iri))
        data = self.data
        for s, p, o, g in found.quads:
            data.add((format_term(rd, s), format_term(rd, p), format_term(rd, o), format_term(rd, g) if g else ""))

    def _read_own(self) -> None:
        terms = self.adapter
        data = self.data
        graph = ""
        for number, raw in enumerate(self.path.read_text(encoding="utf-8").split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@prefix"):
                continue  # the sidecar holds the same table, and is what counts
            if line == "}":
                graph = ""
                continue
            parts = []
            pos = 0
            try:
                if line.endswith("{"):
                    graph, _ = scan_term(line, 0, terms)
                    continue
                while pos < len(line) and line[pos] != ".":
                    term, pos = scan_term(line, pos, terms)
                    parts.append(term)
                    pos = skip_ws(line, pos)
            except TermSyntaxError as exc:
                column = exc.pos + 1 + len(raw) - len(raw.lstrip())
                raise ValueError(f"line {number}, column {column}: {exc.message}") from None
            if len(parts) not in (3, 4):
                raise ValueError(f"line {number}: expected a triple or quad")
            g = parts[3] if len(parts) == 4 else graph
            if g and not self.is_dataset:
                raise ValueError(f"line {number}: a {self.suffix} file holds one graph, and this line names {g}")
            data.add((parts[0], parts[1], parts[2], g))

    # -- reads -------------------------------------------------------------------------

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        self._data()
        return super().quads()

    def namespaces(self) -> dict[tuple[str, str], str]:
        self._data()
        return super().namespaces()

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        self._data()
        return super().contains(quads)

    # -- unit --------------------------------------------------------------------------

    def begin(self) -> None:
        self._lock()
        self._data()
        super().begin()
        self._in_unit = True
        self._saved_prefixes = None

    def _lock(self) -> None:
        """Hold the file's lock, with the data and sidecar as every process left them."""
        if self._lock_fd is not None:
            return
        try:
            self._lock_fd = exclusive_lock(self.lock_path)
            current = (
                _read_generation(self.lock_path),
                _identity(self.sidecar),
                _identity(self.path) if self._loaded else None,
            )
        except OSError as exc:
            self._unlock()
            raise file_error(exc, self.lock_path, "cannot lock the target") from exc
        if current != self._stamp:
            try:
                self._reload()
            except BaseException:
                self._unlock()
                raise

    def _reload(self) -> None:
        """Forget what was loaded and read the sidecar (and later the data) again."""
        self.data = set()
        self.prefixes = {}
        self._init_ledger()
        self._own = False
        self._loaded = False
        self._dirty = False
        self._stamp = None
        self._load_sidecar()

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor of the open file releases the flock

    def _check(self, quads: Sequence[Quad]) -> None:
        """Refuse what the file cannot hold before any of the batch is stored."""
        dataset = self.is_dataset
        for s, p, o, g in quads:
            if s.startswith("<<") or o.startswith("<<") or p.startswith("<<") or (g and g.startswith("<<")):
                raise ApplyError("file targets cannot hold RDF-star quoted triples; use a SQL or oxigraph target")
            if g and not dataset:
                raise ApplyError(f"a quad names the graph {g} but the {self.suffix} file target holds a single graph")

    def add(self, quads: Sequence[Quad]) -> int:
        self._check(quads)
        return super().add(quads)

    def delete(self, quads: Sequence[Quad]) -> int:
        self._check(quads)
        return super().delete(quads)

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        self._save_prefixes()
        self._bind(name, iri)

    def delete_prefix(self, graph: Any, name: str) -> None:
        self._save_prefixes()
        self.prefixes.pop(("", name), None)

    def _save_prefixes(self) -> None:
        # A copy of the whole (small) table: binding one name may unbind another, and
        # rollback must bring both back.
        if self._saved_prefixes is None:
            self._saved_prefixes = dict(self.prefixes)

    def _bind(self, name: str, iri: str) -> None:
        """Bind ``name`` to ``iri`` file-wide, unbinding any other name of ``iri``."""
        prefixes = self.prefixes
        for key in [key for key, bound in prefixes.items() if bound == iri and key[1] != name]:
            del prefixes[key]
        prefixes[("", name)] = iri

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        super().commit(source, checkpoint, records)
        self._saved_prefixes = None
        self._dirty = True
        self._in_unit = False

    def rollback(self) -> None:
        super().rollback()
        if self._saved_prefixes is not None:
            self.prefixes = self._saved_prefixes
        self._saved_prefixes = None
        self._in_unit = False
        if not self._dirty:
            self._unlock()  # nothing of this process waits to be written

    # -- write -------------------------------------------------------------------------

    def flush(self) -> None:
        if self._dirty:
            self._write()
        if not self._in_unit:
            self._unlock()

    def _write(self) -> None:
        # Committed units exist only after a begin, which took the lock; it is kept until
        # they are written (a failed write keeps it, so a retry still writes under it).
        assert self._lock_fd is not None, "committed units without the target's lock"
        try:
            _write_atomically(self.path, self._lines())
            side = {
                "version": 1,
                "file": self.path.name,
                "prefixes": {name: iri[1:-1] for (_g, name), iri in sorted(self.prefixes.items())},
                "checkpoints": {name: _asdict(cp) for name, cp in self.checkpoints.items()},
                "history": [_asdict(r) for r in self.history],
            }
            _write_atomically(self.sidecar, [json.dumps(side, indent=1, ensure_ascii=False), "\n"])
            generation = secrets.token_hex(16).encode("ascii")
            os.ftruncate(self._lock_fd, 0)
            os.pwrite(self._lock_fd, generation, 0)
        except OSError as exc:
            raise file_error(exc, self.path, "cannot write the target") from exc
        self._stamp = (generation, _identity(self.sidecar), _identity(self.path))
        self._dirty = False

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._unlock()

    def _lines(self) -> Iterator[str]:
        """The file's text: prefixes (TriG, Turtle), then the quads by graph, subject, predicate, object."""
        nquads = self.suffix in (".nq", ".nt")
        if not nquads:
            for (_g, prefix), iri in sorted(self.prefixes.items()):
                yield f"@prefix {prefix}: {iri} .\n"
        ordered = sorted(self.data, key=_graph_first)
        if nquads:
            for s, p, o, g in ordered:
                yield f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n"
            return
        by_graph: dict[str, list[str]] = defaultdict(list)
        for s, p, o, g in ordered:
            by_graph[g].append(f"{s} {p} {o} .\n")
        for g, triples in sorted(by_graph.items()):
            if g:
                yield f"{g} {{\n"
                yield from ("  " + t for t in triples)
                yield "}\n"
            else:
                yield from triples


#: A file's identity: inode, size and modification time (``None``: no such file). Every
#: write replaces the file by a rename, so a write by another process changes it.
Identity = tuple[int, int, int] | None


def _identity(path: Path) -> Identity:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _read_generation(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except FileNotFoundError:
        return b""


def _graph_first(q: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
    return (q[3], q[0], q[1], q[2])


def _asdict(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _write_atomically(path: Path, chunks: Any) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


#: How file-system errors translate, most specific first. No file error is transient: a
#: full disk or a read-only file system stays so until someone acts, and a retry loop
#: would only hide it.
FILE_ERRORS = ErrorTable(
    (
        ErrorRule("disk full", (OSError,), ApplyError, errno_in(DISK_FULL)),
        ErrorRule("read-only", (OSError,), ApplyError, errno_in(READ_ONLY)),
        ErrorRule("any other error", (OSError, ValueError, TermSyntaxError), ApplyError),
    )
)


def file_error(exc: Exception, path: Path, what: str) -> PatchsyncError:
    """``exc`` from reading or writing ``path`` as a patchsync error naming the path."""
    return FILE_ERRORS.translate(exc, f"{path}: {what}")


__all__ = ["FILE_ERRORS", "FILE_FORMATS", "LOCK_SUFFIX", "FileTarget", "file_error", "format_iri"]
