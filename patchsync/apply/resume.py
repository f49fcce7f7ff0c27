"""Resuming ``apply`` of a Jelly-Patch log in O(1): a validated decoder snapshot per log.

Without a snapshot, resuming decodes the log from its first byte and passes over every
event up to the target's checkpoint (docs/design.md §3): applying one appended patch to a
large log costs as much decoding as the whole log. After each apply of a ``.jellyp`` file
that ends between patches, :class:`LogReader` saves the decoder's state (the lookup tables,
the repeated terms, the position: :mod:`patchsync.logs.resume_point`, the format the tail
daemon uses) in a snapshot directory; the next apply of that log restores it and decodes
only the bytes after it.

A snapshot holds nothing about any target: the decoder's state at a byte offset is a
function of the log's bytes before it. So one snapshot serves every target the log is
applied to, and it is used only when it is valid for this log and this target:

* it parses and validates (magic, version, checksum, every field, the lookups through the
  decoder's own rules); it names this log (its ``source``) and its first frame
  (fingerprint), and the bytes just before its offset are those it saw (anchor);
* the target's checkpoint of the log is at or past it: everything before the snapshot was
  applied, so the applier passes over the events from there up to the checkpoint exactly
  as it would from the log's start.

Anything else (no snapshot, a corrupt or foreign one, a target behind it, ``reset``) falls
back to decoding from the first byte, which is always correct: the checkpoint in the target
stays authoritative, and a snapshot only saves decoding.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from patchsync.apply.target import Target
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.events import Event
from patchsync.logs.fingerprint import FINGERPRINT_BYTES, fingerprint
from patchsync.logs.patch_logs import CHUNK_SIZE
from patchsync.logs.resume_point import (
    ANCHOR_BYTES,
    MAX_RESUME_POINT_BYTES,
    ResumePointError,
    decode_resume_point,
    encode_resume_point,
)
from patchsync.options import Limits

#: The environment variable naming the snapshot directory of the command line's ``apply``.
SNAPSHOT_DIR_ENV = "PATCHSYNC_SNAPSHOT_DIR"


def default_snapshot_dir() -> Path:
    """Where ``patchsync apply`` keeps its decoder snapshots: ``$PATCHSYNC_SNAPSHOT_DIR``, else
    ``$XDG_CACHE_HOME/patchsync/snapshots`` (``~/.cache`` when unset): they are a cache."""
    given = os.environ.get(SNAPSHOT_DIR_ENV)
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "patchsync" / "snapshots"


def resume_point_file(snapshot_dir: str | os.PathLike[str], source: str) -> Path:
    """The file of the resume point (decoder snapshot) of the log named ``source`` in ``snapshot_dir``."""
    return Path(snapshot_dir) / f"{hashlib.sha256(source.encode()).hexdigest()[:32]}.apply-snapshot"


class LogReader:
    """Events of one ``.jellyp`` file for the applier, from a snapshot when one is valid.

    ``resumed_at`` is the byte offset decoding started at (0 without a usable snapshot) and
    ``ignored`` why a snapshot found was not used (``None`` if none was found or it was used).
    Call :meth:`save` after the apply succeeded.
    """

    def __init__(
        self,
        file: IO[bytes],
        target: Target,
        *,
        source: str,
        limits: Limits | None,
        snapshot_dir: str | os.PathLike[str],
        reset: bool = False,
    ) -> None:
        self.file = file
        self.source = source
        self.limits = limits or Limits()
        self.path = resume_point_file(snapshot_dir, source)
        self.target = target
        head = os.pread(file.fileno(), FINGERPRINT_BYTES, 0)
        self.fingerprint = fingerprint(head, "jellyp")
        self.resumed_at = 0
        self.ignored: str | None = None
        self.decoder: PatchDecoder[Any] = self._restored(reset) or PatchDecoder(
            target.adapter, source=source, limits=self.limits
        )

    def _restored(self, reset: bool) -> PatchDecoder[Any] | None:
        if reset:
            return None
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size > MAX_RESUME_POINT_BYTES:
                    raise ResumePointError(f"larger than {MAX_RESUME_POINT_BYTES} bytes")
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            snap = decode_resume_point(data, self.target.adapter, source=self.source, limits=self.limits)
            if snap.fingerprint != self.fingerprint:
                raise ResumePointError("taken for another log with the same name (fingerprint differs)")
            anchor = os.pread(self.file.fileno(), snap.anchor_len, snap.offset - snap.anchor_len)
            if not snap.anchored_in(anchor):
                raise ResumePointError("taken for another log (the bytes before its offset differ)")
            stored = self.target.checkpoint(self.source)
            if stored is None or (stored.offset, stored.row) < snap.checkpoint:
                raise ResumePointError("ahead of the target's checkpoint")
            if stored.fingerprint and stored.fingerprint != self.fingerprint:
                raise ResumePointError("the target's checkpoint is for another log (the applier reports it)")
        except (OSError, ResumePointError) as exc:
            self.ignored = str(exc)
            return None
        self.resumed_at = snap.offset
        return snap.decoder

    def events(self) -> Iterator[Event]:
        """The log's events from where decoding starts, to its end."""
        decoder, file = self.decoder, self.file
        file.seek(self.resumed_at)
        while True:
            chunk = file.read(CHUNK_SIZE)
            if not chunk:
                break
            decoder.feed(chunk)
            yield from decoder
        if decoder.resumable:
            # Whole frames, no patch open: closing could report nothing, and a closed
            # decoder's state is not one to carry over (see save()).
            return
        decoder.close()
        yield from decoder

    def save(self) -> bool:
        """Keep the decoder's state for the next apply; whether a snapshot was written.

        Nothing is written when the log does not end between patches or the target has no
        checkpoint of it; a snapshot that cannot be written is skipped (it only saves time).
        """
        decoder = self.decoder
        stored = self.target.checkpoint(self.source)
        if stored is None or not decoder.resumable:
            return False
        offset = decoder.offset
        anchor = os.pread(self.file.fileno(), min(offset, ANCHOR_BYTES), offset - min(offset, ANCHOR_BYTES))
        try:
            data = encode_resume_point(
                decoder,
                source=self.source,
                fingerprint=self.fingerprint,
                checkpoint=(stored.offset, stored.row),
                anchor=anchor,
            )
        except ResumePointError:
            return False
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return False
        return True


__all__ = ["SNAPSHOT_DIR_ENV", "LogReader", "default_snapshot_dir", "resume_point_file"]
