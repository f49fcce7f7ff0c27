"""The registry of front doors: each kind of listener a serve process can start.

A :class:`DoorKind` names the flag that gives the door's address (``--listen`` for gRPC)
and a lazy ``"module:attr"`` factory (a :data:`~patchsync.serve.context.DoorFactory`),
called with the process's shared state (a :class:`~patchsync.serve.context.DoorContext`:
``ServeContext`` of :mod:`patchsync.serve.app`) and that address, that returns a
:class:`FrontDoor`. ``patchsync serve`` adds one flag per registered kind, so a new door
is one :func:`register_door` call (or one entry below) and a module of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from patchsync._lazy import load


class FrontDoor(Protocol):
    """A listener of one protocol over the process's topics."""

    async def start(self) -> str:
        """Start listening; returns the address bound (``HOST:PORT``, the port resolved)."""
        ...

    async def stop(self, grace: float) -> None:
        """Take no new request; give those in flight up to ``grace`` seconds."""
        ...


@dataclass(frozen=True, slots=True)
class DoorKind:
    """A kind of front door: its name, the flag giving its address and its factory."""

    name: str
    flag: str
    factory: str
    help: str

    def load(self) -> Any:
        """The door's factory, its module imported on first use (a missing extra is one line);
        :mod:`patchsync.serve.app` calls it with its context and the address."""
        return load(self.factory, f"patchsync serve {self.flag}")


DOORS: dict[str, DoorKind] = {
    "grpc": DoorKind(
        "grpc",
        "--listen",
        "patchsync.serve.grpc_door:GrpcDoor",
        "serve the Jelly gRPC streaming protocol and the Jelly-Patch service at HOST:PORT",
    ),
    "http": DoorKind(
        "http",
        "--http",
        "patchsync.serve.http_door:HttpDoor",
        "serve the RDF Delta patch log protocol, the change feed, /$/metrics, /$/healthz and /$/ready at HOST:PORT",
    ),
}


def door_flags() -> str:
    """The flags that give a door its address, as messages list them."""
    return " or ".join(f"{kind.flag} HOST:PORT ({kind.name})" for kind in sorted(DOORS.values(), key=lambda k: k.name))


def register_door(kind: DoorKind) -> None:
    """Add a kind of front door (replacing one of the same name)."""
    DOORS[kind.name] = kind


__all__ = ["DOORS", "DoorKind", "FrontDoor", "door_flags", "register_door"]
