"""A target served read-only: its committed state as Jelly-RDF frames, with its position.

A snapshot is what ``patchsync snapshot`` writes (:func:`~patchsync.apply.snapshot_file.write_snapshot`:
the quads read between two equal readings of the target's position, so they are the state
at that position), written to a temporary file by a worker thread and then sent frame by
frame, so a slow reader holds no more than one frame of it in memory.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from patchsync.apply.snapshot_file import SnapshotPosition, write_snapshot
from patchsync.codec.framing import read_varint
from patchsync.errors import DecodeError
from patchsync.serve.topics import Snapshot, TargetTopic, TopicInfo, flatten, thread_batches

#: Bytes read from the snapshot file at a time.
CHUNK = 1 << 20


class RegisteredTargetTopic(TargetTopic):
    """A target of the target registry (``sqlite:///…``, ``postgresql+psycopg://…``, ``file:…``,
    ``oxigraph:…``, ``sparql+http(s)://…``)."""

    def __init__(self, name: str, spec: str) -> None:
        super().__init__(name, spec)
        self.head: str | None = None

    async def open(self) -> None:
        self.head = await asyncio.to_thread(self._read_head)

    def _read_head(self) -> str | None:
        from patchsync.apply.registry import open_target

        target = open_target(self.spec, existing=True)
        try:
            return target.head()
        finally:
            target.close()

    def describe(self) -> TopicInfo:
        return TopicInfo(self.name, self.kind, self.head, 0, self.spec)

    async def snapshot(self) -> Snapshot:
        """The target's state now (read in a worker thread), to be sent frame by frame."""
        folder = await asyncio.to_thread(tempfile.mkdtemp, prefix="patchsync-serve-")
        path = Path(folder) / "snapshot.jelly"
        try:
            report = await asyncio.to_thread(self._write, path)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self.head = report[0].head

        def frames() -> Iterator[bytes]:
            try:
                yield from read_frames(path)
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        return Snapshot(report[0], report[1], flatten(thread_batches(frames, batch=8)))

    def _write(self, path: Path) -> tuple[SnapshotPosition, int]:
        from patchsync.apply.registry import open_target

        target = open_target(self.spec, existing=True)
        try:
            report = write_snapshot(target, path, name=self.name)
        finally:
            target.close()
        return report.position, report.quads


def read_frames(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """The frames of a delimited Jelly file, each without its length prefix."""
    buf = bytearray()
    offset = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            buf.extend(chunk)
            while True:
                found = read_varint(buf, 0, len(buf))
                if found is None or found[1] + found[0] > len(buf):
                    break
                length, start = found
                yield bytes(buf[start : start + length])
                del buf[: start + length]
                offset += start + length
            if not chunk:
                if buf:
                    raise DecodeError("the snapshot ends inside a frame", source=str(path), offset=offset)
                return


__all__ = ["RegisteredTargetTopic", "Snapshot", "read_frames"]
