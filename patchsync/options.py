"""Stream options and decoder limits, validated up front.

:class:`PatchOptions` mirrors the ``RdfPatchOptions`` row (Jelly-Patch spec, "Patch stream
options"); :class:`Limits` holds what a consumer is willing to accept (docs/design.md §1).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from patchsync.errors import UsageError

#: Highest Jelly-Patch version tag this implementation reads and writes.
PATCH_VERSION = 1

#: The smallest name lookup a stream may declare: Jelly's stream options, ``max_name_table_size``
#: "MUST be set to a value greater than or equal to 8" (Jelly-Patch specification, "Patch stream
#: options", <https://w3id.org/jelly/dev/specification/patch/>; Jelly-RDF's serialization
#: specification, "Stream options"). The one definition: options, decoders and the server's
#: negotiation of requested options all ask :func:`name_table_too_small`.
MIN_NAME_TABLE = 8


def name_table_too_small(size: int) -> str | None:
    """The rule a declared name lookup of ``size`` entries breaks, in words, or ``None``."""
    if size >= MIN_NAME_TABLE:
        return None
    return f"max_name_table_size {size}: it MUST be at least {MIN_NAME_TABLE} (Jelly spec, stream options)"


class StreamType(enum.IntEnum):
    """Jelly-Patch ``PatchStreamType``: where patches end."""

    FRAME = 1
    FLAT = 2
    PUNCTUATED = 3


class StatementType(enum.IntEnum):
    """Jelly-Patch ``PatchStatementType``: triples (no graph) or quads."""

    TRIPLES = 1
    QUADS = 2


@dataclass(frozen=True, slots=True)
class PatchOptions:
    """The options row of a Jelly-Patch stream.

    The defaults are the writer defaults of docs/design.md §6 (PUNCTUATED, QUADS, LRU lookups of
    4000 names, 150 prefixes and 32 datatypes).
    """

    stream_type: StreamType = StreamType.PUNCTUATED
    statement_type: StatementType = StatementType.QUADS
    generalized_statements: bool = False
    rdf_star: bool = False
    max_name_table_size: int = 4000
    max_prefix_table_size: int = 150
    max_datatype_table_size: int = 32
    version: int = PATCH_VERSION

    def __post_init__(self) -> None:
        # Writers validate here; readers validate the wire values in the decoder, where
        # the error can name the offending byte offset.
        broken = name_table_too_small(self.max_name_table_size)
        if broken:
            raise UsageError(broken)
        if self.max_prefix_table_size < 0 or self.max_datatype_table_size < 0:
            raise UsageError("lookup sizes cannot be negative")
        if self.version < 1:
            raise UsageError("the version tag must be greater than 0")


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits a decoder enforces before allocating (docs/design.md §1)."""

    max_frame_bytes: int = 16 * 1024 * 1024
    max_name_table_size: int = 4096
    max_prefix_table_size: int = 1024
    max_datatype_table_size: int = 256
    max_nesting: int = 64
    # Headers are per-patch metadata (ids, timestamps) that consumers keep with the patch
    # record until the patch ends, so their number and size are bounded too.
    max_headers: int = 1024
    max_header_bytes: int = 64 * 1024
    # RDF Patch data names IRIs absolutely; a relative one is almost always a decoding
    # mistake (logs joined with ``cat`` decode against the first log's lookups), which
    # must stop before it reaches a replica. Off for data that really is relative.
    require_absolute_iris: bool = True
