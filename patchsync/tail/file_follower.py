"""One log file being followed: its file, read position, decoder, applier and decoder snapshot.

A :class:`FileFollower` (the daemon's reader of a file source, docs/glossary.md) reads what was appended since the last pass, hands whole frames (cut by
:func:`~patchsync.codec.framing.whole_frames`) to its one live decoder and passes the
decoded events to its applier a whole unit at a time. It checks on every pass that the
file is still the log it started on (the same inode and first frame, not shrunk, the bytes
before the read position unchanged) and, between patches, saves the decoder's state.

No byte is decoded that may straddle a truncation (docs/design.md §3): a partial frame at
the end of a read is never kept for the next one, but read again from the file, since a
writer that recovers a log cuts a frame its crashed predecessor left half written and
writes other bytes in its place. Every read starts at the read position, where the
content check above ends, and a read covering bytes once seen as a partial frame is
compared with a second read of them, so one that began before such a cut is repeated.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any

from patchsync.apply.applier import Applier
from patchsync.apply.target import Checkpoint
from patchsync.codec.framing import read_varint, whole_frames
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import CheckpointError, DecodeError
from patchsync.events import Event
from patchsync.logs.fingerprint import (
    FINGERPRINT_BYTES,
    fingerprint,
    jelly_start,
    log_removed,
    log_replaced,
    log_shrank,
)
from patchsync.logs.resume_point import (
    ANCHOR_BYTES,
    MAX_RESUME_POINT_BYTES,
    ResumePointError,
    decode_resume_point,
    encode_resume_point,
)
from patchsync.tail.follower import Follower, FollowerHost
from patchsync.tail.state import resume_point_path
from patchsync.units import UnitReader

#: Bytes read from one source per pass, so one busy log cannot starve the others or a signal.
READ_BUDGET = 8 << 20
#: Bytes read at once when no longer frame is pending.
READ_CHUNK = 1 << 20
#: How often a read of bytes that keep changing under it is repeated before giving up.
READ_ATTEMPTS = 5
#: Bytes compared at the start of a log to notice it was replaced under the daemon.
START_SAMPLE = 4096
#: Bytes before the read position compared on every pass to notice a log rewritten there.
TAIL_SAMPLE = 64


def _cp_fields(cp: Checkpoint | None) -> dict[str, Any]:
    if cp is None:
        return {"checkpoint": "none"}
    return {"cp_offset": cp.offset, "cp_frame": cp.frame, "cp_row": cp.row, "cp_patches": cp.patches}


class FileFollower(Follower):
    """One log file being tailed: file handle, frame buffer, decoder and applier."""

    def __init__(self, host: FollowerHost, path: Path) -> None:
        super().__init__(host, str(path.resolve()))
        self.path = path
        self.file: IO[bytes] | None = None
        self.ino: int | None = None
        self.buf = bytearray()  # bytes read but not yet fed: a partial frame at most
        self.buf_offset = 0  # file offset of buf[0]: the read position
        self.frame_need = 0  # bytes of the partial frame at buf_offset, once its length is read
        self.partial_end = 0  # end of the last read that left a partial frame
        self.seen_tail = b""  # the last bytes before buf_offset, to notice a rewrite there
        self.decoder: PatchDecoder[Any] | None = None
        self.applier: Applier | None = None
        self.pending: list[Event] = []  # decoded events of a unit not yet complete
        # The unit reader (patchsync.units) tells where units end: pending[:cut] is whole.
        self.units = UnitReader()
        self.cut = 0
        self.fingerprint: str | None = None
        self.start_bytes: bytes = b""
        self.single = False  # a bare, non-delimited frame: decoded only once finished
        self.done = False
        self.boundary = True  # the last event handed on ended a patch (snapshot point)
        self.waiting_since: float | None = None

    # -- opening and resuming ----------------------------------------------------------

    def open(self) -> bool:
        """Open the file and set up decoding once its first frame exists; False if not yet."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - held open for the daemon's life
        except FileNotFoundError:
            return False
        # The same bytes apply_file fingerprints, so tail and apply share checkpoints.
        data = f.read(FINGERPRINT_BYTES)
        log_start = jelly_start(data)
        if log_start.first_frame_end is None and not self.finished:
            # Not one whole frame yet (or a bare frame, complete only once finished).
            f.close()
            return False
        self.file = f
        self.ino = os.fstat(f.fileno()).st_ino
        self.single = log_start.framing == "single"
        self.fingerprint = fingerprint(data, "jellyp")
        self.start_bytes = data[: min(START_SAMPLE, log_start.first_frame_end or len(data))]
        opts, target = self.options, self.host.target
        self._lock()
        self.units = UnitReader(target.adapter)  # the decoder hands out the target's terms
        self.applier = Applier(
            target, source=self.name, fingerprint=self.fingerprint, chain=opts.chain, reset=opts.reset
        )
        self.applier.result = self.report.result
        stored = target.checkpoint(self.name)
        size = os.fstat(f.fileno()).st_size
        if stored is not None and stored.offset >= size and not opts.reset:
            raise CheckpointError(
                f"{self.name}, byte {size}: the log shrank below its checkpoint (byte {stored.offset}); "
                "it was truncated or rewritten"
            )
        start = self._load_resume_point(stored)
        if start is None:
            self.decoder = PatchDecoder(target.adapter, source=self.name, limits=opts.limits)
            start = 0
        self.buf_offset = start
        self.seen_tail = os.pread(f.fileno(), min(start, TAIL_SAMPLE), start - min(start, TAIL_SAMPLE))
        self.report.resumed_from = start
        self.report.applied_end = start
        self.report.state = "live"
        self.reached = True
        self.host.log("resume", {"source": self.name, "from_byte": start, **_cp_fields(stored)})
        return True

    def _resume_point_path(self) -> Path | None:
        state_dir = self.options.state_dir
        return None if state_dir is None else resume_point_path(state_dir, self.name)

    def _load_resume_point(self, stored: Checkpoint | None) -> int | None:
        """Install a saved decoder state if it is valid for the target's checkpoint; its offset.

        Any snapshot that cannot be used is ignored with one log line: decoding from the
        start of the log is always correct (the checkpoint is authoritative).
        """
        path = self._resume_point_path()
        if path is None or stored is None or self.options.reset:
            return None
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size > MAX_RESUME_POINT_BYTES:
                    raise ResumePointError(f"larger than {MAX_RESUME_POINT_BYTES} bytes")
                data = f.read()
        except FileNotFoundError:
            return None
        except (OSError, ResumePointError) as exc:
            self._resume_point_ignored(path, str(exc))
            return None
        try:
            snap = decode_resume_point(data, self.host.target.adapter, source=self.name, limits=self.options.limits)
        except ResumePointError as exc:
            self._resume_point_ignored(path, str(exc))
            return None
        # Valid only for this very log, and only if the target got at least as far as the
        # snapshot: the snapshot sits between patches with every event before it applied,
        # so the applier passes over the events from there up to the checkpoint.
        if snap.fingerprint != self.fingerprint:
            self._resume_point_ignored(path, "taken for another log with the same name (fingerprint differs)")
            return None
        assert self.file is not None
        anchor = os.pread(self.file.fileno(), snap.anchor_len, snap.offset - snap.anchor_len)
        if not snap.anchored_in(anchor):
            self._resume_point_ignored(path, "taken for another log (the bytes before its offset differ)")
            return None
        if (stored.offset, stored.row) < snap.checkpoint:
            self._resume_point_ignored(path, "ahead of the target's checkpoint (the target was restored from a copy?)")
            return None
        self.decoder = snap.decoder
        return snap.offset

    def _resume_point_ignored(self, path: Path, reason: str) -> None:
        self.host.log("snapshot_ignored", {"source": self.name, "snapshot": str(path), "reason": reason})

    def save_resume_point(self, now: float) -> None:
        """Persist the decoder state if everything decoded so far is applied and no patch is open.

        A snapshot that cannot be written (disk full, read-only state directory) is logged
        and skipped: it only speeds up a restart.
        """
        path = self._resume_point_path()
        applier, decoder = self.applier, self.decoder
        if path is None or applier is None or decoder is None or self.pending or not self.boundary or self.single:
            return
        cp = self.host.target.checkpoint(self.name)
        if cp is None or self.fingerprint is None or self.file is None:
            return
        offset = decoder.offset
        anchor = os.pread(self.file.fileno(), min(offset, ANCHOR_BYTES), offset - min(offset, ANCHOR_BYTES))
        try:
            data = encode_resume_point(
                decoder, source=self.name, fingerprint=self.fingerprint, checkpoint=(cp.offset, cp.row), anchor=anchor
            )
        except ResumePointError:
            return
        self.last_saved = now
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.host.log_once("snapshot_failed", {"source": self.name, "error": exc.strerror or str(exc)})

    # -- one pass ----------------------------------------------------------------------

    def pump(self, now: float) -> bool:
        """Read, decode and apply what is new; returns whether bytes are left to read.

        One call reads at most ``READ_BUDGET`` bytes, so a backlog drains over several
        passes, during which signals and other sources get their turn.
        """
        if self.done or self.failed:
            return False
        if self.decoder is None and not self.open():
            return False
        assert self.file is not None and self.decoder is not None and self.applier is not None
        applier = self.applier
        self.buf.clear()
        self._check_file()
        progressed = False
        budget = READ_BUDGET
        read_end = self.buf_offset
        eof = False
        while budget > 0 and not self.host.stopping:
            if self.single:
                # A bare frame is one buffer, decoded once the file is finished.
                start, want = read_end, READ_CHUNK
            else:
                # A partial frame is read again from the file, never kept: if its writer
                # crashed, the next writer cut it and wrote other bytes in its place. The
                # read takes the whole frame once its length is known.
                self.buf.clear()
                start, want = self.buf_offset, max(READ_CHUNK, self.frame_need)
            chunk = self._read(start, want)
            base = self.buf_offset
            # Checked again after the read: a rewrite that began after the check above
            # (a writer's one write lands page by page, its start first) shows here, before
            # any byte of it is decoded.
            self._check_content()
            budget -= len(chunk)
            read_end = start + len(chunk)
            self.buf += chunk
            if not self.single:
                progressed |= self._feed_frames()
                if self.buf:
                    self.partial_end = max(self.partial_end, read_end)
            if len(chunk) < want and (self.single or self.buf_offset == base):
                # At the end of the file, with nothing new decoded (a read that decoded
                # frames is followed by one more: the file may have grown meanwhile).
                eof = True
                break
        self.report.size = max(self.report.size, read_end)
        if eof and self.finished and not self.host.stopping:
            # A later file exists: this one is complete, a trailing partial frame is an error.
            decoder = self.decoder
            if not self.buf and applier.pause():
                # Snapshot the end of a finished file, so a restart does not decode it again.
                self.save_resume_point(now)
            decoder.feed(bytes(self.buf))
            self._consumed(self.buf)
            self.buf.clear()
            decoder.close()
            progressed |= self._drain()
            self._hand_on(final=True)
            self.done = True
            self.decoder = None
            self.report.state = "finished"
        flushed = applier.pause()
        if flushed and progressed:
            # Units reached the target: a later loss starts a new backoff and a new
            # retry_timeout clock (a backlog drained through flapping connections is
            # progress, not one long outage).
            self.host.target_progressed()
        self._update_lag(now, read_end, flushed)
        if progressed or self.done:
            self.host.log("applied", self.report.as_dict())
        if self.done:
            self.close()
        return not eof and not self.done

    def _read(self, start: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``start``; those once seen as a partial frame read twice.

        A recovering writer cuts a partial frame and writes the next frames from there: a
        read that began before the cut and ended after it holds old bytes joined to new
        ones. Reading the formerly partial bytes again tells: unchanged, no cut happened
        under the read (or it wrote the same bytes); changed, the read is repeated.
        """
        assert self.file is not None
        fd = self.file.fileno()
        for _ in range(READ_ATTEMPTS):
            chunk = os.pread(fd, size, start)
            seen = min(self.partial_end, start + len(chunk)) - start
            if seen <= 0 or os.pread(fd, seen, start) == chunk[:seen]:
                return chunk
        raise CheckpointError(
            f"{self.name}, byte {start}: the bytes there changed on each of {READ_ATTEMPTS} reads; "
            "a writer keeps rewriting the log"
        )

    def _check_file(self) -> None:
        """Stop on a log that was replaced or shrank below what was read from it."""
        assert self.file is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise log_removed(self.name) from None
        size = st.st_size
        self.report.size = size
        if st.st_ino != self.ino:
            raise CheckpointError(
                f"{self.name}: the log was replaced by another file (inode changed) while being tailed"
            )
        if size < self.buf_offset:
            raise self._shrank(size)
        self._check_content()

    def _check_content(self) -> None:
        """Stop on a log whose first frame, or bytes just before the read position, changed."""
        assert self.file is not None
        fd = self.file.fileno()
        start = os.pread(fd, len(self.start_bytes), 0)
        if start != self.start_bytes:
            if len(start) < len(self.start_bytes):  # cut back after the size was taken above
                raise self._shrank(os.fstat(fd).st_size)
            raise log_replaced(self.name)
        # A writer only appends: the bytes just before the read position never change. If
        # they did, the log was cut back and written again past the old end (the size
        # check cannot see that), and decoding on from here would read another log.
        n = len(self.seen_tail)
        if n:
            sample = os.pread(fd, n, self.buf_offset - n)
            if sample != self.seen_tail:
                if len(sample) < n:  # cut back after the size was taken above
                    raise self._shrank(os.fstat(fd).st_size)
                raise CheckpointError(
                    f"{self.name}, byte {self.buf_offset - n}: bytes already decoded changed: the log was rewritten"
                )

    def _shrank(self, size: int) -> CheckpointError:
        return log_shrank(self.name, size, self.buf_offset)

    def _consumed(self, data: bytes | bytearray) -> None:
        """Move the read position past ``data`` (bytes handed to the decoder)."""
        self.buf_offset += len(data)
        if len(data) >= TAIL_SAMPLE:
            self.seen_tail = bytes(data[-TAIL_SAMPLE:])
        else:
            self.seen_tail = (self.seen_tail + bytes(data))[-TAIL_SAMPLE:]

    def _feed_frames(self) -> bool:
        """Feed the decoder every whole frame in the buffer; keep a trailing partial one."""
        assert self.decoder is not None
        buf = self.buf
        pos, malformed = whole_frames(buf, self.options.limits.max_frame_bytes)
        if malformed:
            # Whole frames first, then the bad bytes: the decoder raises its own error with
            # the rule after the events of the frames before it.
            pos = len(buf)
        if pos < len(buf):
            header = read_varint(buf, pos, len(buf))
            self.frame_need = 0 if header is None else header[1] - pos + header[0]
        else:
            self.frame_need = 0
        if pos == 0:
            return False
        self.decoder.feed(bytes(buf[:pos]))
        self._consumed(buf[:pos])
        del buf[:pos]
        return self._drain()

    def _drain(self) -> bool:
        """Decode what the decoder holds and hand complete units on."""
        assert self.decoder is not None and self.applier is not None
        pending, units = self.pending, self.units
        before = len(pending)
        try:
            for event in self.decoder:
                pending.append(event)
                # The decoder has checked the rules already: this only follows them.
                units.read(event)
                if units.between_units:
                    self.cut = len(pending)
        except DecodeError:
            # The complete units before a bad frame are applied (docs/design.md §2), then the error.
            self._hand_on(final=False)
            self.applier.pause()
            raise
        progressed = len(pending) > before
        self._hand_on(final=False)
        return progressed

    def _hand_on(self, *, final: bool) -> None:
        """Pass the events up to the last unit boundary (all of them at the end) to the applier."""
        assert self.applier is not None
        pending = self.pending
        if not pending:
            return
        cut = len(pending) if final or len(pending) > self.options.hold_events else self.cut
        if cut == 0:
            return
        batch = pending[:cut]
        del pending[:cut]
        self.cut = max(0, self.cut - cut)
        self.boundary = not pending and self.units.between_patches
        self.applier.feed(batch)

    def _update_lag(self, now: float, read_end: int, flushed: bool) -> None:
        report = self.report
        if flushed and not self.pending:
            applied = self.buf_offset
        elif self.pending:
            applied = self.pending[0].offset
        else:
            applied = report.applied_end
        report.applied_end = applied
        report.lag_bytes = max(0, report.size - applied)
        if report.lag_bytes == 0:
            self.waiting_since = None
            report.lag_seconds = 0.0
        else:
            if self.waiting_since is None:
                self.waiting_since = now
            report.lag_seconds = now - self.waiting_since

    # -- losing the target, failing, closing -------------------------------------------

    def reset(self) -> None:
        """Forget the decoder, applier and read position (the target was lost); keep the lock.

        The next pass opens the source again from the reopened target's checkpoint (or a
        snapshot not ahead of it), exactly as a restarted daemon would.
        """
        if self.done or self.failed:
            return
        self._disconnect()
        self.decoder = None
        self.applier = None
        self.pending.clear()
        self.units.reset()
        self.cut = 0
        self.buf.clear()
        self.buf_offset = 0
        self.frame_need = 0
        self.partial_end = 0
        self.seen_tail = b""
        self.boundary = True
        self.report.state = "starting"

    def _disconnect(self) -> None:
        """Close the file (the lock is kept)."""
        if self.file is not None:
            self.file.close()
            self.file = None


__all__ = ["READ_BUDGET", "FileFollower"]
