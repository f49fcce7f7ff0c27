"""Snapshot files: a target's state with its position, as a Jelly-RDF file (docs/design.md §10).

``patchsync snapshot --target T -o FILE.jelly`` writes every quad of the target as a
delimited Jelly-RDF QUADS stream, its default-graph namespaces as namespace rows, and its
*position* in the metadata of the first frame (``RdfStreamFrame.metadata``, field 15,
which Jelly readers treat as a comment): under the key :data:`POSITION_KEY`, UTF-8 JSON::

    {"format": 1,
     "head": "urn:patch:41",              # the last applied patch id (null: none)
     "sources": {SOURCE: {"offset": …, "frame": …, "row": …, "patches": …,
                          "last_id": …, "fingerprint": …}},   # the target's checkpoints
     "graph_namespaces": [[GRAPH, PREFIX, IRI], …],         # prefixes of named graphs
     "target": "sqlite:///…", "taken_at": 1700000000.0}

A stream source's checkpoint is its stream sequence (its ``offset``), a file source's the
frame offset and row after its last applied unit, exactly as the target stores them.

Consistency without a read transaction spanning every target: the position is read, the
quads are read, and the position is read again; a target commits a checkpoint with every
unit (docs/design.md §3), so an unchanged position means no unit was committed meanwhile
and the quads are the state at that position. A changed one retries (a few times).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from patchsync._proto import rdf_pb2
from patchsync.apply.target import Checkpoint, DumpableTarget, Target, dumpable
from patchsync.codec.framing import Framer, encode_varint, read_varint
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.errors import ApplyError, DecodeError, EncodeError, FormatError
from patchsync.events import RDF_VERSION, RDF_VERSION_1_0, PhysicalType, RdfOptions
from patchsync.logs.files import replaced_whole
from patchsync.terms.ntriples import NTriplesTerms

#: The first frame's metadata key holding the position (JSON, see the module docstring).
POSITION_KEY = "patchsync.position"
#: The version of the position's JSON layout.
POSITION_FORMAT = 1
#: How often :func:`write_snapshot` reads a target that keeps changing before giving up.
ATTEMPTS = 5

_NT = NTriplesTerms()
_CHECKPOINT_FIELDS = ("offset", "frame", "row", "patches", "last_id", "fingerprint")


@dataclass(frozen=True, slots=True)
class SnapshotPosition:
    """Where a target stood when its snapshot was taken."""

    #: The id of the last patch applied (the next patch's ``prev``).
    head: str | None
    #: The target's checkpoint of every source it applied.
    sources: Mapping[str, Checkpoint] = field(default_factory=dict)
    #: Namespaces of named graphs ``(graph, prefix, iri)`` (N-Triples graph and IRI).
    graph_namespaces: tuple[tuple[str, str, str], ...] = ()
    target: str = ""
    taken_at: float = 0.0

    def to_json(self) -> bytes:
        """The position as stored under :data:`POSITION_KEY`."""
        return json.dumps(
            {
                "format": POSITION_FORMAT,
                "head": self.head,
                "sources": {
                    name: {k: getattr(cp, k) for k in _CHECKPOINT_FIELDS} for name, cp in sorted(self.sources.items())
                },
                "graph_namespaces": [list(ns) for ns in self.graph_namespaces],
                "target": self.target,
                "taken_at": self.taken_at,
            },
            ensure_ascii=False,
            sort_keys=True,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, source: str) -> SnapshotPosition:
        """Parse a stored position; :class:`FormatError` naming ``source`` when it is malformed."""
        try:
            raw = json.loads(data.decode("utf-8"))
            if not isinstance(raw, dict) or raw.get("format") != POSITION_FORMAT:
                raise ValueError(f"expected an object with format {POSITION_FORMAT}")
            head = raw.get("head")
            if head is not None and not isinstance(head, str):
                raise ValueError("head is not a string")
            sources = {
                str(name): Checkpoint(
                    int(cp["offset"]),
                    int(cp["frame"]),
                    int(cp["row"]),
                    int(cp["patches"]),
                    None if cp.get("last_id") is None else str(cp["last_id"]),
                    None if cp.get("fingerprint") is None else str(cp["fingerprint"]),
                )
                for name, cp in dict(raw.get("sources") or {}).items()
            }
            graph_ns = tuple((str(g), str(p), str(i)) for g, p, i in raw.get("graph_namespaces") or [])
            return cls(head, sources, graph_ns, str(raw.get("target", "")), float(raw.get("taken_at", 0.0)))
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            raise FormatError(
                f"{source}: the snapshot position (frame 0 metadata {POSITION_KEY!r}) is malformed: {exc}"
            ) from None


@dataclass(frozen=True, slots=True)
class SnapshotReport:
    """What :func:`write_snapshot` wrote."""

    path: Path
    quads: int
    position: SnapshotPosition
    attempts: int


def target_position(target: DumpableTarget, name: str = "") -> SnapshotPosition:
    """The target's position now: its head, checkpoints and named-graph namespaces."""
    sources = {s.source: s.checkpoint for s in target.sources()}
    graph_ns = tuple(sorted((g, p, iri) for (g, p), iri in target.namespaces().items() if g))
    return SnapshotPosition(target.head(), sources, graph_ns, name)


def _same(a: SnapshotPosition, b: SnapshotPosition) -> bool:
    # updated_at is part of Checkpoint equality: any unit committed in between shows.
    return a.head == b.head and dict(a.sources) == dict(b.sources) and a.graph_namespaces == b.graph_namespaces


class _Changed(Exception):
    """The target changed while a snapshot was read: that attempt's file is dropped."""


def write_snapshot(
    target: Target, out: str | os.PathLike[str], *, name: str = "", attempts: int = ATTEMPTS
) -> SnapshotReport:
    """Write ``target``'s state and position to ``out`` (a ``.jelly`` file, replaced atomically).

    ``name`` is recorded as the target the snapshot was taken from. Raises
    :class:`ApplyError` if the target changed during every one of ``attempts`` reads.
    """
    dump = dumpable(target)
    path = Path(out)
    for attempt in range(1, attempts + 1):
        before = target_position(dump, name)
        position = SnapshotPosition(before.head, before.sources, before.graph_namespaces, name, round(time.time(), 3))
        try:
            with replaced_whole(path) as f:
                count = _write_file(dump, f, position)
                if not _same(before, target_position(dump, name)):
                    raise _Changed
        except _Changed:
            continue
        return SnapshotReport(path, count, position, attempt)
    raise ApplyError(
        f"{name or 'the target'}: it changed while the snapshot was read, {attempts} times; "
        "take the snapshot when fewer units are being applied"
    )


def _write_file(dump: DumpableTarget, f: BinaryIO, position: SnapshotPosition) -> int:
    """Stream the target's quads to ``f``; returns how many were written.

    The options first declare neither RDF-star nor generalized statements, which every
    reader takes; a target holding either is written again with both declared.
    """
    for features in (False, True):
        counter = [0]
        namespaces = sorted((p, iri) for (g, p), iri in dump.namespaces().items() if not g)
        quads = dump.quads()
        f.seek(0)
        f.truncate()
        try:
            for chunk in encode_snapshot(_counted(quads, counter), namespaces, position, features=features):
                f.write(chunk)
        except EncodeError:
            if features:
                raise
            continue
        finally:
            close = getattr(quads, "close", None)
            if close is not None:
                close()  # a reader left half way ends its read transaction now
        break
    return counter[0]


def _counted(quads: Iterable[tuple[str, str, str, str]], counter: list[int]) -> Iterator[tuple[str, str, str, str]]:
    for quad in quads:
        counter[0] += 1
        yield quad


def encode_snapshot(
    quads: Iterable[tuple[str, str, str, str]],
    namespaces: Iterable[tuple[str, str]],
    position: SnapshotPosition,
    *,
    features: bool = True,
) -> Iterator[bytes]:
    """The snapshot file's bytes: quads (N-Triples strings, ``""`` default graph), default-graph
    namespaces ``(prefix, N-Triples IRI)``, and the position in the first frame's metadata.

    ``features`` declares RDF-star and generalized statements in the stream options (the
    encoder refuses them undeclared, with :class:`EncodeError`).
    """
    namespaces = list(namespaces)
    options = RdfOptions(
        physical_type=PhysicalType.QUADS,
        rdf_star=features,
        generalized_statements=features,
        version=RDF_VERSION if namespaces else RDF_VERSION_1_0,
    )
    encoder: RdfEncoder[str] = RdfEncoder(options, _NT)
    for prefix, iri in namespaces:
        encoder.namespace(prefix, iri)
    meta = rdf_pb2.RdfStreamFrame(metadata={POSITION_KEY: position.to_json()}).SerializeToString()
    pending = bytearray()
    first_done = False

    def emit(data: bytes) -> bytes:
        nonlocal first_done
        if first_done:
            return data
        pending.extend(data)
        found = read_varint(pending, 0, len(pending))
        if found is None or found[1] + found[0] > len(pending):
            return b""
        length, start = found
        # A frame's serialized fields may be followed by more fields: appending the
        # metadata entries to the first frame's bytes adds them to that frame.
        frame = bytes(pending[start : start + length]) + meta
        rest = bytes(pending[start + length :])
        pending.clear()
        first_done = True
        return encode_varint(len(frame)) + frame + rest

    for s, p, o, g in quads:
        encoder.statement(s, p, o, g or None)
        if encoder.pending_bytes() >= 1 << 20:
            chunk = emit(encoder.take())
            if chunk:
                yield chunk
    encoder.finish()
    # The options row always makes a first frame, so emit() has found it by now.
    chunk = emit(encoder.take())
    if chunk:
        yield chunk


def read_position(path: str | os.PathLike[str]) -> SnapshotPosition | None:
    """The position stored in a Jelly-RDF snapshot's first frame, or ``None`` if it has none.

    Reads only as far as the first frame.
    """
    source = os.fspath(path)
    framer = Framer(source=source)
    item = None
    with open(path, "rb") as f:
        while item is None:
            chunk = f.read(1 << 20)
            if not chunk:
                framer.close()
                item = framer.next_frame()
                break
            framer.feed(chunk)
            item = framer.next_frame()
    if item is None:
        return None
    try:
        frame = rdf_pb2.RdfStreamFrame.FromString(item[1])
    except Exception as exc:  # protobuf's DecodeError; the rule is the frame's structure
        raise DecodeError(f"not a Jelly-RDF frame: {exc}", source=source, offset=item[0], frame=0) from None
    raw = frame.metadata.get(POSITION_KEY)
    return None if raw is None else SnapshotPosition.from_json(raw, source)


def position_summary(position: SnapshotPosition) -> dict[str, Any]:
    """The position as plain data (``patchsync snapshot`` prints it)."""
    return {
        "head": position.head,
        "sources": {name: asdict(cp) for name, cp in sorted(position.sources.items())},
    }


__all__ = [
    "POSITION_KEY",
    "SnapshotPosition",
    "SnapshotReport",
    "encode_snapshot",
    "read_position",
    "target_position",
    "write_snapshot",
]
