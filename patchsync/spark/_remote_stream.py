"""``jelly-patch`` over a remote log (``nats://HOST:PORT/STREAM``): change rows of its messages.

Theory of operation. A remote log holds one whole patch per message, at consecutive
positions (a NATS stream's sequences), each decoding on its own (decision 0010). So unlike a
file, a range of a stream needs nothing before it: a partition ``(a, b]`` reads messages
``a + 1`` to ``b`` through the :class:`~patchsync.remote.interface.RemoteLog` of the
source's kind (:mod:`patchsync.sources`, the ``connect`` role) and decodes each with the
stream decoder of replicas (:class:`~patchsync.logs.payloads.MessageDecoder`), which refuses
a message whose patch, or any unit of it, does not end inside it. Every unit therefore ends
in the message that holds it, and the offset Spark checkpoints, the position after the last
whole message, is always after a complete unit: a range gives whole units only, and the
same ones each time it is read again. A long range is cut into partitions of
``messagesPerPartition`` messages, read in parallel. A new query starts at sequence 1, or at
``startingSequence`` (a stream whose first messages its retention removed).

The offset names the log too (:meth:`RemoteLog.fingerprint`: a NATS stream's name and
creation time), and the driver checks it on every poll, as the file source checks a log:
a log removed, or deleted and made again, stops the query with one line; so do messages
after the offset that the log no longer holds (purged, or removed by retention, before
they were read). Messages already read may go: nothing reads them again.

Columns are the file source's: ``log`` is the address (without a password), ``log_index``
0, ``patch`` the position minus 1 (a log published into an empty stream numbers its
patches as the file does) and ``row`` the position times 2**32 plus the row's order in the
message, so rows sort in log order. A patch of a file read by the batch source gives the
same rows, in the same order, with other ``row`` numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from patchsync.errors import CheckpointError, PatchsyncError, UsageError
from patchsync.logs.payloads import NT_TERMS, MessageDecoder
from patchsync.remote.errors import StreamNotFound
from patchsync.remote.interface import PAGE, RemoteLog
from patchsync.sources import READ_AT, Source, resolve_source
from patchsync.spark._errors import encode_error
from patchsync.spark._sources import ChangeRows

#: Messages one partition reads, unless the ``messagesPerPartition`` option says otherwise.
MESSAGES_PER_PARTITION = 2000
#: Bits of ``row`` that number a row within its message (a message holds far fewer rows).
ROW_BITS = 32
#: Seconds a task waits for a message the driver saw in the log.
READ_WAIT = 10.0

Offset = dict[str, Any]


def stream_removed(name: str, at: int) -> CheckpointError:
    """The log was removed (a stream deleted) while being read."""
    return CheckpointError(f"{name}: the stream was removed while being read (read up to sequence {at})")


def stream_replaced(name: str, at: int) -> CheckpointError:
    """The log under the address is another one (a stream deleted and made again)."""
    return CheckpointError(
        f"{name}, sequence {at}: the stream was deleted and made again: it is another log than the one read"
    )


def stream_cut(name: str, at: int, head: int) -> CheckpointError:
    """Messages after the position read are gone (or the log ends before it)."""
    if head < at:
        return CheckpointError(
            f"{name}, sequence {head}: the stream ends before what was already read (sequence {at}); "
            "it was cut or rewritten"
        )
    return CheckpointError(
        f"{name}, sequence {at + 1}: messages not yet read are gone (purged, or removed by the "
        "stream's retention); start again from a snapshot with a new checkpoint"
    )


def address_of(options: Mapping[str, str]) -> str | None:
    """The remote log ``options`` name (``load("nats://...")``), or ``None`` for paths."""
    name = options.get("path")
    if name is None or resolve_source(name).is_path:
        return None
    return name


def _source(name: str) -> Source:
    return resolve_source(name).require(READ_AT, "the jelly-patch Spark source")


def open_log(name: str) -> RemoteLog:
    """A connection to the remote log ``name`` (its kind's ``connect`` role)."""
    source = _source(name)
    return source.connect()(source.address)


def check_remote(log: RemoteLog, identity: str, at: int) -> int:
    """The log's last position, if it is still the log read up to ``at`` with every message
    after ``at`` held (module docstring); else the one-line :class:`CheckpointError`."""
    name = str(log.url)
    try:
        found = log.fingerprint()
    except StreamNotFound:
        raise stream_removed(name, at) from None
    if found != identity:
        raise stream_replaced(name, at)
    head = log.head().seq
    # A stream emptied by a purge answers 0 but keeps its sequences: nothing new.
    if 0 < head < at:
        raise stream_cut(name, at, head)
    if head > at and log.patch_id_at(at + 1) is None:
        raise stream_cut(name, at, head)
    return max(head, at)


class MessageRange(InputPartition):
    """Messages ``after + 1`` to ``until`` of the remote log ``name``, the range's ``index``-th part."""

    def __init__(self, index: int, name: str, identity: str, after: int, until: int) -> None:
        super().__init__(index)
        self.index = index
        self.name = name
        self.identity = identity
        self.after = after
        self.until = until


def plan(name: str, start: Offset, end: Offset, per_partition: int) -> list[MessageRange]:
    """The partitions reading the messages between two offsets, in log order."""
    identity, after, until = end["id"], int(start.get("at", 0)), int(end["at"])
    parts = []
    for i, first in enumerate(range(after, until, per_partition)):
        parts.append(MessageRange(i, name, identity, first, min(first + per_partition, until)))
    return parts


def read_messages(part: MessageRange) -> Iterator[pa.RecordBatch]:
    """The change rows of one partition's messages (runs in a worker)."""
    try:
        with closing(open_log(part.name)) as log:
            where = str(log.url)
            decoder = MessageDecoder(where, adapter=NT_TERMS)
            rows = ChangeRows(where, 0)
            after = part.after
            while after < part.until:
                messages = log.read(after, min(PAGE, part.until - after), READ_WAIT)
                if not messages:
                    raise stream_cut(where, after, log.head().seq)
                for message in messages:
                    if message.seq > part.until:
                        break
                    rows.patch, rows.row = message.seq - 1, message.seq << ROW_BITS
                    yield from rows.batches(decoder.decode(message))
                after = messages[-1].seq
            if rows.cols.unit_start:
                yield rows.cols.take()
    except PatchsyncError as exc:
        raise encode_error(exc) from None


def _whole_option(options: Mapping[str, str], name: str, default: int) -> int:
    text = options.get(name, str(default))
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f'the "{name}" option must be a whole number from 1, not {text!r}')
    return int(text)


class RemoteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader of ``jelly-patch`` over a remote log (see the module docstring)."""

    def __init__(self, name: str, options: Mapping[str, str]) -> None:
        self.name = name
        self.per_partition = _whole_option(options, "messagesPerPartition", MESSAGES_PER_PARTITION)
        #: The first message a new query reads (``startingSequence``; a checkpoint overrides it).
        self.first = _whole_option(options, "startingSequence", 1)
        _source(name)  # a malformed address, or a kind that cannot be read from a position
        self._log: RemoteLog | None = None
        self._limit: Offset | None = None

    def _connected(self) -> RemoteLog:
        # One connection for the query's polls, kept by this process of the driver.
        if self._log is None:
            self._log = open_log(self.name)
        return self._log

    def _guarded(self, poll: Any) -> Any:
        try:
            return poll(self._connected())
        except PatchsyncError as exc:
            if self._log is not None:
                self._log.close()
                self._log = None  # reconnect on the next poll
            # This runs in a Python process of the driver; the query fails with its text.
            raise encode_error(exc) from None

    def initialOffset(self) -> Offset:
        return cast(Offset, self._guarded(lambda log: {"id": log.fingerprint(), "at": self.first - 1}))

    def prepareForTriggerAvailableNow(self) -> None:
        # ``trigger(availableNow=True)``: the messages in the log now, and none published later.
        self._limit = self.latestOffset(self.initialOffset(), None)

    def latestOffset(self, start: Offset, limit: Any) -> Offset:
        at = cast(int, self._guarded(lambda log: check_remote(log, start["id"], int(start["at"]))))
        if self._limit is not None:
            at = min(at, int(self._limit["at"]))
        return {"id": start["id"], "at": at}

    def partitions(self, start: Offset, end: Offset) -> Sequence[InputPartition]:
        return plan(self.name, start, end, self.per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_messages(cast(MessageRange, partition))

    def commit(self, end: Offset) -> None:
        """Nothing to release: the log is only read (its position lives in the checkpoint)."""

    def stop(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class RemoteReader(DataSourceReader):
    """The batch reader of ``jelly-patch`` over a remote log: its messages up to its head now."""

    def __init__(self, name: str, options: Mapping[str, str]) -> None:
        per_partition = _whole_option(options, "messagesPerPartition", MESSAGES_PER_PARTITION)
        try:
            with closing(open_log(name)) as log:
                identity = log.fingerprint()
                head = log.head().seq
        except PatchsyncError as exc:
            raise encode_error(exc) from None
        self.parts = plan(name, {"at": 0}, {"id": identity, "at": head}, per_partition)

    def partitions(self) -> Sequence[InputPartition]:
        return self.parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_messages(cast(MessageRange, partition))
