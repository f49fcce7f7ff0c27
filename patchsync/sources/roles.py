"""The roles a source kind can fill, each a typed protocol, and where a kind says what fills them.

A kind names the part that fills each of its roles as ``"module:attr"``, loaded on first use
(so that ``patchsync status`` does not import a network client it does not use), and a
:class:`~patchsync.sources.registry.Source` hands each out typed by its protocol here:

- ``connect`` (:class:`Connect`): a :class:`~patchsync.remote.interface.RemoteLog` to the address.
  Every rule of reading, following, lag and publishing is written once over it (the tail
  daemon follows any kind that can connect; ``status`` asks any for its lag).
- ``writer`` (:class:`Writer`): a recorder's writer committing each patch to the address.
- ``publish`` (:class:`Publish`): publish log files to the address, continuing its head.
- ``snapshot`` (:class:`FetchSnapshot`): fetch a served target's snapshot file.
- ``checkpoint_after`` (:class:`CheckpointAfter`): a replica's checkpoint just past a base's
  head (a served log finds a patch's version by its id).
- ``check`` (:class:`Check`): refuse a log that does not exist, before a replica is created.
- ``topic`` (:class:`TopicFactory`): the log topic ``patchsync serve`` makes of the source.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported by the roles' users: `status` needs no encoder loaded
    from patchsync.options import Limits, PatchOptions
    from patchsync.remote.interface import RemoteLog
    from patchsync.remote.publish import PublishReport, StreamSettings
    from patchsync.remote.writer import PatchWriter


class Connect(Protocol):
    """Open a connection to the log at ``address`` (``follow``: for a replica following it;
    ``timeout``: per request, the kind's default when ``None``)."""

    def __call__(self, address: Any, *, timeout: float | None = None, follow: bool = False) -> RemoteLog: ...


class Writer(Protocol):
    """A recorder's writer to ``address`` (each patch appended whole on commit)."""

    def __call__(self, address: str, options: PatchOptions | None = None) -> PatchWriter: ...


class Publish(Protocol):
    """Publish every complete patch of the log files ``paths`` to ``url``, continuing its head."""

    def __call__(
        self,
        paths: Iterable[str | os.PathLike[str]],
        url: Any,
        *,
        settings: StreamSettings | None = None,
        limits: Limits | None = None,
    ) -> PublishReport: ...


class FetchSnapshot(Protocol):
    """Write the snapshot served at ``address`` to ``path``."""

    def __call__(self, address: str, path: str | os.PathLike[str]) -> None: ...


class CheckpointAfter(Protocol):
    """The checkpoint of a replica of ``source`` holding its patches up to ``patch_id``
    (``None`` when the log holds no such patch); a ``patchsync.apply.Checkpoint``."""

    def __call__(self, source: str, patch_id: str) -> Any: ...


class Check(Protocol):
    """Refuse (``StreamNotFound``) a log ``source`` that does not exist."""

    def __call__(self, source: str) -> None: ...


class TopicFactory(Protocol):
    """The log topic ``name`` that ``patchsync serve`` makes of the source ``spec`` (parsed:
    ``address``), with the serve options; a ``patchsync.serve.topics.Topic``."""

    def __call__(self, name: str, spec: str, address: Path | Any, options: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class Roles:
    """What fills each role of a kind: ``"module:attr"``, or ``None`` when it has no such role."""

    connect: str | None = None
    writer: str | None = None
    publish: str | None = None
    snapshot: str | None = None
    checkpoint_after: str | None = None
    check: str | None = None
    topic: str | None = None

    def has(self, role: str) -> bool:
        """Whether the kind fills ``role``."""
        return getattr(self, role, None) is not None


ROLES = tuple(Roles.__dataclass_fields__)

__all__ = [
    "ROLES",
    "Check",
    "CheckpointAfter",
    "Connect",
    "FetchSnapshot",
    "Publish",
    "Roles",
    "TopicFactory",
    "Writer",
]
