"""Publishing patch logs to a remote log: the one publish loop, for every kind of log.

Resuming (a rerun, or after ``kill -9``): the log itself says how far a previous run got.
:func:`publish_patches` reads the log's head (the id of its last patch) and skips the patches
of the logs up to and including that patch (the chain rule of every writer,
:func:`patchsync.chains.held_prefix`); the first patch it sends is the one whose ``prev`` is
the head, and the server appends each only if it follows the head. This holds however long
ago the previous run was. A patch the log holds already (the one whose acknowledgement a
crash lost, or a concurrent publisher's) is acknowledged as a duplicate, not stored again.
If no patch of the logs follows the head, the first one is sent anyway and the server
refuses it: a :class:`~patchsync.errors.ChainError` naming both ids, nothing published.
Patches are encoded only when sent: a rerun skips the published ones unencoded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain

from patchsync.chains import held_prefix
from patchsync.logs.payloads import LogPatch, MessageEncoder, PatchMessage, read_patches
from patchsync.options import Limits
from patchsync.remote.interface import Appended, RemoteLog


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """How a missing NATS stream is created (an existing one keeps its configuration; a log
    served by ``patchsync serve`` is made by the server and takes none)."""

    create: bool = True
    replicas: int = 1
    max_age: float | None = None
    max_bytes: int | None = None
    max_msgs: int | None = None
    duplicate_window: float | None = None


@dataclass(frozen=True, slots=True)
class PublishReport:
    """What one publish run did."""

    published: int
    #: Patches the log already held (skipped before the head, or answered "duplicate").
    skipped: int
    #: The log's head after the run: its last position and patch id.
    last_seq: int
    head: str | None


def patches_after_head(logs: list[str], head: str | None, limits: Limits | None) -> tuple[Iterator[LogPatch], int]:
    """The patches of ``logs`` to publish after the log's ``head``; how many it holds already."""

    def patches() -> Iterator[LogPatch]:
        return chain.from_iterable(read_patches(p, limits=limits) for p in logs)

    skipped, pending = held_prefix(patches, _chain_ids, head)
    return pending, skipped


def _chain_ids(patch: LogPatch) -> tuple[str | None, str | None]:
    return patch.patch_id, patch.prev


def publish_patches(
    log: RemoteLog,
    paths: Iterable[str | os.PathLike[str]],
    *,
    limits: Limits | None = None,
    on_published: Callable[[PatchMessage, Appended], None] | None = None,
) -> PublishReport:
    """Publish every complete patch of the logs ``paths`` to ``log``, in order, continuing its
    head (see the module docstring). ``on_published`` is called with each patch the server
    acknowledged on its own (a streaming server acknowledges a run at its end)."""
    log.writable()
    logs = [os.fspath(p) for p in paths]
    pending, skipped = patches_after_head(logs, log.head().patch_id, limits)
    encoder = MessageEncoder()
    published, duplicates = log.append_all((patch.message(encoder) for patch in pending), on_published)
    # The log's head, not the last patch sent: when every patch was in the log already, the
    # log may have grown past the end of these logs.
    head = log.head()
    return PublishReport(published, skipped + duplicates, head.seq, head.patch_id)


__all__ = ["PublishReport", "StreamSettings", "patches_after_head", "publish_patches"]
