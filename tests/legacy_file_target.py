"""The ``file:`` target as it was before issue #14 (on rdflib's Memory store), kept as the
oracle of ``test_file_target_differential``: the new target must write the same bytes.

Copied unchanged from ``patchsync/apply/targets/file.py`` at 8704e58 except for the class
name and its imports; it is not part of the package.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rdflib import Dataset, Graph, URIRef

from patchsync.apply.target import Checkpoint, PatchRecord
from patchsync.apply.targets.file import FILE_FORMATS, SIDECAR_SUFFIX, file_error
from patchsync.apply.targets.rdflib_store import RdflibTarget
from patchsync.errors import FormatError
from patchsync.logs.rdf_labels import read_labelled
from patchsync.terms.ntriples import TermSyntaxError, scan_term, skip_ws


class LegacyFileTarget(RdflibTarget):
    """An RDF file (``.trig``, ``.nq``, ``.ttl``, ``.nt``) as an apply target."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in FILE_FORMATS:
            raise FormatError(f"{self.path}: file targets are {', '.join(FILE_FORMATS)} files")
        self.suffix = suffix
        self.sidecar = self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        graph: Graph = Dataset() if suffix in (".trig", ".nq") else Graph()
        super().__init__(graph)
        self._dirty = False
        try:
            self._load()
        except (OSError, ValueError, TermSyntaxError) as exc:
            raise file_error(exc, self.path, "cannot read the target") from exc

    # -- load --------------------------------------------------------------------------

    def _load(self) -> None:
        side: dict[str, Any] = {}
        if self.sidecar.exists():
            side = json.loads(self.sidecar.read_text(encoding="utf-8"))
            for name, cp in side.get("checkpoints", {}).items():
                self.checkpoints[name] = Checkpoint(**cp)
            for rec in side.get("history", []):
                rec["headers"] = tuple(tuple(h) for h in rec["headers"])
                record = PatchRecord(**rec)
                self.history.append(record)
                if record.patch_id is not None:
                    self._ids.add(record.patch_id)
            # N-Quads and N-Triples have no prefix syntax: the bindings live here too.
            for name, iri in side.get("prefixes", {}).items():
                self._bind(name, URIRef(iri))
                self._bound.add(name)
        if not self.path.exists():
            return
        if side:
            self._read_own()
        else:
            self._read_foreign()

    def _read_foreign(self) -> None:
        found = read_labelled(self.path, FILE_FORMATS[self.suffix])
        for name, iri in found.prefixes.items():
            # Kept as bindings of the target so they are written back with the data.
            self._bind(name, iri)
            self._bound.add(name)
        for s, p, o, g in found.quads:
            self.store.add((s, p, o), self._context(g))

    def _read_own(self) -> None:
        terms = self._terms
        graph: Any = None
        for number, raw in enumerate(self.path.read_text(encoding="utf-8").split("\n"), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("@prefix"):
                name, _, rest = line[len("@prefix") :].strip().partition(":")
                iri, _ = scan_term(rest.strip(), 0, terms)
                self._bind(name, iri)
                continue
            if line == "}":
                graph = None
                continue
            if line.endswith("{"):
                graph, _ = scan_term(line, 0, terms)
                continue
            parts = []
            pos = 0
            while pos < len(line) and line[pos] != ".":
                term, pos = scan_term(line, pos, terms)
                parts.append(term)
                pos = skip_ws(line, pos)
            if len(parts) not in (3, 4):
                raise ValueError(f"line {number}: expected a triple or quad")
            g = parts[3] if len(parts) == 4 else graph
            self.store.add((parts[0], parts[1], parts[2]), self._context(g))

    # -- write -------------------------------------------------------------------------

    def commit(self, source: str, checkpoint: Checkpoint, records: Any) -> None:
        super().commit(source, checkpoint, records)
        self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        try:
            _write_atomically(self.path, self._lines())
            side = {
                "version": 1,
                "file": self.path.name,
                "prefixes": {name: iri[1:-1] for (_g, name), iri in sorted(self.namespaces().items())},
                "checkpoints": {name: _asdict(cp) for name, cp in self.checkpoints.items()},
                "history": [_asdict(r) for r in self.history],
            }
            _write_atomically(self.sidecar, [json.dumps(side, indent=1, ensure_ascii=False), "\n"])
        except OSError as exc:
            raise file_error(exc, self.path, "cannot write the target") from exc
        self._dirty = False

    def _lines(self) -> Iterator[str]:
        nquads = self.suffix in (".nq", ".nt")
        if not nquads:
            for (_g, prefix), iri in sorted(self.namespaces().items()):
                yield f"@prefix {prefix}: {iri} .\n"
        by_graph: dict[str, list[str]] = defaultdict(list)
        for s, p, o, g in sorted(self.quads(), key=lambda q: (q[3], q[0], q[1], q[2])):
            if nquads:
                yield f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n"
            else:
                by_graph[g].append(f"{s} {p} {o} .\n")
        for g, triples in sorted(by_graph.items()):
            if g:
                yield f"{g} {{\n"
                yield from ("  " + t for t in triples)
                yield "}\n"
            else:
                yield from triples


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
