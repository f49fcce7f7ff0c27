"""RDF Messages into patches, without I/O beyond reading the message logs (docs/design.md §8).

The ingest itself (destinations, ``--state`` targets, resuming) is :mod:`patchsync.ingest.run`;
this module holds what it decides with:

- :func:`read_messages`: every message of the sources, parsed and validated up front, blank
  node labels scoped to their message (``_:x`` of message *n* of a source becomes
  ``_:s<hash>m<n>_x``, ``hash`` of the source's path), each with its patch id.
- :func:`message_patch_id`: a message's patch id, ``urn:uuid:`` of a name-based UUID (v5) of
  the source's path, the message's number and a digest of its quads. A rerun computes the
  same ids, so it recognises the messages a destination already holds by id.
- :class:`DatasetIndex`: the dataset a destination's patches leave, per graph, and what one
  message changes in it under each mode (:data:`MODES`).
- :func:`patch_events`: one message's patch, as events with N-Triples terms.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchsync import formats
from patchsync.errors import UsageError
from patchsync.events import Add, Delete, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.ingest.modes import ADD, MODES, REPLACE, REPLACE_GRAPH
from patchsync.logs.convert import FeatureScan
from patchsync.logs.messages import Message, MessageReader, Quad, scope_labels
from patchsync.logs.patch_logs import read_events
from patchsync.options import Limits
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import patch_ends

__all__ = [
    "ADD",
    "MESSAGE_HEADER",
    "MODES",
    "REPLACE",
    "REPLACE_GRAPH",
    "SOURCE_HEADER",
    "DatasetIndex",
    "IngestMessage",
    "logged_ids",
    "message_patch_id",
    "patch_events",
    "read_messages",
]


#: Header keys that record where a patch came from.
SOURCE_HEADER = "ingest-source"
MESSAGE_HEADER = "ingest-message"

_NT = NTriplesTerms()
_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"
#: The namespace of ingested patch ids (a fixed, random UUID: ids of no other scheme collide).
_ID_NAMESPACE = uuid.UUID("5d1c1a52-8d4b-4c39-9b0e-3f6f2a7c9e41")

Triple = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class IngestMessage:
    """One message to ingest: its source (absolute path), number from 1, scoped quads, patch id."""

    source: str
    number: int
    quads: Message
    patch_id: str


def message_patch_id(source: str, number: int, quads: Sequence[Quad]) -> str:
    """The id of the patch of message ``number`` of ``source``: the same on every run."""
    digest = hashlib.sha256()
    for s, p, o, g in quads:
        digest.update(f"{s} {p} {o} {g or ''}\n".encode())
    name = f"{source}\n{number}\n{digest.hexdigest()}"
    return f"urn:uuid:{uuid.uuid5(_ID_NAMESPACE, name)}"


def _read_source(path: Path, messages: bool, limits: Limits | None) -> list[Message]:
    found = formats.by_suffix(path)
    if found is None or formats.MESSAGES not in found.roles:
        if found is not None and formats.RDF_CONVERT in found.roles and not messages:
            from patchsync.logs.rdf_files import read_rdf_quads

            return [read_rdf_quads(path, limits=limits).quads]
        logs = ", ".join(formats.suffixes(formats.MESSAGES))
        raise UsageError(f"{path}: not an RDF Message Log (expected one of: {logs})")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if found.messages_only or messages:
        return list(MessageReader(data, found.name, source=str(path), limits=limits))
    from patchsync.logs.rdf_files import read_rdf_bytes

    return [read_rdf_bytes(data, found.name, source=str(path), limits=limits).quads]


def read_messages(
    sources: Sequence[str | Path], *, messages: bool = False, limits: Limits | None = None, scan: FeatureScan
) -> list[IngestMessage]:
    """Every message of ``sources`` in order, validated before anything is written.

    ``messages`` reads N-Triples, N-Quads, Turtle, TriG and Jelly-RDF files as message logs
    (``.ndjsonld`` and ``.yamlld`` always are); otherwise such a file is one message. A
    malformed message raises :class:`DecodeError` naming the file, the message and the line.
    ``scan`` notes the features the messages use (the options of a new destination).
    """
    if not sources:
        raise UsageError("nothing to ingest: name at least one message log")
    out: list[IngestMessage] = []
    seen: set[str] = set()
    for src in sources:
        path = Path(src)
        key = str(path.resolve())
        if key in seen:
            raise UsageError(f"{src}: named twice; each message log is ingested once per run")
        seen.add(key)
        found = _read_source(path, messages, limits)
        tag = "s" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]
        for number, quads in enumerate(scope_labels(found, tag=tag), start=1):
            for s, p, o, g in quads:
                scan.see(Add(s, p, o, g), str(src))
            out.append(IngestMessage(key, number, quads, message_patch_id(key, number, quads)))
    return out


def logged_ids(paths: Iterable[Path]) -> set[str]:
    """The patch ids (of ``id`` headers, as the unit reader reads them) in the log files ``paths``."""
    ids: set[str] = set()
    for path in paths:
        if path.is_file():
            ids.update(end.patch.id or "" for end in patch_ends(read_events(path, adapter=_NT), _NT, source=str(path)))
    ids.discard("")
    return ids


class DatasetIndex:
    """A dataset as a destination's patches leave it: graph (``None``: default) to its triples.

    Triples keep the order they came in, so a patch that deletes a graph's triples lists them
    the same way on every run.
    """

    def __init__(self) -> None:
        self.graphs: dict[str | None, dict[Triple, None]] = {}

    def load(self, quads: Iterable[tuple[str, str, str, str | None]]) -> DatasetIndex:
        """Add ``quads`` (the default graph as ``None`` or ``""``); returns the index."""
        graphs = self.graphs
        for s, p, o, g in quads:
            graphs.setdefault(g or None, {})[(s, p, o)] = None
        return self

    def __len__(self) -> int:
        return sum(len(t) for t in self.graphs.values())

    def quads(self) -> Iterator[Quad]:
        """Every quad, graph by graph."""
        for g, triples in self.graphs.items():
            for s, p, o in triples:
                yield (s, p, o, g)

    def changes(self, mode: str, message: Sequence[Quad]) -> tuple[list[Quad], list[Quad]]:
        """The deletes and adds that make the dataset what ``message`` says under ``mode``.

        ``add``: the message's quads. ``replace-graph``: in each graph the message names, the
        triples it does not hold go and its new ones come. ``replace``: the same over every
        graph of the dataset. Only real changes are listed in the replace modes.
        """
        if mode == ADD:
            return [], list(message)
        wanted: dict[str | None, dict[Triple, None]] = {}
        for s, p, o, g in message:
            wanted.setdefault(g, {})[(s, p, o)] = None
        graphs: Iterable[str | None] = wanted
        if mode == REPLACE:
            graphs = [*self.graphs, *(g for g in wanted if g not in self.graphs)]
        elif mode != REPLACE_GRAPH:
            raise UsageError(f"unknown ingest mode {mode!r} (expected one of: {', '.join(MODES)})")
        deletes: list[Quad] = []
        adds: list[Quad] = []
        empty: dict[Triple, None] = {}
        for g in graphs:
            have = self.graphs.get(g, empty)
            want = wanted.get(g, empty)
            deletes.extend((s, p, o, g) for s, p, o in have if (s, p, o) not in want)
            adds.extend((s, p, o, g) for s, p, o in want if (s, p, o) not in have)
        return deletes, adds

    def apply(self, deletes: Iterable[Quad], adds: Iterable[Quad]) -> None:
        """Delete then add (what one patch of :meth:`changes` does)."""
        graphs = self.graphs
        for s, p, o, g in deletes:
            triples = graphs.get(g)
            if triples is not None:
                triples.pop((s, p, o), None)
                if not triples:
                    del graphs[g]
        for s, p, o, g in adds:
            graphs.setdefault(g, {})[(s, p, o)] = None


def patch_events(
    message: IngestMessage, prev: str | None, deletes: Sequence[Quad], adds: Sequence[Quad]
) -> list[Event]:
    """The patch of ``message`` (N-Triples terms): ``H id``, ``H prev`` (unless the first),
    the source and message headers, then the deletes and adds in one transaction."""
    events: list[Event] = [Header("id", _NT.iri(message.patch_id))]
    if prev is not None:
        events.append(Header("prev", _NT.iri(prev)))
    events.append(Header(SOURCE_HEADER, _NT.literal(message.source)))
    events.append(Header(MESSAGE_HEADER, _NT.literal(str(message.number), None, _INTEGER)))
    events.append(TxStart())
    events.extend(Delete(s, p, o, g) for s, p, o, g in deletes)
    events.extend(Add(s, p, o, g) for s, p, o, g in adds)
    events.append(TxCommit())
    events.append(PatchEnd())
    return events
