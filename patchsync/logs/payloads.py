"""Patches as stream messages: one patch per message, each a Jelly-Patch stream of its own.

A message holds the options row, then the one patch, encoded with fresh lookups, so every
message decodes on its own: a replica can start at any sequence (after a snapshot), and a
bad message is found and reported alone. Terms travel as N-Triples strings between the
decoder and the encoder, so each is re-encoded exactly as it was read.

Message options are the log's own (RDF Patch text logs: PUNCTUATED, and RDF-star or
generalized statements only when the patch uses them); a FLAT log is one patch, sent as a
PUNCTUATED message. Every published patch needs an ``id`` header (it is the message id the
server deduplicates by, and the next patch's ``prev``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from patchsync import formats
from patchsync.codec import backend
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import RdfPatchTextReader, write_rdfp
from patchsync.errors import DecodeError, UsageError
from patchsync.events import Add, Delete, Event, Options
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.terms import BNODE, LITERAL, TRIPLE
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import ENDS_PATCH, Mark, UnitReader, patch_headers

#: Terms as N-Triples strings: each is re-encoded exactly as it was read.
NT_TERMS = NTriplesTerms()
# The smallest name lookup a message declares: above the spec's minimum
# (options.MIN_NAME_TABLE), so that a short patch still has room for its names.
_MIN_NAMES = 16
#: Bytes read from a log at a time.
CHUNK_SIZE = 1 << 20

_new_tuple = tuple.__new__

#: The header naming the patch a message holds (NATS deduplicates messages by it; the gRPC
#: and HTTP clients fill it from the patch's id).
MSG_ID = "Nats-Msg-Id"


class StreamMessage(NamedTuple):
    """One message read from the stream, in stream order."""

    seq: int
    #: When the server stored the message (seconds since the epoch).
    published: float
    headers: Mapping[str, str]
    payload: bytes


@dataclass(frozen=True, slots=True)
class PatchMessage:
    """One patch of a log, encoded as a message payload."""

    patch_id: str
    prev: str | None
    payload: bytes
    #: The log the patch comes from and its number there (1-based), for messages.
    source: str
    number: int


def message_options(options: PatchOptions | None) -> PatchOptions:
    """The options of a one-patch message made from a log with ``options``."""
    options = options or PatchOptions()
    if options.stream_type is StreamType.FLAT:
        options = replace(options, stream_type=StreamType.PUNCTUATED)
    return options


def encode_patch(events: Sequence[Event], options: PatchOptions) -> bytes:
    """One patch (its events, terms as N-Triples strings) as a self-contained Jelly-Patch stream.

    The name lookup is sized for this patch (a row names at most four IRIs outside quoted
    triples, rounded up to a power of two; beyond that the lookup evicts, which stays
    correct): encoders and decoders build their tables at the declared size, which for a
    4,000-entry default cost more than encoding a small patch. Many patches in a row:
    :class:`MessageEncoder` (the same bytes, cheaper).
    """
    return MessageEncoder().encode(events, options)


@functools.lru_cache(maxsize=64)
def _sized(options: PatchOptions, names: int) -> PatchOptions:
    """``options`` with a name lookup of ``names`` entries (a few distinct ones in a log)."""
    return options if names == options.max_name_table_size else replace(options, max_name_table_size=names)


class MessageEncoder:
    """:func:`encode_patch` for many patches one after another (a server answering a
    catch-up re-encodes each patch of another writer's stream).

    Each message is exactly the bytes :func:`encode_patch` gives: one encoder is restarted
    for each (:meth:`PatchEncoder.restart`), which spares building it (~40% of encoding a
    small patch) and keeps its term caches. One thread at a time.
    """

    def __init__(self) -> None:
        self._encoder: PatchEncoder[str] | None = None

    def encode(self, events: Sequence[Event], options: PatchOptions) -> bytes:
        """``events`` (one patch) as a self-contained one-patch stream (see :func:`encode_patch`)."""
        # Rounded up to a power of two: messages of similar patches then carry the same options
        # row, which a replica's decoder recognises and does not validate and build again.
        options = _sized(
            options, min(options.max_name_table_size, max(_MIN_NAMES, 1 << (4 * len(events) - 1).bit_length()))
        )
        encoder = self._encoder
        if encoder is None:
            encoder = PatchEncoder(options, NT_TERMS)
        else:
            self._encoder = None  # kept again only once this message is whole
            encoder.restart(options)
        for event in events:
            encoder.send(event)
        if encoder.patches_written == 0:
            encoder.end_patch()
        encoder.finish()
        payload = encoder.take()
        self._encoder = encoder
        return payload


@dataclass(frozen=True, slots=True)
class LogPatch:
    """One complete patch read from a log (terms as N-Triples strings), not yet encoded."""

    #: The patch's events, from its first header to its ``PatchEnd``.
    events: list[Event]
    #: The log's options (``None`` for RDF Patch text).
    options: PatchOptions | None
    source: str
    number: int
    patch_id: str | None
    prev: str | None

    def message(self, encoder: MessageEncoder | None = None) -> PatchMessage:
        """The patch as a message payload; it needs an ``id`` (:class:`UsageError` otherwise).
        ``encoder``: the one encoding a run of patches (a new one otherwise)."""
        if self.patch_id is None:
            raise UsageError(f"{self.source}: patch {self.number} has no 'id' header; a published patch needs one")
        options = message_options(self.options or text_options(self.events))
        payload = (encoder or MessageEncoder()).encode(self.events, options)
        return PatchMessage(self.patch_id, self.prev, payload, self.source, self.number)


def log_patches(path: str | os.PathLike[str], *, limits: Limits | None = None) -> Iterator[PatchMessage]:
    """Every complete patch of a ``.jellyp`` or ``.rdfp`` log, in order, as messages."""
    encoder = MessageEncoder()
    for patch in read_patches(path, limits=limits):
        yield patch.message(encoder)


def log_events(
    path: str | os.PathLike[str], *, limits: Limits | None = None, unfinished_tail: bool = False
) -> Iterator[Event]:
    """Every event of a ``.jellyp`` or ``.rdfp`` log (terms as N-Triples strings), decoded as read.

    A log that ends inside a unit, a patch or a frame fails with the decoder's
    :class:`DecodeError` naming the file and byte, after the events before it; with
    ``unfinished_tail`` such an end (a log still being written) just ends the events.
    """
    fmt = formats.require(path, None, formats.PATCH_LOG, "patch", nameable=False).name
    reader = patch_reader(fmt, str(path), limits)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_SIZE):
            reader.feed(chunk)
            yield from reader
    try:
        reader.close()
        events = list(reader)
    except DecodeError:
        if unfinished_tail:
            return  # the writer has not completed it yet
        raise
    yield from events


def read_patches(path: str | os.PathLike[str], *, limits: Limits | None = None) -> Iterator[LogPatch]:
    """Every complete patch of a ``.jellyp`` or ``.rdfp`` log, in order.

    A log still being written may end inside a patch (or a frame): that tail is not a
    complete patch and is left for a later run. Anything else the decoder refuses is a
    :class:`DecodeError` naming the file and byte.
    """
    source = str(path)
    options: PatchOptions | None = None
    reader = UnitReader(NT_TERMS)
    pending: list[Event] = []
    for event in log_events(path, limits=limits, unfinished_tail=True):
        mark = reader.read(event)
        if mark is Mark.OUTSIDE:
            options = event.options if type(event) is Options else options
            continue
        pending.append(event)
        if mark in ENDS_PATCH:
            patch = reader.patch
            yield LogPatch(pending, options, source, patch.number, patch.id, patch.prev)
            pending = []


def text_options(events: list[Event]) -> PatchOptions:
    """Options for a patch read from RDF Patch text: the features this one patch uses."""
    # The rules of `convert` (logs.convert.scan_features) per patch, so that a log still
    # being written need not be read to its end first.
    star = generalized = False
    for event in events:
        if type(event) is Add or type(event) is Delete:
            for position, term in zip("spog", event[:4], strict=True):
                if not term:
                    continue  # no graph, or the default graph ("")
                kind = NT_TERMS.unpack(term)[0]
                if kind == TRIPLE:
                    star = True
                    generalized = generalized or position in "pg"
                elif (kind == LITERAL and position != "o") or (kind == BNODE and position == "p"):
                    generalized = True
    return PatchOptions(rdf_star=star, generalized_statements=generalized)


def patch_reader(fmt: str, source: str, limits: Limits | None) -> Any:
    """A decoder for ``jellyp`` or ``rdfp`` with N-Triples terms."""
    if fmt == "jellyp":
        return PatchDecoder(NT_TERMS, source=source, limits=limits)
    return RdfPatchTextReader(NT_TERMS, source=source, limits=limits)


def decode_message(
    message: StreamMessage,
    where: str,
    *,
    adapter: Any = None,
    limits: Limits | None = None,
) -> list[Event]:
    """The events of one message, checked whole before anything is applied.

    ``where`` names the stream (``nats://HOST:PORT/STREAM``); every refusal is one
    :class:`DecodeError` line naming the stream and the message's sequence: a payload
    the decoder rejects, one that holds no patch or more than one, or an ``id`` header
    that differs from the message's ``Nats-Msg-Id``. The options event is kept first.

    Positions place the events in the stream: ``offset`` is the message's sequence,
    ``frame`` the frame within the message and ``row`` the event's index in the message.
    So ``(offset, row)`` orders every event of the stream, and an applier's checkpoint
    (the position of the last event of its last unit) holds the stream sequence.
    """
    return MessageDecoder(where, adapter=adapter, limits=limits).decode(message)


class MessageDecoder:
    """:func:`decode_message` for the messages of one stream, one after another.

    Each message still decodes on its own, exactly as with a new decoder; one decoder is
    restarted for each (:meth:`PatchDecoder.restart`), which spares building its term
    decoder again for every message, and, when consecutive messages declare lookups of the
    same sizes, the IRI terms of the entries a message repeats from the one before
    (:meth:`~patchsync.codec.term_decoder.TermDecoder.restart`).
    """

    def __init__(self, where: str, *, adapter: Any = None, limits: Limits | None = None) -> None:
        self.where = where
        self._decoder: PatchDecoder[Any] = PatchDecoder(adapter, source=where, limits=limits)

    def decode(self, message: StreamMessage) -> list[Event]:
        """The events of ``message``, checked whole (see :func:`decode_message`)."""
        seq = message.seq
        source = f"{self.where} sequence {seq}"
        decoder = self._decoder
        decoder.restart(source)
        decoder.feed(message.payload)
        decoder.close()
        # Every event ends with (offset, frame, row): placed at the message's sequence, its
        # index in the message as its row.
        out: list[Event] = _restamp(list(decoder), seq)
        if decoder.patches != 1:
            raise DecodeError(f"a message must hold exactly one patch, this one holds {decoder.patches}", source=source)
        msg_id = message.headers.get(MSG_ID)
        # Only a message that names its patch (NATS) is checked against it: the served logs'
        # messages carry no id besides the patch's own.
        if msg_id is not None and (patch_id := patch_headers(out, decoder.adapter).id) != msg_id:
            raise DecodeError(
                f"the patch's id {patch_id or '(none)'} differs from the message id {msg_id}", source=source
            )
        return out


def _restamp_pure(events: list[Event], offset: int) -> list[Event]:
    # tuple.__new__ skips the named tuple's Python-level constructor and _replace.
    return [_new_tuple(type(e), (*e[:-3], offset, e[-2], i)) for i, e in enumerate(events)]


#: The compiled core's restamp when it is built (the same events, without a tuple per event
#: in between), else the same in Python.
_restamp: Callable[[list[Event], int], list[Event]] = getattr(backend.native(), "restamp", _restamp_pure)


def read_payload(payload: bytes, source: str = "<message>") -> list[Event]:
    """The events of one payload with terms as N-Triples strings (tests, inspection)."""
    decoder: PatchDecoder[str] = PatchDecoder(NT_TERMS, source=source)
    decoder.feed(payload)
    decoder.close()
    return list(decoder)


def events_text(events: Sequence[Event]) -> str:
    """One patch's events as the RDF Patch text readers are served (terms written as
    decoded, no stream options; ``write_rdfp(canonical=True)``: the terms are not parsed
    again)."""
    return write_rdfp([e for e in events if type(e) is not Options], NT_TERMS, segments=False, canonical=True)


def payload_text(payload: bytes) -> str:
    """A one-patch payload as RDF Patch text (:func:`events_text` of its events)."""
    return events_text(read_payload(payload))
