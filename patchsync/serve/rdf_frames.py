"""Jelly-RDF frames for a subscriber: the options it asked for, and statements from frames.

:func:`negotiate` applies the compatibility rules of the Jelly gRPC streaming protocol
(https://w3id.org/jelly/1.0.0/specification/streaming, "Stream options handling") to a
subscriber's ``requested_options``: the physical type must be the one asked for; RDF-star,
generalized statements and the lookup sizes may not exceed what was asked; the version
may not exceed the one asked for. A request the server cannot meet is refused naming the
option (:class:`UsageError`, answered with ``INVALID_ARGUMENT``); one it meets exactly
with its own frames (or that asks for nothing) sends the snapshot as written.

:class:`FrameStatements` turns the frames of a published RDF stream into statements, one
RDF message (frame) at a time, for ``PublishRdf``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from patchsync._proto import rdf_pb2
from patchsync.codec.framing import encode_varint, read_varint
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.errors import EncodeError, UsageError
from patchsync.events import RDF_VERSION, LogicalType, Namespace, PhysicalType, RdfOptions, Statement
from patchsync.logs.payloads import NT_TERMS
from patchsync.options import Limits, name_table_too_small

#: The options of a snapshot as ``patchsync snapshot`` writes it (features declared when used).
SNAPSHOT_PHYSICAL = PhysicalType.QUADS
_DEFAULTS = RdfOptions()
_FLAT = {PhysicalType.TRIPLES: LogicalType.FLAT_TRIPLES, PhysicalType.QUADS: LogicalType.FLAT_QUADS}


def negotiate(requested: Any | None) -> RdfOptions | None:
    """The options to re-encode a snapshot with for ``requested`` (an ``RdfStreamOptions``),
    or ``None`` to send it as written."""
    if requested is None or requested.ByteSize() == 0:
        return None
    physical = requested.physical_type or SNAPSHOT_PHYSICAL
    if physical not in (PhysicalType.TRIPLES, PhysicalType.QUADS, PhysicalType.GRAPHS):
        raise UsageError(f"requested_options.physical_type {physical}: not a physical stream type")
    logical = requested.logical_type
    if logical and logical not in (_FLAT.get(PhysicalType(physical)), LogicalType.FLAT_TRIPLES, LogicalType.FLAT_QUADS):
        raise UsageError(
            f"requested_options.logical_type {logical}: a snapshot is one flat stream "
            f"(FLAT_TRIPLES or FLAT_QUADS, or unspecified)"
        )
    if logical == LogicalType.FLAT_TRIPLES and physical != PhysicalType.TRIPLES:
        raise UsageError("requested_options.logical_type FLAT_TRIPLES needs physical_type TRIPLES")
    names = _size(requested.max_name_table_size, _DEFAULTS.max_name_table_size)
    broken = name_table_too_small(names)
    if broken:
        raise UsageError(f"requested_options: {broken}")
    version = requested.version or RDF_VERSION
    if version < 1:
        raise UsageError("requested_options.version: must be at least 1")
    return RdfOptions(
        physical_type=PhysicalType(physical),
        logical_type=logical or _FLAT.get(PhysicalType(physical), LogicalType.FLAT_QUADS),
        generalized_statements=requested.generalized_statements,
        rdf_star=requested.rdf_star,
        max_name_table_size=names,
        max_prefix_table_size=_size(requested.max_prefix_table_size, _DEFAULTS.max_prefix_table_size),
        max_datatype_table_size=_size(requested.max_datatype_table_size, _DEFAULTS.max_datatype_table_size),
        stream_name=requested.stream_name,
        version=min(version, RDF_VERSION),
    )


def _size(asked: int, default: int) -> int:
    # proto3 cannot tell an unset size from 0: 0 asks for the server's default.
    return min(asked, default) if asked else default


def reencode(frames: Iterator[bytes], options: RdfOptions, source: str) -> Iterator[bytes]:
    """The statements of snapshot ``frames`` as frames with ``options``; the first frame's
    metadata (the position) is carried over. Statements the options cannot carry are one
    :class:`UsageError` naming the option."""
    decoder: RdfDecoder[str] = RdfDecoder(NT_TERMS, source=source, framing="delimited")
    encoder: RdfEncoder[str] = RdfEncoder(options, NT_TERMS)
    metadata: dict[str, bytes] | None = None
    first = True
    pending = bytearray()

    def drain() -> Iterator[bytes]:
        nonlocal first
        pending.extend(encoder.take())
        for frame in split_frames(pending):
            if first and metadata:
                message = rdf_pb2.RdfStreamFrame.FromString(frame)
                message.metadata.update(metadata)
                frame = message.SerializeToString()
            first = False
            yield frame

    try:
        for frame in frames:
            if metadata is None:
                metadata = dict(rdf_pb2.RdfStreamFrame.FromString(frame).metadata)
            decoder.feed(encode_varint(len(frame)) + frame)
            for event in decoder:
                if type(event) is Statement:
                    encoder.statement(event.s, event.p, event.o, event.g or None)
                elif type(event) is Namespace and options.version >= RDF_VERSION:
                    encoder.namespace(event.name, event.iri)
            if encoder.pending_bytes() >= 1 << 20:
                yield from drain()
        encoder.finish()
        yield from drain()
    except EncodeError as exc:
        raise UsageError(f"{source}: the requested options cannot carry this target's data: {exc}") from None


def split_frames(buf: bytearray) -> Iterator[bytes]:
    """Take every whole length-delimited frame off the front of ``buf``."""
    while True:
        found = read_varint(buf, 0, len(buf))
        if found is None or found[1] + found[0] > len(buf):
            return
        length, start = found
        frame = bytes(buf[start : start + length])
        del buf[: start + length]
        yield frame


class FrameStatements:
    """The statements of a published RDF stream, frame by frame (one frame: one RDF message)."""

    def __init__(self, source: str, limits: Limits | None = None) -> None:
        self.decoder: RdfDecoder[str] = RdfDecoder(NT_TERMS, source=source, limits=limits, framing="delimited")

    def frame(self, frame: bytes) -> list[tuple[str, str, str, str]]:
        """The statements of the next frame (N-Triples terms, ``""`` default graph); a
        malformed frame is a :class:`DecodeError` naming frame and row."""
        self.decoder.feed(encode_varint(len(frame)) + frame)
        quads: list[tuple[str, str, str, str]] = []
        for event in self.decoder:
            if type(event) is Statement:
                quads.append((event.s, event.p, event.o, event.g or ""))
        return quads


__all__ = ["FrameStatements", "negotiate", "reencode", "split_frames"]
