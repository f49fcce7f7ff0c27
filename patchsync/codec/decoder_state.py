"""The resumable state of a Jelly-Patch decoder, as plain frozen data.

A decoder standing at a frame boundary between patches carries only a little state from
one patch to the next: its position, the stream options, the three lookup tables, the
IRI 0-id state and the repeated terms. :meth:`PatchDecoder.export_state
<patchsync.codec.patch_decoder.PatchDecoder.export_state>` returns it as a
:class:`DecoderState`; :meth:`PatchDecoder.from_state
<patchsync.codec.patch_decoder.PatchDecoder.from_state>` builds a decoder that goes on
decoding the stream from that position exactly as the original would have. Caches of
built terms are not part of the state: they are rebuilt on demand.

The state is data the caller may have stored and read back (the tail daemon's snapshots),
so restoring validates it as strictly as the stream's own rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LookupState:
    """One lookup table: its size, the last id set (for the 0-id rule) and its entries, as
    runs of consecutive ids and their values (restoring a table of thousands of entries is
    then a few slice assignments, not a Python step per entry: a fetch from the version
    index restores one)."""

    size: int
    last_id: int
    #: ``(first id, count)`` of each run of defined entries, ids ascending, runs apart.
    runs: tuple[tuple[int, int], ...]
    #: The values of the runs' entries, in id order.
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TermState(Generic[T]):
    """The state of a :class:`~patchsync.codec.term_decoder.TermDecoder` between rows."""

    names: LookupState
    prefixes: LookupState
    datatypes: LookupState
    #: IRI 0-id rules: the last explicit prefix id (0 = empty prefix) and the last name id.
    last_prefix: int
    last_name: int
    #: Repeated terms of the subject, predicate, object and graph positions (``None``: unset).
    last_s: T | None
    last_p: T | None
    last_o: T | None
    last_g: T | None


@dataclass(frozen=True, slots=True)
class DecoderState(Generic[T]):
    """What a :class:`~patchsync.codec.patch_decoder.PatchDecoder` carries across patches."""

    #: Byte offset of the next frame in the stream.
    offset: int
    #: Frames and patches decoded before ``offset``.
    frames: int
    patches: int
    #: Whether a transaction was seen in the stream so far.
    tx_seen: bool
    #: The stream's ``RdfPatchOptions`` message, serialized (``None``: no options row yet).
    options: bytes | None
    #: The term decoding state (``None`` exactly when ``options`` is).
    terms: TermState[T] | None


__all__ = ["DecoderState", "LookupState", "TermState"]
