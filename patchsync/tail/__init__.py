"""The tail daemon: keeps a target in step with ``.jellyp`` logs while producers append to them.

Modules: :mod:`.tailer` (the main loop, :class:`Tailer`, :func:`tail`), :mod:`.follower`
(what the daemon holds for each source it follows), :mod:`.file_follower` (one log file's read
loop), :mod:`.network_follower` (one remote log's: a NATS stream, a gRPC topic or a log served
over HTTP, through :class:`patchsync.remote.interface.RemoteLog`), :mod:`.options` (:class:`TailOptions`), :mod:`.retry` (backoff and
:func:`is_transient`), :mod:`.state` (lock files, ``status.json``), :mod:`.observer`
(wake-ups); decoder snapshots are :mod:`patchsync.logs.resume_point`.

Theory of operation. Each log file is a *source* with one live :class:`PatchDecoder` and
one :class:`Applier` for the life of the daemon, so bytes appended to the file are decoded
once, incrementally. The source cuts whole frames out of the bytes it reads
(:func:`patchsync.codec.framing.whole_frames`) and feeds the decoder only whole frames. A
partial frame at the end of the file is not kept: it is read again on the next pass,
because a writer that crashed mid-frame leaves it to be truncated by the next writer
(:class:`LogAppender` cuts a trailing partial frame before appending) and other bytes take
its place. The decoder is never closed while the file can grow; it is closed when the file
is finished, i.e. a later file of its directory exists (docs/design.md §6). A log is identified by
the fingerprint of its first frame (:mod:`patchsync.logs.fingerprint`), the same one
``patchsync apply`` stores, so both share checkpoints.

Units reach the applier whole: decoded events are held back after the last unit boundary
(``TC``, ``TA``, patch end), so a transaction still being written never keeps the
database transaction open while the daemon waits, and every complete unit is committed
(and flushed, docs/design.md §2/§3) as soon as the input pauses. A transaction larger than
``hold_events`` is passed through anyway and stays open in the applier until its end
arrives; only then is the target flushed.

Waiting: watchdog's observer (inotify; a polling observer with ``poll=True``) and signals
write a byte to a pipe; the main loop blocks in ``select`` on it with a timeout, so an
idle daemon sleeps. SIGTERM/SIGINT set a flag; the daemon ends the pass it is in (only
whole units were handed to the applier), flushes and returns.

Restart: each source resumes from its checkpoint in the target. With a state directory
the daemon also keeps a *snapshot* per source: the decoder's resumable state
(:meth:`PatchDecoder.export_state`: lookup tables, repeated terms, position; not its
caches of built terms) at a frame boundary between patches, with the checkpoint it was
taken at, written every few seconds and at exit, as checksummed JSON
(:mod:`patchsync.logs.resume_point`; never pickle, so a writable state directory cannot make
the daemon run code). On restart a snapshot whose log (fingerprint and the bytes before
its offset) matches and whose checkpoint is not ahead of the target's resumes decoding at
its byte offset (:meth:`PatchDecoder.from_state`), so resuming costs the same however
long the log is; any other snapshot is ignored with one ``snapshot_ignored`` log line and
the log is decoded from its start while the applier passes over everything up to the
checkpoint (always correct, just slower). A snapshot is only an accelerator: the
checkpoint in the target stays the single source of truth. Failing to write one (disk
full) is logged, not fatal.

Target unavailable: with ``reopen`` (the CLI always gives it), an error that means the
target is out of reach for now (:func:`is_transient`: the backend raised
:class:`TargetUnavailable`, e.g. for a PostgreSQL connection dropped or refused, the
server restarting, SQLite locked beyond its busy timeout) does not stop the daemon. It
discards the target (the open database transaction is lost together with the checkpoint
written in it), logs ``target_unavailable`` (``source_unavailable`` when it is a source's
server that is out of reach, :func:`~patchsync.tail.retry.lost_part`; a one-shot run
does not wait for one), waits with exponential backoff and jitter
(0.2 s doubling up to ``retry_max_delay``), reopens the target, and every source resumes
from the reopened target's checkpoint exactly as after a restart: nothing is applied twice
and nothing is lost. After ``retry_timeout`` seconds of failures it gives up with
:class:`TargetUnavailable`.

Errors: a log that shrank below what was applied, whose first bytes changed (it was
replaced), whose bytes before the read position changed (cut back and rewritten), and any
decode, chain or apply error that is not transient stop that source with one message.
Without ``keep_going`` the daemon stops; with it the other sources continue and the
failure is recorded in the state directory's ``status.json`` (shown by ``patchsync
status``).
"""

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes
from patchsync.tail.state import default_state_dir, lag_bytes, read_status

if TYPE_CHECKING:
    from patchsync.tail.follower import SourceReport
    from patchsync.tail.options import TailOptions
    from patchsync.tail.retry import Backoff, is_transient, open_retrying
    from patchsync.tail.tailer import Tailer, tail

# The daemon itself loads on first use: ``patchsync status`` reads the state directory only.
_LAZY = {
    "TailOptions": "patchsync.tail.options",
    "Backoff": "patchsync.tail.retry",
    "is_transient": "patchsync.tail.retry",
    "open_retrying": "patchsync.tail.retry",
    "SourceReport": "patchsync.tail.follower",
    "Tailer": "patchsync.tail.tailer",
    "tail": "patchsync.tail.tailer",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "Backoff",
    "SourceReport",
    "TailOptions",
    "Tailer",
    "default_state_dir",
    "is_transient",
    "lag_bytes",
    "open_retrying",
    "read_status",
    "tail",
]
