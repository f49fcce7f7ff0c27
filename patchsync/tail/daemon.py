"""The tail daemon: keeps a target in step with ``.jellyp`` logs while producers append to them.

Theory of operation. Each log file is a *source* with one live :class:`PatchDecoder` and
one :class:`Applier` for the life of the daemon, so bytes appended to the file are decoded
once, incrementally. The daemon cuts whole frames out of the bytes it reads (a varint
length and that many bytes) and feeds the decoder only whole frames. A partial frame at
the end of the file is not kept: it is read again on the next pass, because a writer that
crashed mid-frame leaves it to be truncated by the next writer (:class:`LogAppender` cuts
a trailing partial frame before appending) and other bytes take its place. The decoder is
never closed while the file can grow; it is closed when the file is finished, i.e. a later
file of its directory exists (DESIGN §6).

Units reach the applier whole: decoded events are held back after the last unit boundary
(``TC``, ``TA``, patch end), so a transaction still being written never keeps the
database transaction open while the daemon waits, and every complete unit is committed
(and flushed, DESIGN §2/§3) as soon as the input pauses. A transaction larger than
``hold_events`` is passed through anyway and stays open in the applier until its end
arrives; only then is the target flushed.

Waiting: watchdog's observer (inotify; a polling observer with ``poll=True``) and signals
write a byte to a pipe; the main loop blocks in ``select`` on it with a timeout, so an
idle daemon sleeps. SIGTERM/SIGINT set a flag; the daemon ends the pass it is in (only
whole units were handed to the applier), flushes and returns.

Restart: each source resumes from its checkpoint in the target. With a state directory
the daemon also keeps a *snapshot* per source: the decoder's state (lookup tables,
repeated terms, position; not its caches of built terms) at a frame boundary between
patches, with the checkpoint it was taken at, written every few seconds and at exit, as
checksummed JSON (:mod:`patchsync.tail.snapshot`; never pickle, so a writable state directory
cannot make the daemon run code). On restart a snapshot whose log (fingerprint and the
bytes before its offset) matches and whose checkpoint is not ahead of the target's
resumes decoding at its byte offset, so resuming costs the same however long the log is;
any other snapshot is ignored with one ``snapshot_ignored`` log line and the log is
decoded from its start while the applier passes over everything up to the checkpoint
(always correct, just slower). A snapshot is only an accelerator: the checkpoint in the
target stays the single source of truth. Failing to write one (disk full) is logged, not
fatal.

Target unavailable: with ``reopen`` (the CLI always gives it), an error that means the
target is out of reach for now (:func:`is_transient`: a PostgreSQL connection dropped or
refused, the server restarting, SQLite locked beyond its busy timeout) does not stop the
daemon. It discards the target (the open database transaction is lost together with the
checkpoint written in it), logs ``target_unavailable``, waits with exponential backoff and
jitter (0.2 s doubling up to ``retry_max_delay``), reopens the target, and every source
resumes from the reopened target's checkpoint exactly as after a restart: nothing is
applied twice and nothing is lost. After ``retry_timeout`` seconds of failures it gives up
with :class:`TargetUnavailable`.

Errors: a log that shrank below what was applied, whose first bytes changed (it was
replaced), whose bytes before the read position changed (cut back and rewritten), and any
decode, chain or apply error that is not transient stop that source with one message.
Without ``keep_going`` the daemon stops; with it the other sources continue and the failure is
recorded in the state directory's ``status.json`` (shown by ``patchsync status``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchsync.apply.api import FINGERPRINT_BYTES
from patchsync.apply.api import fingerprint as log_fingerprint
from patchsync.apply.applier import Applier, ApplyResult
from patchsync.apply.target import Checkpoint, Target
from patchsync.codec.framing import Framer, read_varint
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import ApplyError, CheckpointError, DecodeError, PatchsyncError, TargetUnavailable, UsageError
from patchsync.events import Event, PatchEnd, TxAbort, TxCommit
from patchsync.options import Limits
from patchsync.tail.snapshot import ANCHOR_BYTES, MAX_SNAPSHOT_BYTES, SnapshotError, decode_snapshot, encode_snapshot

#: Bytes read from one source per pass, so one busy log cannot starve the others or a signal.
READ_BUDGET = 8 << 20
#: Bytes compared at the start of a log to notice it was replaced under the daemon.
HEAD_SAMPLE = 4096
#: Bytes before the read position compared on every pass to notice a log rewritten there.
TAIL_SAMPLE = 64
#: Events of an unfinished unit held back before they are passed to the applier anyway.
HOLD_EVENTS = 100_000
#: Seconds between snapshots of a source's decoder state.
SNAPSHOT_SECONDS = 5.0
#: Seconds between rewrites of the state directory's status.json while running.
STATUS_SECONDS = 1.0
#: First wait before reopening a target that became unavailable; doubled per failed attempt.
RETRY_INITIAL_SECONDS = 0.2
#: Longest single wait between two attempts to reopen the target.
RETRY_MAX_DELAY = 30.0
#: Seconds the target may stay unavailable before the daemon gives up (exit 1).
RETRY_TIMEOUT = 600.0

_BOUNDARY = (PatchEnd, TxCommit, TxAbort)


Log = Callable[[str, dict[str, Any]], None]


def _no_log(_event: str, _fields: dict[str, Any]) -> None:
    pass


@dataclass
class SourceReport:
    """Where one source stands: applied counts, position and lag."""

    source: str
    state: str = "starting"  # starting, live, finished, failed
    result: ApplyResult = field(default_factory=ApplyResult)
    size: int = 0
    applied_end: int = 0
    lag_bytes: int = 0
    lag_seconds: float = 0.0
    error: str | None = None
    resumed_from: int = 0

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "source": self.source,
            "state": self.state,
            "units": r.units,
            "rows": r.rows,
            "patches": r.patches,
            "size": self.size,
            "applied_end": self.applied_end,
            "lag_bytes": self.lag_bytes,
            "lag_seconds": round(self.lag_seconds, 3),
            "error": self.error,
        }


class _Source:
    """One log file being tailed: file handle, frame buffer, decoder and applier."""

    def __init__(self, tailer: Tailer, path: Path) -> None:
        self.tailer = tailer
        self.path = path
        self.name = str(path.resolve())
        self.report = SourceReport(self.name, result=ApplyResult(source=self.name))
        self.file: Any = None
        self.ino: int | None = None
        self.buf = bytearray()  # bytes read but not yet fed: a partial frame at most
        self.buf_base = 0  # file offset of buf[0]
        self.seen_tail = b""  # the last bytes before buf_base, to notice a rewrite there
        self.decoder: PatchDecoder[Any] | None = None
        self.applier: Applier | None = None
        self.pending: list[Event] = []  # decoded events of a unit not yet complete
        self.fingerprint: str | None = None
        self.head: bytes = b""
        self.single = False  # a bare, non-delimited frame: decoded only once finished
        self.finished = False
        self.done = False
        self.failed = False
        self.boundary = True  # the last event handed on ended a patch (snapshot point)
        self.waiting_since: float | None = None
        self.last_snapshot = 0.0
        self.lock_fd: int | None = None

    # -- opening and resuming ----------------------------------------------------------

    def open(self) -> bool:
        """Open the file and set up decoding once its first frame exists; False if not yet."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - held open for the daemon's life
        except FileNotFoundError:
            return False
        # The same bytes apply_file fingerprints, so tail and apply share checkpoints.
        data = f.read(FINGERPRINT_BYTES)
        framer = Framer(source=self.name, max_frame_bytes=1 << 62)
        framer.feed(data)
        try:
            first = framer.next_frame()
        except DecodeError:
            first = None
        if first is None and not self.finished:
            # Not one whole frame yet (or a bare frame, complete only once finished).
            f.close()
            return False
        self.file = f
        self.ino = os.fstat(f.fileno()).st_ino
        self.single = framer.framing == "single"
        self.fingerprint = log_fingerprint(data, "jellyp")
        self.head = data[: min(HEAD_SAMPLE, framer.offset or len(data))]
        tailer = self.tailer
        self._lock()
        self.applier = Applier(
            tailer.target, source=self.name, fingerprint=self.fingerprint, chain=tailer.chain, reset=tailer.reset
        )
        self.applier.result = self.report.result
        stored = tailer.target.checkpoint(self.name)
        size = os.fstat(f.fileno()).st_size
        if stored is not None and stored.offset >= size and not tailer.reset:
            raise CheckpointError(
                f"{self.name}, byte {size}: the log shrank below its checkpoint (byte {stored.offset}); "
                "it was truncated or rewritten"
            )
        start = self._load_snapshot(stored)
        if start is None:
            self.decoder = PatchDecoder(tailer.target.adapter, source=self.name, limits=tailer.limits)
            start = 0
        self.buf_base = start
        self.seen_tail = os.pread(f.fileno(), min(start, TAIL_SAMPLE), start - min(start, TAIL_SAMPLE))
        self.report.resumed_from = start
        self.report.applied_end = start
        self.report.state = "live"
        tailer.log("resume", {"source": self.name, "from_byte": start, **_cp_fields(stored)})
        return True

    def _lock(self) -> None:
        """Take the per-source lock of the state directory, so two daemons cannot both apply it."""
        state_dir = self.tailer.state_dir
        if state_dir is None or self.lock_fd is not None:
            return  # held already: a reconnect to the target keeps the source's lock
        key = hashlib.sha256(self.name.encode()).hexdigest()[:24]
        path = state_dir / f"{key}.lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ApplyError(f"{self.name}: cannot create the lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ApplyError(f"{self.name}: another tail daemon is applying this log to the target") from None
        self.lock_fd = fd

    def _snapshot_path(self) -> Path | None:
        state_dir = self.tailer.state_dir
        if state_dir is None:
            return None
        return state_dir / f"{hashlib.sha256(self.name.encode()).hexdigest()[:24]}.snapshot"

    def _load_snapshot(self, stored: Checkpoint | None) -> int | None:
        """Install a saved decoder state if it is valid for the target's checkpoint; its offset.

        Any snapshot that cannot be used is ignored with one log line: decoding from the
        start of the log is always correct (the checkpoint is authoritative).
        """
        path = self._snapshot_path()
        if path is None or stored is None or self.tailer.reset:
            return None
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size > MAX_SNAPSHOT_BYTES:
                    raise SnapshotError(f"larger than {MAX_SNAPSHOT_BYTES} bytes")
                data = f.read()
        except FileNotFoundError:
            return None
        except (OSError, SnapshotError) as exc:
            self._snapshot_ignored(path, str(exc))
            return None
        try:
            snap = decode_snapshot(data, self.tailer.target.adapter, source=self.name, limits=self.tailer.limits)
        except SnapshotError as exc:
            self._snapshot_ignored(path, str(exc))
            return None
        # Valid only for this very log, and only if the target got at least as far as the
        # snapshot: the snapshot sits between patches with every event before it applied,
        # so the applier passes over the events from there up to the checkpoint.
        if snap.fingerprint != self.fingerprint:
            self._snapshot_ignored(path, "taken for another log with the same name (fingerprint differs)")
            return None
        assert self.file is not None
        anchor = os.pread(self.file.fileno(), snap.anchor_len, snap.offset - snap.anchor_len)
        if not snap.anchored_in(anchor):
            self._snapshot_ignored(path, "taken for another log (the bytes before its offset differ)")
            return None
        if (stored.offset, stored.row) < snap.checkpoint:
            self._snapshot_ignored(path, "ahead of the target's checkpoint (the target was restored from a copy?)")
            return None
        self.decoder = snap.decoder
        return snap.offset

    def _snapshot_ignored(self, path: Path, reason: str) -> None:
        self.tailer.log("snapshot_ignored", {"source": self.name, "snapshot": str(path), "reason": reason})

    def save_snapshot(self, now: float) -> None:
        """Persist the decoder state if everything decoded so far is applied and no patch is open.

        A snapshot that cannot be written (disk full, read-only state directory) is logged
        and skipped: it only speeds up a restart.
        """
        path = self._snapshot_path()
        applier, decoder = self.applier, self.decoder
        if path is None or applier is None or decoder is None or self.pending or not self.boundary or self.single:
            return
        cp = self.tailer.target.checkpoint(self.name)
        if cp is None or self.fingerprint is None:
            return
        if self.file is None:
            return
        offset = decoder.offset
        anchor = os.pread(self.file.fileno(), min(offset, ANCHOR_BYTES), offset - min(offset, ANCHOR_BYTES))
        try:
            data = encode_snapshot(
                decoder, source=self.name, fingerprint=self.fingerprint, checkpoint=(cp.offset, cp.row), anchor=anchor
            )
        except SnapshotError:
            return
        self.last_snapshot = now
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            self.tailer.log_once("snapshot_failed", {"source": self.name, "error": exc.strerror or str(exc)})

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
        # A partial frame is read again on every pass rather than kept: if its writer
        # crashed, the next writer truncates it and writes other bytes in its place.
        self.buf.clear()
        self._check_file()
        progressed = False
        budget = READ_BUDGET
        read_end = self.buf_base
        while budget > 0 and not self.tailer.stopping:
            self.file.seek(read_end)
            chunk = self.file.read(min(budget, 1 << 20))
            if not chunk:
                break
            budget -= len(chunk)
            read_end += len(chunk)
            self.buf += chunk
            if not self.single:
                progressed |= self._feed_frames()
        eof = budget > 0
        self.report.size = max(self.report.size, read_end)
        if eof and self.finished and not self.tailer.stopping:
            # A later file exists: this one is complete, a trailing partial frame is an error.
            decoder = self.decoder
            if not self.buf and applier.pause():
                # Snapshot the end of a finished file, so a restart does not decode it again.
                self.save_snapshot(now)
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
            # --retry-timeout clock (a backlog drained through flapping connections is
            # progress, not one long outage).
            self.tailer._backoff.reset()
        self._update_lag(now, read_end, flushed)
        if progressed or self.done:
            self.tailer.log("applied", self.report.as_dict())
        if self.done:
            self.close()
        return not eof and not self.done

    def _check_file(self) -> None:
        """Stop on a log that was replaced or shrank below what was read from it."""
        assert self.file is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise CheckpointError(f"{self.name}: the log was removed while being tailed") from None
        size = st.st_size
        self.report.size = size
        if st.st_ino != self.ino:
            raise CheckpointError(
                f"{self.name}: the log was replaced by another file (inode changed) while being tailed"
            )
        if size < self.buf_base:
            raise CheckpointError(
                f"{self.name}, byte {size}: the log shrank below what was already decoded (byte {self.buf_base}); "
                "it was truncated or rewritten"
            )
        head = os.pread(self.file.fileno(), len(self.head), 0)
        if head != self.head:
            raise CheckpointError(f"{self.name}, byte 0: the log's first frame changed: it was replaced")
        # A writer only appends: the bytes just before the read position never change. If
        # they did, the log was cut back and written again past the old end (the size
        # check cannot see that), and decoding on from here would read another log.
        n = len(self.seen_tail)
        if n and os.pread(self.file.fileno(), n, self.buf_base - n) != self.seen_tail:
            raise CheckpointError(
                f"{self.name}, byte {self.buf_base - n}: bytes already decoded changed: the log was rewritten"
            )

    def _consumed(self, data: bytes | bytearray) -> None:
        """Move the read position past ``data`` (bytes handed to the decoder)."""
        self.buf_base += len(data)
        if len(data) >= TAIL_SAMPLE:
            self.seen_tail = bytes(data[-TAIL_SAMPLE:])
        else:
            self.seen_tail = (self.seen_tail + bytes(data))[-TAIL_SAMPLE:]

    def _feed_frames(self) -> bool:
        """Feed the decoder every whole frame in the buffer; keep a trailing partial one."""
        assert self.decoder is not None
        buf = self.buf
        pos = 0
        end = len(buf)
        limit = self.tailer.limits.max_frame_bytes
        bad = False
        while pos < end:
            try:
                header = read_varint(buf, pos, end)
            except ValueError:
                bad = True
                break
            if header is None:
                break
            length, start = header
            if length > limit:
                bad = True
                break
            if start + length > end:
                break
            pos = start + length
        if bad:
            # Whole frames first, then the bad bytes: the decoder raises its own error with
            # the rule after the events of the frames before it.
            pos = end
        if pos == 0:
            return False
        self.decoder.feed(bytes(buf[:pos]))
        self._consumed(buf[:pos])
        del buf[:pos]
        return self._drain()

    def _drain(self) -> bool:
        """Decode what the decoder holds and hand complete units on."""
        assert self.decoder is not None and self.applier is not None
        before = len(self.pending)
        try:
            self.pending.extend(self.decoder)
        except DecodeError:
            # The complete units before a bad frame are applied (DESIGN §2), then the error.
            self._hand_on(final=False)
            self.applier.pause()
            raise
        progressed = len(self.pending) > before
        self._hand_on(final=False)
        return progressed

    def _hand_on(self, *, final: bool) -> None:
        """Pass the events up to the last unit boundary (all of them at the end) to the applier."""
        assert self.applier is not None
        pending = self.pending
        if not pending:
            return
        if final or len(pending) > self.tailer.hold_events:
            cut = len(pending)
        else:
            cut = 0
            for i in range(len(pending) - 1, -1, -1):
                if type(pending[i]) in _BOUNDARY:
                    cut = i + 1
                    break
            if cut == 0:
                return
        batch = pending[:cut]
        del pending[:cut]
        self.boundary = type(batch[-1]) is PatchEnd and not pending
        self.applier.feed(batch)

    def _update_lag(self, now: float, read_end: int, flushed: bool) -> None:
        report = self.report
        if flushed and not self.pending:
            applied = self.buf_base
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

    def reset(self) -> None:
        """Forget the decoder, applier and read position (the target was lost); keep the lock.

        The next pass opens the source again from the reopened target's checkpoint (or a
        snapshot not ahead of it), exactly as a restarted daemon would.
        """
        if self.done or self.failed:
            return
        if self.file is not None:
            self.file.close()
            self.file = None
        self.decoder = None
        self.applier = None
        self.pending.clear()
        self.buf.clear()
        self.buf_base = 0
        self.seen_tail = b""
        self.boundary = True
        self.report.state = "starting"

    def fail(self, exc: BaseException) -> None:
        self.failed = True
        self.report.state = "failed"
        self.report.error = str(exc)
        self.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


class _TargetLost(Exception):
    """Internal: the target became unavailable during a pass (unwinds to the main loop)."""

    def __init__(self, error: PatchsyncError) -> None:
        super().__init__(str(error))
        self.error = error


class Backoff:
    """Exponential backoff with jitter, bounded per wait (``max_delay``) and in total (``timeout``).

    The clock starts at the first :meth:`next_delay` after a :meth:`reset`, so a target
    that keeps failing right after each reopen still reaches the timeout.
    """

    def __init__(
        self,
        *,
        initial: float = RETRY_INITIAL_SECONDS,
        max_delay: float = RETRY_MAX_DELAY,
        timeout: float = RETRY_TIMEOUT,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or max_delay < initial or timeout < 0:
            raise UsageError("retry delays must be positive, the longest at least the first, the timeout >= 0")
        self.initial = initial
        self.max_delay = max_delay
        self.timeout = timeout
        self.rng = rng or random.Random()
        self.attempt = 0
        self.since: float | None = None

    def reset(self) -> None:
        """The target works again."""
        self.attempt = 0
        self.since = None

    def elapsed(self, now: float) -> float:
        return 0.0 if self.since is None else now - self.since

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: give up."""
        if self.since is None:
            self.since = now
        left = self.timeout - (now - self.since)
        if left <= 0:
            return None
        self.attempt += 1
        # Full doubling up to the cap, then a random half of it off, so daemons that lost
        # the same server do not all come back in the same instant.
        cap = min(self.max_delay, self.initial * 2.0 ** min(self.attempt - 1, 60))
        return min(left, cap * self.rng.uniform(0.5, 1.0))


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means the target is out of reach for now (see :class:`TargetUnavailable`).

    Looks through the exceptions ``exc`` was raised from: the applier wraps target errors
    in its own message, and a target failing to open wraps the driver's error.
    """
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, TargetUnavailable):
            return True
        if type(current).__module__.split(".")[0] in ("sqlalchemy", "psycopg", "sqlite3"):
            from patchsync.apply.targets.sql.target import is_transient as sql_transient

            return sql_transient(current)
        current = current.__cause__ or current.__context__
    return False


def open_retrying(
    opener: Callable[[], Target],
    *,
    retry_max_delay: float = RETRY_MAX_DELAY,
    retry_timeout: float = RETRY_TIMEOUT,
    log: Log | None = None,
) -> Target:
    """``opener()``, retried with backoff while it fails with a transient error (a locked or
    restarting database at the daemon's start)."""
    backoff = Backoff(max_delay=retry_max_delay, timeout=retry_timeout)
    while True:
        try:
            return opener()
        except PatchsyncError as exc:
            if not is_transient(exc):
                raise
            delay = backoff.next_delay(time.monotonic())
            if delay is None:
                raise
            (log or _no_log)(
                "target_unavailable", {"error": str(exc), "attempt": backoff.attempt, "retry_in": round(delay, 3)}
            )
            time.sleep(delay)


def _cp_fields(cp: Checkpoint | None) -> dict[str, Any]:
    if cp is None:
        return {"checkpoint": "none"}
    return {"cp_offset": cp.offset, "cp_frame": cp.frame, "cp_row": cp.row, "cp_patches": cp.patches}


def lag_bytes(path: str | os.PathLike[str], checkpoint: Checkpoint) -> int | None:
    """Bytes of ``path`` after the frame holding the checkpoint (``None`` if unreadable).

    Rows of that frame after the checkpoint are not counted: the frame is the unit of
    reading, and a frame's rows are applied together unless a transaction spans frames.
    """
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = os.pread(f.fileno(), 10, checkpoint.offset)
    except OSError:
        return None
    try:
        parsed = read_varint(header, 0, len(header))
    except ValueError:
        parsed = None
    end = checkpoint.offset + (parsed[1] + parsed[0] if parsed is not None else 0)
    return max(0, size - end)


def read_status(state_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The per-source records of the last daemon that used ``state_dir`` (empty if none)."""
    try:
        data = json.loads((Path(state_dir) / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for rec in data.get("sources", []) if isinstance(data, dict) else []:
        if isinstance(rec, dict) and "source" in rec:
            rec["pid"] = data.get("pid")
            rec["updated_at"] = data.get("updated_at")
            out[str(rec["source"])] = rec
    return out


def default_state_dir(target_spec: str) -> Path | None:
    """Where the daemon keeps locks, snapshots and status for a target named on the CLI.

    Next to the store for SQLite (``DB.tail``), file and Oxigraph targets; ``None``
    (no snapshots, status or lock files) for other targets unless given explicitly.
    """
    for prefix in ("sqlite:///", "file:", "oxigraph:"):
        if target_spec.startswith(prefix):
            rest = target_spec[len(prefix) :].split("?", 1)[0]
            if rest and rest != ":memory:":
                return Path(rest + ".tail")
    return None


class Tailer:
    """Tails ``.jellyp`` logs (files or directories of them) into ``target`` (module docstring).

    ``paths`` are log files or directories; ``chain`` the chain policy; ``state_dir`` holds
    per-source locks, decoder snapshots and ``status.json`` (``None``: none of them);
    ``poll`` uses watchdog's polling observer, ``poll_interval`` is also the longest the
    daemon sleeps without a file event; ``log`` receives structured log records.

    ``reopen`` opens the target anew: with it, a target that becomes unavailable
    (:func:`is_transient`) is discarded and reopened after a backoff (exponential from
    ``RETRY_INITIAL_SECONDS`` up to ``retry_max_delay``, with jitter), and every source
    resumes from the reopened target's checkpoint; after ``retry_timeout`` seconds without
    success :class:`TargetUnavailable` is raised. Without it such errors stop the daemon.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        target: Target,
        *,
        chain: str = "strict",
        reset: bool = False,
        keep_going: bool = False,
        state_dir: str | os.PathLike[str] | None = None,
        poll: bool = False,
        poll_interval: float = 1.0,
        limits: Limits | None = None,
        hold_events: int = HOLD_EVENTS,
        snapshot_seconds: float = SNAPSHOT_SECONDS,
        log: Log | None = None,
        reopen: Callable[[], Target] | None = None,
        retry_max_delay: float = RETRY_MAX_DELAY,
        retry_timeout: float = RETRY_TIMEOUT,
    ) -> None:
        if not paths:
            raise UsageError("tail needs at least one log file or directory")
        self.paths = [Path(p) for p in paths]
        for p in self.paths:
            if not p.is_dir() and p.suffix.lower() != ".jellyp":
                raise UsageError(f"{p}: tail reads Jelly-Patch logs (.jellyp) or directories of them")
            if not p.exists() and not p.parent.is_dir():
                raise UsageError(f"{p}: no such file or directory")
        self.target = target
        self.chain = chain
        self.reset = reset
        self.keep_going = keep_going
        self.state_dir = Path(state_dir) if state_dir is not None else None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
        self.poll = poll
        self.poll_interval = poll_interval
        self.limits = limits or Limits()
        self.hold_events = hold_events
        self.snapshot_seconds = snapshot_seconds
        self.log: Log = log or _no_log
        self.stopping = False
        self.sources: dict[Path, _Source] = {}
        self._order: list[_Source] = []
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._observer: Any = None
        self._status_at = -1e9
        self.reopen = reopen
        self._backoff = Backoff(max_delay=retry_max_delay, timeout=retry_timeout)
        self._logged: set[tuple[str, str]] = set()
        self.reconnects = 0

    # -- control -----------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the daemon to stop after the current pass (safe from a signal handler)."""
        self.stopping = True
        self.wake()

    def wake(self) -> None:
        """Wake the main loop (from the observer thread or a signal handler)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")

    def _wait(self, timeout: float) -> None:
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._wake_r, 4096):
                pass

    # -- discovery ---------------------------------------------------------------------

    def _discover(self) -> None:
        """Find the log files; in a directory, every file before the newest is finished."""
        for p in self.paths:
            if p.is_dir():
                files = sorted(f for f in p.iterdir() if f.suffix.lower() == ".jellyp" and f.is_file())
                for i, f in enumerate(files):
                    src = self._source(f)
                    if i < len(files) - 1:
                        src.finished = True
            else:
                self._source(p)

    def _source(self, path: Path) -> _Source:
        src = self.sources.get(path)
        if src is None:
            src = self.sources[path] = _Source(self, path)
            self._order.append(src)
        return src

    # -- running -----------------------------------------------------------------------

    def run_once(self) -> list[SourceReport]:
        """Apply what the logs hold now and return (the ``--once`` mode); raises on a failed source."""
        with self._signals():
            while not self.stopping:
                if self._step(time.monotonic()):
                    continue
                try:
                    self._finish()
                    return self.reports()
                except _TargetLost as lost:
                    self._reconnect(lost.error)
            self._finish_on_stop()
        return self.reports()

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGTERM/SIGINT ask for a stop instead of killing the process mid-unit."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, lambda _s, _f: self.stop()) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def run(self, *, install_signals: bool = True) -> list[SourceReport]:
        """Tail until stopped (SIGTERM/SIGINT or :meth:`stop`), then flush and return."""
        with self._signals() if install_signals else contextlib.nullcontext():
            self._loop()
        for src in self._order:
            self.log("summary", src.report.as_dict())
        self.log("stop", {"sources": len(self._order)})
        return self.reports()

    def _loop(self) -> None:
        try:
            self._start_observer()
            self.log("start", {"paths": [str(p) for p in self.paths], "observer": self._observer_kind()})
            while not self.stopping:
                if self._step(time.monotonic()):
                    continue  # a backlog (or a reopened target): read on without waiting
                if self.stopping:
                    break
                self._wait(self.poll_interval)
            self._finish_on_stop()
        finally:
            self._stop_observer()
            self.close()

    def _step(self, now: float) -> bool:
        """One pass; after losing the target, reconnect and ask for another pass at once."""
        try:
            more = self._pass(now)
        except _TargetLost as lost:
            self._reconnect(lost.error)
            return True
        self._backoff.reset()  # a whole pass worked: the next loss starts a new backoff
        return more

    def _pass(self, now: float) -> bool:
        """Pump every source once; returns whether one of them has bytes left to read."""
        self._discover()
        more = False
        for src in list(self._order):
            if self.stopping:
                break
            try:
                more |= src.pump(now)
                if now - src.last_snapshot >= self.snapshot_seconds:
                    src.save_snapshot(now)
            except PatchsyncError as exc:
                if self.reopen is not None and is_transient(exc):
                    raise _TargetLost(exc) from exc
                src.fail(exc)
                self.log("failed", src.report.as_dict())
                self._write_status(now)
                if not self.keep_going:
                    raise
        if now - self._status_at >= STATUS_SECONDS:
            self._write_status(now)
        return more

    def _finish(self) -> None:
        now = time.monotonic()
        for src in self._order:
            if src.applier is not None and not src.failed:
                try:
                    src.applier.pause()
                    src.save_snapshot(now)
                except PatchsyncError as exc:
                    if self.reopen is not None and is_transient(exc):
                        raise _TargetLost(exc) from exc
                    raise
        self._write_status(now)

    def _finish_on_stop(self) -> None:
        # Stopping with the target out of reach loses nothing: the units of the open
        # database transaction went with it, with their checkpoint, and are applied again
        # on the next start.
        try:
            self._finish()
        except _TargetLost as lost:
            self.log("stop_without_flush", {"error": str(lost.error)})
            self._drop_target()
            self._write_status(time.monotonic())

    # -- losing and reopening the target -----------------------------------------------

    def _drop_target(self) -> None:
        discard = getattr(self.target, "discard", None)
        with contextlib.suppress(Exception):
            (discard or self.target.close)()
        for src in self._order:
            src.reset()

    def _reconnect(self, error: BaseException) -> None:
        """Discard the target, wait with backoff, reopen it; every source then resumes."""
        assert self.reopen is not None
        self._drop_target()
        while True:
            delay = self._backoff.next_delay(time.monotonic())
            if delay is None:
                raise TargetUnavailable(
                    f"the target stayed unavailable for {self._backoff.elapsed(time.monotonic()):.1f}s "
                    f"(--retry-timeout {self._backoff.timeout:g}); giving up. Last error: {error}"
                ) from error
            self.log(
                "target_unavailable",
                {"error": str(error), "attempt": self._backoff.attempt, "retry_in": round(delay, 3)},
            )
            deadline = time.monotonic() + delay
            while not self.stopping and (left := deadline - time.monotonic()) > 0:
                self._wait(left)  # file events wake it too: wait out the rest
            if self.stopping:
                return
            try:
                self.target = self.reopen()
            except PatchsyncError as exc:
                if not is_transient(exc):
                    raise
                error = exc
                continue
            self.reconnects += 1
            self.log("reconnected", {"attempt": self._backoff.attempt, "reconnects": self.reconnects})
            return

    def log_once(self, event: str, fields: dict[str, Any]) -> None:
        """Log ``event`` only the first time for its source (for repeating, harmless failures)."""
        key = (event, str(fields.get("source", "")))
        if key not in self._logged:
            self._logged.add(key)
            self.log(event, fields)

    def reports(self) -> list[SourceReport]:
        """The state of every source."""
        return [s.report for s in self._order]

    def _write_status(self, now: float) -> None:
        self._status_at = now
        if self.state_dir is None:
            return
        data = {"updated_at": time.time(), "pid": os.getpid(), "sources": [s.report.as_dict() for s in self._order]}
        tmp = self.state_dir / "status.json.tmp"
        try:
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self.state_dir / "status.json")
        except OSError as exc:
            # Status is for `patchsync status`; a full or read-only state directory must
            # not stop the daemon (the target's own errors do, with their own message).
            self.log_once("status_failed", {"error": exc.strerror or str(exc)})

    # -- observer ----------------------------------------------------------------------

    def _observer_kind(self) -> str:
        return type(self._observer).__name__ if self._observer is not None else "none"

    def _start_observer(self) -> None:
        try:
            from watchdog.events import FileSystemEvent, FileSystemEventHandler
            from watchdog.observers import Observer
            from watchdog.observers.polling import PollingObserver
        except ImportError:
            # Without watchdog the daemon still works: it wakes every poll_interval.
            return
        tailer = self

        class _Wake(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                tailer.wake()

        dirs = sorted({str(p if p.is_dir() else p.parent) for p in self.paths})
        observer: Any = PollingObserver(timeout=self.poll_interval) if self.poll else Observer()
        try:
            for d in dirs:
                observer.schedule(_Wake(), d, recursive=False)
            observer.start()
        except OSError:
            # inotify limits or a file system without notifications: fall back to polling.
            observer = PollingObserver(timeout=self.poll_interval)
            for d in dirs:
                observer.schedule(_Wake(), d, recursive=False)
            observer.start()
        self._observer = observer

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def close(self) -> None:
        """Release files and locks (the target is the caller's)."""
        for src in self._order:
            src.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1

    def __enter__(self) -> Tailer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tail(
    paths: Sequence[str | os.PathLike[str]],
    target: Target,
    *,
    once: bool = False,
    **options: Any,
) -> list[SourceReport]:
    """Tail logs into ``target`` until stopped (or, with ``once``, apply what is there).

    ``options`` are those of :class:`Tailer`.
    """
    tailer = Tailer(paths, target, **options)
    if once:
        try:
            return tailer.run_once()
        finally:
            tailer.close()
    return tailer.run()


__all__ = [
    "Backoff",
    "SourceReport",
    "Tailer",
    "default_state_dir",
    "is_transient",
    "lag_bytes",
    "open_retrying",
    "read_status",
    "tail",
]
