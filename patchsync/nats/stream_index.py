"""A NATS stream's patch ids on disk: patch id -> stream sequence, checked against the
stream on opening (docs/decisions/0029-nats-topic-index.md).

The index is a :class:`~patchsync.logs.version_index.VersionIndex` (a file log's index:
SQLite in WAL mode, every row under a CRC-32, a format record), so the rules of reading,
checking and writing an index are one module's. A stream is indexed as a log of one
segment:

- each message is a patch row: its sequence as the version, its patch id
  (:func:`message_id`), segment 0, offset 0; no decoder checkpoints (a message is read by
  its sequence, a direct get);
- the segment record names the stream (:attr:`StreamIndex.name`), carries its fingerprint
  (name and creation time, :meth:`NatsLog.fingerprint`), the last sequence indexed as its
  *size*, the first as its first version, and the id of the last message indexed as its
  *anchor*. Rows and record are committed together: a process killed while writing leaves
  the last committed batch, record included.

:meth:`StreamIndex.sync` checks the index before trusting it: the record must name this
stream with its fingerprint (a stream deleted and created again has another creation
time), the last row must be the record's, and the stream must still hold the last
sequence indexed with that message id (a stream purged, or cut below the index, does
not). Rows of messages the stream's retention removed since (or a purge that kept the
last one indexed) are dropped. Then only the messages after the last one indexed are read;
a new index starts at the stream's first message. An index that fails any of these, or that
SQLite cannot read, or whose rows fail their checksums, is deleted and built again from
the stream's first message, with one warning.

The file is locked (``NAME.idx.lock``) while a process uses it: a second process serving
the same stream with the same index directory keeps its index in memory instead, with a
warning, and never deletes the file under the first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from pathlib import Path

from patchsync.errors import UsageError
from patchsync.logs.patch_logs import exclusive_lock
from patchsync.logs.payloads import MSG_ID, StreamMessage
from patchsync.logs.version_index import IndexCorrupt, PatchRow, SegmentRecord, open_index, remove_index
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.url import StreamURL

log = logging.getLogger("patchsync.index")

#: Messages read at a time while the index catches up with the stream.
READ_BATCH = 1024
#: Rows committed at a time while the index catches up (bounds the memory a build uses).
FLUSH_EVERY = 8192
#: Seconds a read waits for messages the stream info said it holds.
READ_WAIT = 0.5


def message_id(message: StreamMessage) -> str:
    """A message's patch id: its message id header (every publisher sets it), else ``seq:N``."""
    return message.headers.get(MSG_ID) or f"seq:{message.seq}"


def index_file(index_dir: Path, url: StreamURL) -> Path:
    """Where the index of the stream at ``url`` lives in ``index_dir``: the stream's name
    (for people) and a hash of its server and name (so that two servers' streams of one
    name do not share a file)."""
    digest = hashlib.sha256(str(url).encode("utf-8")).hexdigest()[:16]
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", url.stream)[:100]
    return index_dir / f"{safe}-{digest}.idx"


class StreamIndex:
    """The id index of one stream (see the module docstring); ``path`` ``None``: in memory.

    Safe to share between threads: a lookup holds the lock for its query only, a
    catch-up for each batch it commits, so lookups go on while the index catches up.
    """

    def __init__(self, path: Path | None, url: StreamURL) -> None:
        self.name = str(url)
        self._lock_fd: int | None = None
        self._lock = threading.Lock()
        if path is not None:
            path = self._claim(path)
        try:
            self._index = open_index(path)
        except BaseException:
            self._release()
            raise
        if self._index.path is None:
            self._release()
        self._closed = False
        self._fingerprint = ""
        self._first = self._last = self._end = 0
        self._head: str | None = None

    def _claim(self, path: Path) -> Path | None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = exclusive_lock(path.with_name(path.name + ".lock"), wait=0)
        except UsageError:
            log.warning("%s: another process uses this index; keeping it in memory", path)
            return None
        except OSError as exc:
            log.warning("%s: cannot write the index here (%s); keeping it in memory", path, exc.strerror)
            return None
        return path

    def _release(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    @property
    def path(self) -> Path | None:
        """The index file (``None``: the index is in memory)."""
        return self._index.path

    @property
    def last(self) -> int:
        """The last sequence indexed (0: none)."""
        return self._last

    @property
    def end(self) -> int:
        """The last sequence the index accounts for: the last one indexed or, before any,
        the last one the stream's retention removed (a reader goes on after it)."""
        return max(self._last, self._end)

    @property
    def head(self) -> str | None:
        """The patch id of the last message indexed (``None``: none)."""
        return self._head

    def close(self) -> None:
        """Close the file (what was committed stays) and let another process take it."""
        with self._lock:
            self._closed = True
            self._index.close()
            self._release()

    # -- checking and catching up ---------------------------------------------------------

    def sync(self, stream: NatsLog) -> int:
        """Check the index against ``stream`` (building it again if it does not match, see
        the module docstring), then index the messages after the last one indexed, up to
        the stream's last message now; the number of messages read."""
        fingerprint = stream.fingerprint()
        first = stream.first_seq()
        try:
            start = self._check(stream, fingerprint, first)
        except IndexCorrupt as exc:
            self.rebuild(str(exc))
            start = 1
        self._fingerprint = fingerprint
        # Messages the stream's retention removed are neither read nor indexed.
        start = max(start, first)
        self._end = max(self._last, start - 1)
        return self._catch_up(stream, start, stream.last_seq())

    def _check(self, stream: NatsLog, fingerprint: str, first: int) -> int:
        """The first sequence not indexed, if the index belongs to ``stream`` as it is."""
        with self._lock:
            records = self._index.segments()
            head = self._index.head()
        if not records:
            if head is not None:
                raise IndexCorrupt(f"{self._index.where}: patch rows without a stream record")
            self._first = self._last = 0
            self._head = None
            return 1
        record = records[0]
        if len(records) != 1 or record.name != self.name or record.fingerprint != fingerprint:
            raise IndexCorrupt(f"{self._index.where}: the index of another stream ({record.fingerprint})")
        if head is None or head.version != record.size or head.patch_id != record.anchor:
            raise IndexCorrupt(f"{self._index.where}: the last row is not the one the stream record names")
        message = stream.message(record.size)
        if message is None or message_id(message) != record.anchor:
            raise IndexCorrupt(
                f"{self._index.where}: {self.name} no longer holds message {record.size} "
                f"as indexed ({record.anchor}); the stream was purged or cut below the index"
            )
        if first > record.first_version:
            # The stream's first messages were removed (retention, a partial purge), not
            # the last one indexed: their rows go, the rest of the index stands.
            record = SegmentRecord(0, record.name, fingerprint, record.size, first, record.anchor)
            with self._lock:
                self._index.forget_before(first, record)
        self._first, self._last, self._head = record.first_version, record.size, record.anchor
        return record.size + 1

    def _catch_up(self, stream: NatsLog, start: int, last: int) -> int:
        read = 0
        pending: list[PatchRow] = []  # rows, not messages: the payloads are let go at once
        seq = start
        while seq <= last:
            messages = stream.fetch(seq, READ_BATCH, READ_WAIT)
            if not messages:
                break
            read += len(messages)
            pending += self._rows(messages)
            seq = messages[-1].seq + 1
            if len(pending) >= FLUSH_EVERY:
                self._commit(pending)
                pending = []
        self._commit(pending)
        return read

    def rebuild(self, reason: str) -> None:
        """Throw the index away (it is built again by the next :meth:`sync`), with a warning."""
        log.warning("%s; building the index of %s again", reason, self.name)
        with self._lock:
            self._index.close()
            if self._index.path is not None:
                remove_index(self._index.path)
            self._index = open_index(self._index.path)
            if self._index.path is None:
                self._release()
            self._first = self._last = self._end = 0
            self._head = None

    # -- writing and reading ---------------------------------------------------------------

    def add(self, messages: list[StreamMessage]) -> None:
        """Record ``messages`` (in stream order) in one transaction; those indexed already
        (read again after a rebuild caught up past the reader) are skipped."""
        self._commit(self._rows(messages))

    def _rows(self, messages: list[StreamMessage]) -> list[PatchRow]:
        return [PatchRow(m.seq, message_id(m), 0, 0) for m in messages]

    def _commit(self, rows: list[PatchRow]) -> None:
        rows = [row for row in rows if row.version > self._last]
        if not rows:
            return
        first = self._first or rows[0].version
        record = SegmentRecord(0, self.name, self._fingerprint, rows[-1].version, first, rows[-1].patch_id)
        with self._lock:
            if self._closed:  # a follower's last read, finishing after the topic closed
                raise UsageError(f"{self.name}: the index is closed")
            self._index.add(rows, (), record)
            self._first, self._last, self._head = first, record.size, record.anchor

    def sequence_of(self, patch_id: str) -> int | None:
        """The sequence of the first message with patch id ``patch_id``, or ``None``.

        Raises :class:`IndexCorrupt` when the row found fails its checksum."""
        with self._lock:
            return self._index.version_of(patch_id)


__all__ = ["FLUSH_EVERY", "READ_BATCH", "StreamIndex", "index_file", "message_id"]
