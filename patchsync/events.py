"""Events: what the decoders hand out and the encoders take in.

The first half holds the events of Jelly-Patch and RDF Patch text (``Event``); the second
half the Jelly-RDF stream options and events (``RdfEvent``).

Each event is an immutable named tuple. They are tuples rather than frozen dataclasses
because a decoder creates one per row and tuple construction is several times cheaper,
which matters at hundreds of thousands of rows a second. Each carries where it came
from: ``offset`` (byte offset of its frame, or of its line in text input), ``frame``
(frame index; 0 for text) and ``row`` (row index within the frame; line number for text).

``g`` is ``None`` for statements and namespaces of a TRIPLES stream, and the adapter's
default-graph term for the default graph of a QUADS stream.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, NamedTuple

from patchsync.errors import UsageError
from patchsync.options import PatchOptions, name_table_too_small


class Position(NamedTuple):
    """Where an event was read: frame offset, frame index and row index."""

    offset: int
    frame: int
    row: int


class Options(NamedTuple):
    """The stream's options row (emitted once, at the start)."""

    options: PatchOptions
    offset: int = 0
    frame: int = 0
    row: int = 0


class Header(NamedTuple):
    """``H key value``."""

    key: str
    value: Any
    offset: int = 0
    frame: int = 0
    row: int = 0


class TxStart(NamedTuple):
    """``TX``."""

    offset: int = 0
    frame: int = 0
    row: int = 0


class TxCommit(NamedTuple):
    """``TC``."""

    offset: int = 0
    frame: int = 0
    row: int = 0


class TxAbort(NamedTuple):
    """``TA``."""

    offset: int = 0
    frame: int = 0
    row: int = 0


class Add(NamedTuple):
    """``A s p o [g]``."""

    s: Any
    p: Any
    o: Any
    g: Any = None
    offset: int = 0
    frame: int = 0
    row: int = 0


class Delete(NamedTuple):
    """``D s p o [g]``."""

    s: Any
    p: Any
    o: Any
    g: Any = None
    offset: int = 0
    frame: int = 0
    row: int = 0


class PrefixAdd(NamedTuple):
    """``PA name iri [g]``; ``iri`` is an IRI term of the adapter."""

    name: str
    iri: Any
    g: Any = None
    offset: int = 0
    frame: int = 0
    row: int = 0


class PrefixDelete(NamedTuple):
    """``PD name [iri] [g]``; ``iri`` is optional in Jelly-Patch and absent in text."""

    name: str
    iri: Any = None
    g: Any = None
    offset: int = 0
    frame: int = 0
    row: int = 0


class PatchEnd(NamedTuple):
    """The end of one patch: a punctuation row, a frame end (FRAME) or the stream end (FLAT)."""

    offset: int = 0
    frame: int = 0
    row: int = 0


Event = Options | Header | TxStart | TxCommit | TxAbort | Add | Delete | PrefixAdd | PrefixDelete | PatchEnd

#: Events that carry patch content (what the RDF Patch text format has rows for).
CONTENT_EVENTS = (Header, TxStart, TxCommit, TxAbort, Add, Delete, PrefixAdd, PrefixDelete)

#: The row code of each content event: RDF Patch text's (https://afs.github.io/rdf-delta/rdf-patch.html,
#: "RDF Patch"), also the ``op`` of Spark's change rows and the keys of ``inspect``'s row counts.
ROW_CODES: dict[type, str] = {
    Header: "H",
    TxStart: "TX",
    TxCommit: "TC",
    TxAbort: "TA",
    PrefixAdd: "PA",
    PrefixDelete: "PD",
    Add: "A",
    Delete: "D",
}


def position(event: Event) -> Position:
    """The position an event carries."""
    return Position(event.offset, event.frame, event.row)


def strip_position(event: Event) -> Event:
    """The event with its position zeroed, for comparing content across formats."""
    return event._replace(offset=0, frame=0, row=0)


# -- Jelly-RDF ------------------------------------------------------------------------------
#
# Jelly-RDF stream options and the events of the Jelly-RDF codec.
#
# :class:`RdfOptions` mirrors the ``RdfStreamOptions`` row (Jelly-RDF spec, "Stream
# options"). The events are named tuples like those of :mod:`patchsync.events` (one is built
# per row, and tuples are cheap) and carry the same position fields: ``offset`` (byte offset
# of the frame), ``frame`` (frame index) and ``row`` (row index in the frame).
#
# A frame is one RDF Message when a stream is read in grouped mode
# (<https://w3c-cg.github.io/rsp/spec/messages>, docs/design.md §8): the decoder ends every frame with
# :class:`FrameEnd`, so a consumer can group statements by frame or ignore the boundaries
# (flat reading).

#: Highest Jelly-RDF version tag this implementation reads (1 = 1.0.x, 2 = 1.1.x).
RDF_VERSION = 2
#: The version tag written when a stream uses no 1.1 feature (namespace declarations).
RDF_VERSION_1_0 = 1


class PhysicalType(enum.IntEnum):
    """Jelly-RDF ``PhysicalStreamType``: how statements are encoded."""

    TRIPLES = 1
    QUADS = 2
    GRAPHS = 3


class LogicalType(enum.IntEnum):
    """Jelly-RDF ``LogicalStreamType`` (RDF-STaX); see :func:`base_logical_type`."""

    UNSPECIFIED = 0
    FLAT_TRIPLES = 1
    FLAT_QUADS = 2
    GRAPHS = 3
    DATASETS = 4
    SUBJECT_GRAPHS = 13
    NAMED_GRAPHS = 14
    TIMESTAMPED_NAMED_GRAPHS = 114


def base_logical_type(value: int) -> int:
    """The base type of a logical type: its last decimal digit (spec, "base types")."""
    return value % 10


def is_grouped(logical_type: int) -> bool:
    """Whether frames are stream elements (RDF Messages) rather than arbitrary batches.

    Base types GRAPHS and DATASETS are "framed" in the spec's support matrix; FLAT_* and
    UNSPECIFIED are "continuous".
    """
    return base_logical_type(logical_type) in (3, 4)


@dataclass(frozen=True, slots=True)
class RdfOptions:
    """The options row of a Jelly-RDF stream.

    The defaults suit a dataset written as one flat stream of quads with the lookup sizes
    of docs/design.md §6. ``logical_type`` may be any registered RDF-STaX number (its base type,
    the value mod 10, must be 1 to 4) or 0 for unspecified.
    """

    physical_type: PhysicalType = PhysicalType.QUADS
    logical_type: int = LogicalType.FLAT_QUADS
    generalized_statements: bool = False
    rdf_star: bool = False
    max_name_table_size: int = 4000
    max_prefix_table_size: int = 150
    max_datatype_table_size: int = 32
    stream_name: str = ""
    version: int = RDF_VERSION_1_0

    def __post_init__(self) -> None:
        # Writers validate here; the decoder checks wire values itself so that its error
        # names the byte offset.
        if self.physical_type not in (1, 2, 3):
            raise UsageError("physical_type must be TRIPLES, QUADS or GRAPHS")
        if self.logical_type != 0 and base_logical_type(self.logical_type) not in (1, 2, 3, 4):
            raise UsageError(f"logical_type {self.logical_type} has no base type 1-4 (value mod 10)")
        broken = name_table_too_small(self.max_name_table_size)
        if broken:
            raise UsageError(broken)
        if self.max_prefix_table_size < 0 or self.max_datatype_table_size < 0:
            raise UsageError("lookup sizes cannot be negative")
        if not 1 <= self.version <= RDF_VERSION:
            raise UsageError(f"version must be between 1 and {RDF_VERSION}")

    @property
    def grouped(self) -> bool:
        """Whether each frame is one RDF Message (see :func:`is_grouped`)."""
        return is_grouped(self.logical_type)


class StreamOptions(NamedTuple):
    """The stream's options row (emitted once, when the first options row is read)."""

    options: RdfOptions
    offset: int = 0
    frame: int = 0
    row: int = 0


class Statement(NamedTuple):
    """A triple (``g`` is ``None``) or a quad.

    In TRIPLES streams ``g`` is ``None``; in QUADS streams it is the adapter's term for the
    quad's graph (the adapter's default-graph term for the default graph); in GRAPHS
    streams it is the graph opened by the enclosing :class:`GraphStart`.
    """

    s: Any
    p: Any
    o: Any
    g: Any
    offset: int = 0
    frame: int = 0
    row: int = 0


class GraphStart(NamedTuple):
    """``graph_start`` of a GRAPHS stream (the graphs that follow until :class:`GraphEnd`)."""

    g: Any
    offset: int = 0
    frame: int = 0
    row: int = 0


class GraphEnd(NamedTuple):
    """``graph_end`` of a GRAPHS stream."""

    offset: int = 0
    frame: int = 0
    row: int = 0


class Namespace(NamedTuple):
    """A namespace declaration (Jelly-RDF 1.1): prefix ``name`` stands for ``iri``."""

    name: str
    iri: Any
    offset: int = 0
    frame: int = 0
    row: int = 0


class FrameEnd(NamedTuple):
    """The end of a frame; ``rows`` is the frame's row count. One RDF Message ends here."""

    offset: int = 0
    frame: int = 0
    rows: int = 0


RdfEvent = StreamOptions | Statement | GraphStart | GraphEnd | Namespace | FrameEnd
