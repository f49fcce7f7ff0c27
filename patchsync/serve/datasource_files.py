"""Files kept with a data source on this machine: its bootstrap snapshot and its description.

A log topic on this machine (:class:`~patchsync.serve.file_topic.FileLogTopic`) may have
two files beside its patches; the log's own readers skip both (they are not ``.jellyp``):

- the **bootstrap snapshot** (RDF Delta's ``init``): a Jelly-RDF file written by
  ``patchsync snapshot`` from a replica of this log, ``DIR/init.jelly`` for a directory of
  segments, ``LOG.init.jelly`` beside a file log ``LOG.jellyp``. Its position's ``head``
  (the last patch the replica had applied) must be a patch of the log; its version there
  is where a client that loads the snapshot continues the change feed. The snapshot is
  served with its position rewritten for the client (:func:`served_position`): the head,
  and one checkpoint, under the served log's own address, at that version, so a client
  loading it (``apply``/``tail --base http://HOST:PORT/NAME/init``) resumes the feed after it;
- the **description** kept by ``create_datasource`` (RDF Delta keeps it in the data
  source's ``source.cfg``): ``DIR/datasource.json`` (``LOG.datasource.json`` for a file
  log), ``{"name": …, "uri": …}``, read again when the server starts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from patchsync._proto import rdf_pb2
from patchsync.apply.snapshot_file import POSITION_KEY, SnapshotPosition, read_position
from patchsync.apply.target import Checkpoint
from patchsync.codec.framing import encode_varint
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.errors import ChainError
from patchsync.events import Statement
from patchsync.logs.payloads import NT_TERMS
from patchsync.serve.topics import LogTopic

#: The bootstrap snapshot's name in a segment directory, and its suffix beside a file log.
INIT_NAME = "init.jelly"
#: The description's name in a segment directory, and its suffix beside a file log.
DESCRIPTION_NAME = "datasource.json"


def _beside(topic: LogTopic, name: str) -> Path | None:
    """``DIR/name`` for a directory topic, ``LOG.name`` beside a file log; ``None`` for a
    topic with no files here (a NATS stream)."""
    path = getattr(topic, "path", None)
    if not isinstance(path, Path):
        return None
    if getattr(topic, "directory", False):
        return path / name
    return path.with_name(f"{path.stem}.{name}")


def init_path(topic: LogTopic) -> Path | None:
    """Where the topic's bootstrap snapshot is looked for (see the module docstring)."""
    return _beside(topic, INIT_NAME)


def description_path(topic: LogTopic) -> Path | None:
    """Where the topic's description is kept (see the module docstring)."""
    return _beside(topic, DESCRIPTION_NAME)


# -- the description ----------------------------------------------------------------------


def read_uri(topic: LogTopic) -> str:
    """The ``uri`` kept for the topic (``""`` when none was kept or the file is unreadable:
    a description is informative, a broken one must not keep the log from being served)."""
    path = description_path(topic)
    if path is None:
        return ""
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return ""
    uri = raw.get("uri") if isinstance(raw, dict) else None
    return uri if isinstance(uri, str) else ""


def write_uri(topic: LogTopic, uri: str) -> None:
    """Keep ``uri`` for the topic, replacing the description atomically (nothing for a
    topic with no files here)."""
    path = description_path(topic)
    if path is None:
        return
    data = json.dumps({"name": topic.name, "uri": uri}, ensure_ascii=False).encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# -- the bootstrap snapshot ---------------------------------------------------------------


def snapshot_version(topic: LogTopic, path: Path) -> tuple[SnapshotPosition, int]:
    """The snapshot's position and the version of its head in the topic's log (0: a snapshot
    taken before any patch). A head the log does not hold is a :class:`ChainError`: the
    snapshot was taken from a replica of another log."""
    position = read_position(path) or SnapshotPosition(None)
    if position.head is None:
        return position, 0
    version = topic.version_of(position.head)
    if version is None:
        raise ChainError(
            f"topic {topic.name}: its snapshot {path} is at patch {position.head}, which is not in the log; "
            "it was taken from a replica of another log"
        )
    return position, version


def served_position(position: SnapshotPosition, version: int, address: str) -> SnapshotPosition:
    """The position a client gets: the head, and the served log ``address`` checkpointed at
    ``version`` with the head as its last patch (no fingerprint: the client names the log
    by its own address, which may differ)."""
    sources: dict[str, Checkpoint] = {}
    if position.head is not None:
        sources[address] = Checkpoint(version, 0, 0, version, position.head, None)
    return SnapshotPosition(position.head, sources, position.graph_namespaces, position.target, position.taken_at)


def with_position(first_frame: bytes, position: SnapshotPosition) -> bytes:
    """The snapshot's first frame with its position replaced."""
    frame = rdf_pb2.RdfStreamFrame.FromString(first_frame)
    frame.metadata[POSITION_KEY] = position.to_json()
    return frame.SerializeToString()


def jelly_chunks(frames: Iterator[bytes], position: SnapshotPosition) -> Iterator[bytes]:
    """The snapshot as a delimited Jelly-RDF stream, the first frame carrying ``position``."""
    first = True
    for frame in frames:
        if first:
            frame = with_position(frame, position)
            first = False
        yield encode_varint(len(frame)) + frame


class NQuadsOfFrames:
    """A snapshot's delimited Jelly-RDF frames as N-Quads text, a frame at a time (the decoder
    keeps the lookup tables that run across frames)."""

    def __init__(self, source: str) -> None:
        self._decoder: RdfDecoder[str] = RdfDecoder(NT_TERMS, source=source, framing="delimited")

    def feed(self, frame: bytes) -> bytes:
        """The N-Quads lines of the statements ``frame`` completes."""
        self._decoder.feed(encode_varint(len(frame)) + frame)
        return self._lines()

    def close(self) -> bytes:
        """The lines of what the end of the snapshot completes (a torn frame is refused)."""
        self._decoder.close()
        return self._lines()

    def _lines(self) -> bytes:
        return "".join(
            f"{e.s} {e.p} {e.o} {e.g} .\n" if e.g else f"{e.s} {e.p} {e.o} .\n"
            for e in self._decoder
            if type(e) is Statement
        ).encode()


def nquads_chunks(frames: Iterator[bytes], source: str, chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    """The snapshot's statements as N-Quads, in chunks of about ``chunk_bytes``."""
    text = NQuadsOfFrames(source)
    out: list[bytes] = []
    held = 0
    for frame in frames:
        lines = text.feed(frame)
        out.append(lines)
        held += len(lines)
        if held >= chunk_bytes:
            yield b"".join(out)
            out, held = [], 0
    out.append(text.close())
    if any(out):
        yield b"".join(out)


__all__ = [
    "NQuadsOfFrames",
    "DESCRIPTION_NAME",
    "INIT_NAME",
    "description_path",
    "init_path",
    "jelly_chunks",
    "nquads_chunks",
    "read_uri",
    "served_position",
    "snapshot_version",
    "with_position",
    "write_uri",
]
