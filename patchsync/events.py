"""Events: what the decoders hand out and the encoders take in.

Each event is an immutable named tuple. They are tuples rather than frozen dataclasses
because a decoder creates one per row and tuple construction is several times cheaper,
which matters at hundreds of thousands of rows a second. Each carries where it came
from: ``offset`` (byte offset of its frame, or of its line in text input), ``frame``
(frame index; 0 for text) and ``row`` (row index within the frame; line number for text).

``g`` is ``None`` for statements and namespaces of a TRIPLES stream, and the adapter's
default-graph term for the default graph of a QUADS stream.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .options import PatchOptions


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


def position(event: Event) -> Position:
    """The position an event carries."""
    return Position(event.offset, event.frame, event.row)


def strip_position(event: Event) -> Event:
    """The event with its position zeroed, for comparing content across formats."""
    return event._replace(offset=0, frame=0, row=0)
