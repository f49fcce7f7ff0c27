"""The change feed's framing, as bytes (no I/O): the JSON answer and the binary records.

``GET /{ref}/changes`` answers one batch of patches (:class:`~patchsync.serve.topics.Batch`:
at most ``limit`` of them and :data:`FEED_BYTES` of payload), written out as it is framed:

- JSON: ``{"changes": [{"version", "id", "patch"}, ...], "last_version", "head", "head_id"}``,
  each ``patch`` as RDF Patch text; the text is at most :data:`FEED_BYTES` too (a patch
  whose text alone is larger goes alone), and ``last_version`` is the last version written;
- binary (``Accept: application/x-patchsync-changes``): each patch's one-patch Jelly-Patch
  stream behind its length (a varint); the headers name the first version, the last one and
  the head, so the batch is known before its first byte is sent.

Either way a reader asks again after the last version it got; an answer never holds more
than a few megabytes, whatever ``limit`` asked for.

:func:`binary_answer` and :func:`json_chunks` are the whole framing, as pure functions of a
batch; the door writes what they give. The JSON answer's cost is each patch's text: it is
made without parsing the decoded terms again (``write_rdfp(canonical=True)``), and each
change is escaped a piece of :data:`JSON_PIECE` characters at a time, so that the thread
making it holds the interpreter lock for a short step at a time, not for a whole
megabyte-sized patch, and the event loop keeps answering meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring_ascii

from patchsync.codec.framing import encode_varint
from patchsync.codec.rdfp import write_rdfp
from patchsync.events import Options
from patchsync.logs.payloads import NT_TERMS, read_payload
from patchsync.serve.answers import Answer
from patchsync.serve.topics import BATCH_BYTES, Entry

#: The binary change feed's media type (records of one-patch Jelly-Patch streams).
FEED_BINARY = "application/x-patchsync-changes"
#: Most bytes of patches one answer carries (a single larger patch goes alone).
FEED_BYTES = BATCH_BYTES
#: Characters of patch text escaped in one step of a JSON answer.
JSON_PIECE = 64 << 10


def patch_text(payload: bytes) -> str:
    """A one-patch Jelly-Patch stream as RDF Patch text (its terms written as decoded)."""
    events = [e for e in read_payload(payload) if type(e) is not Options]
    return write_rdfp(events, NT_TERMS, segments=False, canonical=True)


def record_head(payload: bytes) -> bytes:
    """What comes before a payload in a binary feed record: its length."""
    return encode_varint(len(payload))


def record(payload: bytes) -> bytes:
    """One binary feed record: the payload's length, then the payload."""
    return record_head(payload) + payload


def binary_headers(after: int, last: int, head: int) -> dict[str, str]:
    """The headers of a binary answer holding versions ``after + 1`` to ``last``."""
    return {
        "Content-Type": FEED_BINARY,
        "Patchsync-First-Version": str(after + 1),
        "Patchsync-Last-Version": str(last),
        "Patchsync-Head": str(head),
    }


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


def binary_answer(entries: Sequence[Entry], after: int, head: int) -> Answer:
    """The binary answer of ``entries`` (the versions after ``after``; ``head``: the log's
    head): its length known, its records go out as they are, each payload unjoined."""
    last = entries[-1].version if entries else after
    records = [(record_head(e.payload), e.payload) for e in entries]
    sent = sum(len(head) + len(payload) for head, payload in records)
    headers = binary_headers(after, last, head) | {"Content-Length": str(sent)}
    return Answer(200, headers, chunks=[part for record in records for part in record])


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


def json_chunks(
    entries: Iterable[Entry],
    after: int,
    head: tuple[int, str | None],
    text_of: Callable[[bytes], str] = patch_text,
) -> Iterator[bytes]:
    """The JSON answer of ``entries`` (the versions after ``after``), each patch as its text
    (``text_of``), for as long as the answer stays within :data:`FEED_BYTES`; ``head``: the
    log's head version and id. Blocking work: a door runs it in a worker thread."""
    yield json_start()
    written, last = 0, after
    for entry in entries:
        pieces = json_change_pieces(entry.version, entry.patch_id, text_of(entry.payload), first=not written)
        size = sum(len(p) for p in pieces)
        if not fits(written, size, first=not written):
            break
        yield from pieces
        written += size
        last = entry.version
    yield json_end(last, head[0], head[1])


__all__ = [
    "FEED_BINARY",
    "FEED_BYTES",
    "JSON_PIECE",
    "binary_answer",
    "binary_headers",
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
