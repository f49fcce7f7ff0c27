"""patchsync: RDF Patch replication in Python.

The public API lives here; modules whose names start with ``_`` and names not listed in
``__all__`` are internal.
"""

from .codec.patch_decoder import END, NEED_DATA, PatchDecoder
from .codec.patch_encoder import PatchEncoder
from .errors import DecodeError, EncodeError, FormatError, PatchsyncError, UsageError
from .events import (
    Add,
    Delete,
    Event,
    Header,
    Options,
    PatchEnd,
    Position,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from .options import Limits, PatchOptions, StatementType, StreamType
from .terms import TermAdapter, TripleTerm

__version__ = "0.1.0"

__all__ = [
    "END",
    "NEED_DATA",
    "Add",
    "DecodeError",
    "Delete",
    "EncodeError",
    "Event",
    "FormatError",
    "Header",
    "Limits",
    "Options",
    "PatchDecoder",
    "PatchEncoder",
    "PatchEnd",
    "PatchOptions",
    "PatchsyncError",
    "Position",
    "PrefixAdd",
    "PrefixDelete",
    "StatementType",
    "StreamType",
    "TermAdapter",
    "TripleTerm",
    "TxAbort",
    "TxCommit",
    "TxStart",
    "UsageError",
    "__version__",
]
