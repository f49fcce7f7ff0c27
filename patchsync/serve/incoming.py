"""Patches arriving at a server: checked whole before any log sees them.

A published patch is a one-patch Jelly-Patch stream (the payload of a stream message,
:mod:`patchsync.logs.payloads`); it is decoded and checked here, in full, so a topic
appends it in one write or not at all. An RDF message published as statements becomes a
patch here too: one transaction adding them, a new id, and the head as ``prev``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import DecodeError
from patchsync.events import Add, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS
from patchsync.options import Limits
from patchsync.units import patch_ends


@dataclass(frozen=True, slots=True)
class Incoming:
    """One patch received: its events (N-Triples terms, options event first), id and ``prev``."""

    events: list[Event]
    patch_id: str
    prev: str | None


def decode_patch(payload: bytes, where: str, limits: Limits | None = None) -> Incoming:
    """The patch ``payload`` holds, checked whole; one :class:`DecodeError` naming ``where`` otherwise.

    It must hold exactly one patch, with an ``id`` header (the id is how a resent patch is
    recognised and how the next one names it).
    """
    decoder: PatchDecoder[str] = PatchDecoder(NT_TERMS, source=where, limits=limits)
    decoder.feed(payload)
    decoder.close()
    return checked_patch(list(decoder), where)


def checked_patch(events: list[Event], where: str) -> Incoming:
    """The patch ``events`` are (decoded, or parsed from RDF Patch text), checked as
    :func:`decode_patch` checks a payload's."""
    ends = list(patch_ends(events, source=where))
    if len(ends) != 1:
        raise DecodeError(f"a published patch is one patch, this holds {len(ends)}", source=where)
    patch = ends[0].patch
    if patch.id is None:
        raise DecodeError("a published patch needs an 'id' header", source=where)
    return Incoming(events, patch.id, patch.prev)


def new_patch_id() -> str:
    """A fresh patch id (a UUID URN, as RDF Delta's clients make them)."""
    return f"urn:uuid:{uuid.uuid4()}"


def statement_patch(quads: Sequence[tuple[str, str, str, str]], head: str | None) -> Incoming:
    """One patch adding ``quads`` (N-Triples terms, ``""`` default graph) in one transaction,
    with a new id and ``prev`` = ``head``."""
    patch_id = new_patch_id()
    events: list[Event] = [Header("id", f"<{patch_id}>")]
    if head is not None:
        events.append(Header("prev", head if head.startswith('"') else f"<{head}>"))
    events.append(TxStart())
    events.extend(Add(s, p, o, g or None) for s, p, o, g in quads)
    events.append(TxCommit())
    events.append(PatchEnd())
    return Incoming(events, patch_id, head)


__all__ = ["Incoming", "checked_patch", "decode_patch", "new_patch_id", "statement_patch"]
