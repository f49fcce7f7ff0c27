"""What a front door is given: the process's shared state, typed (no I/O).

Every door (:mod:`patchsync.serve.doors`) is made by a :data:`DoorFactory` from a
:class:`DoorContext` and its address. ``ServeContext`` (:mod:`patchsync.serve.app`) is the
context there is; the protocol names what a door may use of it, so a door is type-checked
against that and nothing else, and a test may hand a door a context of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from patchsync.serve.auth import Access
from patchsync.serve.catalog import Topics
from patchsync.serve.doors import FrontDoor
from patchsync.serve.metrics import ServeMetrics
from patchsync.serve.settings import Address, ServeSettings
from patchsync.serve.tls import ServerTls
from patchsync.serve.topics import LogTopic


class DoorContext(Protocol):
    """What every front door of one process shares: settings, topics, the certificate,
    metrics, the stop flag, and the rules every door applies alike (the token check,
    refusing once stopping, the stream limit, counting refusals, the catalog's changes)."""

    settings: ServeSettings
    topics: Topics
    tls: ServerTls | None
    metrics: ServeMetrics
    stopping: bool

    def authorize(self, token: str | None, needed: Access, what: str) -> None:
        """The token check (raises ``Unauthenticated`` or ``Forbidden``)."""
        ...

    def refuse_if_stopping(self, what: str) -> None:
        """Refuse (``ShuttingDown``) once the server is stopping."""
        ...

    def stream(self, door: str, method: str, topic: str) -> AbstractAsyncContextManager[None]:
        """Count one stream against the limit, and time it."""
        ...

    def refused(self, topic: str, exc: BaseException) -> None:
        """Count one refused request by its reason."""
        ...

    async def create_topic(self, name: str) -> LogTopic:
        """A new log topic under ``--log-root``."""
        ...

    async def remove_topic(self, name: str) -> None:
        """Stop serving topic ``name``."""
        ...


#: A door's factory, as :class:`~patchsync.serve.doors.DoorKind` names it.
DoorFactory = Callable[[DoorContext, Address], FrontDoor]

__all__ = ["DoorContext", "DoorFactory"]
