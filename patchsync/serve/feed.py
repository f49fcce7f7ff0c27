"""The change feed's framing, as bytes (no I/O): the JSON answer and the binary records.

``GET /{ref}/changes`` answers one batch of patches (the rule of
:class:`~patchsync.serve.topics.Batch`: at most ``limit`` of them and :data:`FEED_BYTES` of
payload), streamed: each patch is written as soon as it is read, so the first byte of a
patch never waits for the patches after it (chunked transfer, no ``Content-Length``):

- JSON: ``{"changes": [{"version", "id", "patch"}, ...], "last_version", "head", "head_id"}``,
  each ``patch`` as RDF Patch text; the text is at most :data:`FEED_BYTES` too (a patch
  whose text alone is larger goes alone), and ``last_version`` is the last version written;
- binary (``Accept: application/x-patchsync-changes``): each patch's one-patch Jelly-Patch
  stream behind its length (a varint); the headers name the first version and the head (the
  last version is the first plus the records read, less one).

Either way a reader asks again after the last version it got; an answer never holds more
than a few megabytes, whatever ``limit`` asked for. An answer cut short (the server failed
after its first byte, or stopped) ends without the chunked body's last chunk: an HTTP
client reports the answer as incomplete, never as a shorter batch, and asks again (what it
read whole before the cut may be kept: every record and every change is whole or absent).

:class:`JsonFeed` (a change at a time) and :func:`binary_headers`/:func:`record` are the
whole framing, as pure functions; the door writes what they give. The JSON answer's cost is each patch's text: it is
made without parsing the decoded terms again (``write_rdfp(canonical=True)``), and each
change is escaped a piece of :data:`JSON_PIECE` characters at a time, so that the thread
making it holds the interpreter lock for a short step at a time, not for a whole
megabyte-sized patch, and the event loop keeps answering meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from json.encoder import encode_basestring_ascii

from patchsync.codec.framing import encode_varint
from patchsync.logs.payloads import payload_text
from patchsync.serve.topics import BATCH_BYTES, Batch, Entry

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = "application/x-patchsync-changes"
#: Most bytes of patches one answer carries (a single larger patch goes alone).
FEED_BYTES = BATCH_BYTES
#: Characters of patch text escaped in one step of a JSON answer.
JSON_PIECE = 64 << 10
#: Small parts of an answer are joined up to this size before they are written: a chunk of
#: the chunked body each, not one a record (a client reads each chunk with a few calls).
WRITE_BYTES = 64 << 10
#: Patches read (and, for JSON, made into text) in one step of an answer: the first patch
#: goes alone (:meth:`~patchsync.serve.topics.LogTopic.read_batches`), then this many.
STEP = 16


#: A one-patch Jelly-Patch stream as RDF Patch text (its terms written as decoded).
patch_text = payload_text


def record_head(payload: bytes) -> bytes:
    """What comes before a payload in a binary feed record: its length."""
    return encode_varint(len(payload))


def record(payload: bytes) -> bytes:
    """One binary feed record: the payload's length, then the payload."""
    return record_head(payload) + payload


def binary_headers(after: int, head: int) -> dict[str, str]:
    """The headers of a binary answer holding the versions after ``after`` (``head``: the
    log's head when the answer started)."""
    return {"Content-Type": FEED_BINARY, "Patchsync-First-Version": str(after + 1), "Patchsync-Head": str(head)}


def json_start() -> bytes:
    """The start of a JSON answer."""
    return b'{"changes": ['


def json_change(version: int, patch_id: str, text: str, *, first: bool) -> bytes:
    """One change of a JSON answer (``first``: no comma before it)."""
    body = json.dumps({"version": version, "id": patch_id, "patch": text}).encode()
    return body if first else b", " + body


def json_end(last_version: int, head: int, head_id: str | None) -> bytes:
    """The end of a JSON answer: the last version in it and the head when it was made."""
    tail = json.dumps({"last_version": last_version, "head": head, "head_id": head_id})
    return b"], " + tail[1:].encode()


def fits(written: int, size: int, first: bool) -> bool:
    """Whether a change of ``size`` bytes may follow ``written`` bytes of changes in one
    answer: always the first, then while the answer stays within :data:`FEED_BYTES`."""
    return first or written + size <= FEED_BYTES


def json_change_pieces(version: int, patch_id: str, text: str, *, first: bool) -> list[bytes]:
    """One change of a JSON answer, as :func:`json_change` writes it, in pieces of at most
    :data:`JSON_PIECE` characters of ``text`` each (a piece is one short step of escaping)."""
    head = json.dumps({"version": version, "id": patch_id, "patch": ""})[:-2]
    pieces = [(head if first else ", " + head).encode()]
    for at in range(0, len(text), JSON_PIECE):
        # Escaping is per character, so the pieces of a string escape to the pieces of its escape.
        pieces.append(encode_basestring_ascii(text[at : at + JSON_PIECE])[1:-1].encode())
    pieces.append(b'"}')
    return pieces


class JsonFeed:
    """The JSON answer of the versions after ``after``, a change at a time: :meth:`start`,
    then :meth:`change` for each patch until it says the patch does not fit, then
    :meth:`end`. Each patch is written as its text (``text_of``); the answer stays within
    :data:`FEED_BYTES` of changes (:func:`fits`)."""

    def __init__(self, after: int, text_of: Callable[[bytes], str] = patch_text) -> None:
        self.text_of = text_of
        #: Bytes of changes written, and the last version written.
        self.written, self.last = 0, after

    def start(self) -> bytes:
        """The start of the answer."""
        return json_start()

    def change(self, entry: Entry) -> list[bytes] | None:
        """The pieces of ``entry``'s change, or ``None``: it does not fit, the answer ends
        before it. Blocking work (the patch's text): a door runs it in a worker thread."""
        first = not self.written
        pieces = json_change_pieces(entry.version, entry.patch_id, self.text_of(entry.payload), first=first)
        size = sum(len(p) for p in pieces)
        if not fits(self.written, size, first=first):
            return None
        self.written += size
        self.last = entry.version
        return pieces

    def end(self, head: tuple[int, str | None]) -> bytes:
        """The end of the answer; ``head``: the log's head version and id."""
        return json_end(self.last, head[0], head[1])


class FeedAnswer:
    """One change feed answer of the versions after ``after``, streamed a list of entries
    at a time (:meth:`take`): within the batch rule (:class:`~patchsync.serve.topics.Batch`,
    ``limit`` patches and :data:`FEED_BYTES`), and, as JSON, within :class:`JsonFeed`'s."""

    def __init__(self, after: int, limit: int, *, binary: bool, text_of: Callable[[bytes], str] = patch_text) -> None:
        self.batch = Batch(limit, FEED_BYTES)
        self.json = None if binary else JsonFeed(after, text_of)
        #: Whether the answer is full: nothing more is taken.
        self.done = False

    def start(self) -> bytes:
        """The answer's first bytes."""
        return b"" if self.json is None else self.json.start()

    def take(self, entries: list[Entry]) -> list[bytes]:
        """The bytes of ``entries``, as many as fit (then :attr:`done`). Blocking work as
        JSON (each patch's text): a door runs it in a worker thread."""
        out: list[bytes] = []
        for entry in entries:
            if self.done or not self.batch.fits(entry):
                self.done = True
                break
            if self.json is None:
                out += (record_head(entry.payload), entry.payload)
            else:
                pieces = self.json.change(entry)
                if pieces is None:
                    self.done = True
                    break
                out += pieces
            self.done = self.batch.count(entry)
        return out

    def end(self, head: tuple[int, str | None]) -> bytes:
        """The answer's last bytes; ``head``: the log's head version and id."""
        return b"" if self.json is None else self.json.end(head)


def coalesce(parts: list[bytes], size: int = WRITE_BYTES) -> list[bytes]:
    """``parts`` with neighbours joined while the joined part stays within ``size`` bytes
    (a larger part stays alone, uncopied)."""
    out: list[bytes] = []
    pending: list[bytes] = []
    held = 0
    for part in parts:
        if held + len(part) > size and pending:
            out.append(b"".join(pending))
            pending, held = [], 0
        if len(part) > size:
            out.append(part)
            continue
        pending.append(part)
        held += len(part)
    if pending:
        out.append(b"".join(pending))
    return out


def json_chunks(
    entries: Iterable[Entry],
    after: int,
    head: tuple[int, str | None],
    text_of: Callable[[bytes], str] = patch_text,
) -> Iterator[bytes]:
    """The JSON answer of ``entries`` (the versions after ``after``) as :class:`JsonFeed`
    writes it, whole; ``head``: the log's head version and id. Blocking work."""
    answer = JsonFeed(after, text_of)
    yield answer.start()
    for entry in entries:
        pieces = answer.change(entry)
        if pieces is None:
            break
        yield from pieces
    yield answer.end(head)


__all__ = [
    "FEED_BINARY",
    "FEED_BYTES",
    "JSON_PIECE",
    "STEP",
    "WRITE_BYTES",
    "FeedAnswer",
    "JsonFeed",
    "binary_headers",
    "coalesce",
    "fits",
    "json_change",
    "json_change_pieces",
    "json_chunks",
    "json_end",
    "json_start",
    "patch_text",
    "record",
    "record_head",
]
