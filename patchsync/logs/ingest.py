"""RDF Messages into patches: each message of a message log becomes one patch (docs/design.md §8).

Message *n* of a source becomes the *n*-th patch ingested from it: ``H id`` a fresh
``urn:uuid:``, ``H prev`` the head before it, ``H ingest-source`` the source's absolute path
and ``H ingest-message`` *n*, then its quads as adds in one transaction (an empty message is
an empty patch). Blank node labels are scoped to their message, so each patch gets its own:
``_:x`` of message *n* of a source becomes ``_:s<hash>m<n>_x`` (``hash``: of the source's
path), distinct from every other message's and the same on every run.

A rerun resumes: the headers of the destination's patches say which messages of each source
are already in it, and only later ones are appended. Every source is read (and validated)
before the destination is locked and written, and a failure truncates the destination back
to where it was: an ingest appends all its patches or none.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from patchsync import formats
from patchsync.errors import FormatError, UsageError
from patchsync.events import Add, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.append import LOCK_WAIT
from patchsync.logs.convert import FeatureScan
from patchsync.logs.messages import Message, MessageReader, scope_labels
from patchsync.logs.patch_logs import LogAppender, format_of, read_events
from patchsync.options import Limits, PatchOptions, StatementType
from patchsync.terms import LITERAL
from patchsync.terms.ntriples import NTriplesTerms

__all__ = ["IngestResult", "ingest_messages"]

#: Header keys that record where a patch came from (what a rerun resumes from).
SOURCE_HEADER = "ingest-source"
MESSAGE_HEADER = "ingest-message"

_NT = NTriplesTerms()
_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What :func:`ingest_messages` did: patches appended and messages found already ingested."""

    appended: int
    skipped: int


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


def _ingested(dest: Path) -> dict[str, int]:
    """The highest message index recorded per source in the log ``dest``."""
    done: dict[str, int] = {}
    source: str | None = None
    for event in read_events(dest, adapter=_NT):
        if type(event) is Header and event.key in (SOURCE_HEADER, MESSAGE_HEADER):
            u = _NT.unpack(event.value)
            if u[0] != LITERAL:
                continue
            if event.key == SOURCE_HEADER:
                source = str(u[1])
            elif source is not None and str(u[1]).isdigit():
                done[source] = max(done.get(source, 0), int(u[1]))
        elif type(event) is PatchEnd:
            source = None
    return done


def _patches(
    source: str, messages: Sequence[Message], first: int, head: list[str | None], count: list[int]
) -> Iterator[Event]:
    tag = "s" + hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]
    scoped = scope_labels(messages, tag=tag)
    for number, message in enumerate(scoped, start=1):
        if number < first:
            continue
        patch_id = f"urn:uuid:{uuid.uuid4()}"
        yield Header("id", _NT.iri(patch_id))
        if head[0] is not None:
            yield Header("prev", _NT.iri(head[0]))
        yield Header(SOURCE_HEADER, _NT.literal(source))
        yield Header(MESSAGE_HEADER, _NT.literal(str(number), None, _INTEGER))
        yield TxStart()
        for s, p, o, g in message:
            yield Add(s, p, o, g)
        yield TxCommit()
        yield PatchEnd()
        head[0] = patch_id
        count[0] += 1


def ingest_messages(
    dest: str | os.PathLike[str],
    sources: Sequence[str | os.PathLike[str]],
    *,
    messages: bool = False,
    limits: Limits | None = None,
    fsync: bool = False,
) -> IngestResult:
    """Append one patch per message of ``sources`` (in order) to the ``.jellyp`` log ``dest``.

    ``messages`` reads N-Triples, N-Quads, Turtle, TriG and Jelly-RDF files as message logs
    (``.ndjsonld`` and ``.yamlld`` always are); otherwise such a file is one message. Messages
    already ingested into ``dest`` (by their ``ingest-source``/``ingest-message`` headers)
    are skipped. Raises :class:`DecodeError` for a malformed message, before anything is written.
    """
    dest_path = Path(dest)
    if format_of(dest_path) != "jellyp":
        raise FormatError(f"{dest}: messages are ingested into a .jellyp log")
    if not sources:
        raise UsageError("nothing to ingest: name at least one message log")
    read: list[tuple[str, list[Message]]] = []
    scan = FeatureScan()
    for src in sources:
        path = Path(src)
        found = _read_source(path, messages, limits)
        for message in found:
            for s, p, o, g in message:
                scan.see(Add(s, p, o, g), str(src))
        read.append((str(path.resolve()), found))
    created = not dest_path.exists()
    # Messages are datasets: a new log holds quads, so a later ingest into it may name graphs.
    options = scan.options(PatchOptions(statement_type=StatementType.QUADS)) if created else None
    appender = LogAppender(dest_path, options, _NT, fsync=fsync, wait=LOCK_WAIT)
    start = appender.size
    count = [0]
    skipped = 0
    try:
        scan.require(appender.options, dest, "ingested")
        done = _ingested(dest_path) if start else {}
        head: list[str | None] = [appender.head]
        for source, found in read:
            first = done.get(source, 0) + 1
            skipped += min(first - 1, len(found))
            appender.write(_patches(source, found, first, head, count))
            done[source] = max(done.get(source, 0), len(found))
        if count[0] == 0:
            # Nothing new: the log stays byte for byte as it was (no repeated options row).
            raise _NothingNew
        appender.close()
    except _NothingNew:
        _restore(dest_path, start, created, appender)
    except BaseException:
        # Nothing half-ingested: back to the log as it was.
        _restore(dest_path, start, created, appender)
        raise
    return IngestResult(count[0], skipped)


class _NothingNew(Exception):
    """Every message was already ingested."""


def _restore(dest: Path, start: int, created: bool, appender: LogAppender) -> None:
    # The lock is still held: no other writer can have appended since ``start``. A log this
    # call created is removed only while still empty (another writer may have created it too).
    os.truncate(dest, start)
    if created and start == 0:
        dest.unlink(missing_ok=True)
    appender.abandon()
