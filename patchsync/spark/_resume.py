"""Decoder snapshots for Spark's log ranges: a range ``[a, b)`` starts decoding near ``a``.

A log cannot be decoded from the middle without the lookup tables that run through it
(docs/design.md §7), so without help a task reading ``[a, b)`` decodes from byte 0 and drops
what ``a`` covers. A task that ends its range between patches writes the decoder's state there
(a decoder snapshot, :mod:`patchsync.logs.resume_point`'s checksummed format) with the patch
and row counters of the file at that byte, into a snapshot directory given to the source; the
task that reads the next range restores the newest snapshot at or before its ``a`` and decodes
from there. The rows and their ``patch``/``row`` numbers are those a decode from byte 0 gives.

A snapshot only accelerates: one that is unreadable, taken for another log (its identity or
the bytes just before its offset differ) or past ``a`` is not used, and the task decodes from
byte 0. Snapshots are named by a hash of the log's path and identity and by their offset; the
incremental replay keeps them in ``STATE/.decoders`` and removes all but the newest one at or
before each log's position after a run.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.logs.resume_point import ANCHOR_BYTES, ResumePointError, decode_resume_point, encode_resume_point
from patchsync.options import Limits
from patchsync.terms.ntriples import NTriplesTerms

#: The snapshot directory of a state directory.
DECODERS = ".decoders"
_NAME = re.compile(r"([0-9a-f]{32})-(\d{16})\.snap")


@dataclass(frozen=True)
class Resumed:
    """A decoder restored at ``offset`` of a log, with the file's patch and row counts there."""

    decoder: PatchDecoder[str]
    offset: int
    patch: int
    row: int


def _key(path: str, identity: str) -> str:
    return hashlib.sha256(f"{path}\0{identity}".encode()).hexdigest()[:32]


def _anchor(path: str, offset: int) -> bytes:
    n = min(offset, ANCHOR_BYTES)
    with open(path, "rb") as f:
        return os.pread(f.fileno(), n, offset - n)


def _snapshots(folder: Path, path: str, identity: str) -> list[tuple[int, Path]]:
    key = _key(path, identity)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = [(int(m.group(2)), folder / n) for n in names if (m := _NAME.fullmatch(n)) and m.group(1) == key]
    return sorted(found)


def restore(folder: str, path: str, identity: str, start: int) -> Resumed | None:
    """The newest usable snapshot of the log at or before byte ``start``, or ``None``."""
    for offset, file in reversed(_snapshots(Path(folder), path, identity)):
        if offset > start:
            continue
        try:
            point = decode_resume_point(file.read_bytes(), NTriplesTerms(), source=path, limits=Limits())
        except (OSError, ResumePointError):
            continue
        if point.fingerprint != identity or point.offset != offset or not point.anchored_in(_anchor(path, offset)):
            continue
        return Resumed(point.decoder, offset, point.checkpoint[0], point.checkpoint[1])
    return None


def keep(folder: str, path: str, identity: str, decoder: PatchDecoder[Any], patch: int, row: int) -> None:
    """Write the snapshot of ``decoder`` (resumable, at a frame end between patches) for the log."""
    offset = decoder.export_state().offset
    try:
        data = encode_resume_point(
            decoder, source=path, fingerprint=identity, checkpoint=(patch, row), anchor=_anchor(path, offset)
        )
    except ResumePointError:  # a state no snapshot holds (a lookup value with U+0000): none kept
        return
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{_key(path, identity)}-{offset:016d}.snap"
    tmp = root / f".{final.name}.{os.getpid()}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, final)


def prune(folder: Path, logs: Mapping[str, Mapping[str, Any]]) -> None:
    """Keep, per log (entries ``path``, ``id``, ``at``), its newest snapshot at or before ``at``."""
    wanted = set()
    for entry in logs.values():
        usable = [f for offset, f in _snapshots(folder, entry["path"], entry["id"]) if offset <= entry["at"]]
        if usable:
            wanted.add(usable[-1].name)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if _NAME.fullmatch(name) and name not in wanted:
            (folder / name).unlink(missing_ok=True)


__all__ = ["DECODERS", "Resumed", "keep", "prune", "restore"]
