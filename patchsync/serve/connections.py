"""How many connections a server takes and how long it waits on each: rules without I/O.

A server on a network must not let one client make it unavailable to others. These are
the rules the HTTP door's listener (:mod:`patchsync.serve.http_listener`) applies, as
functions and a table a test can drive without sockets:

- :class:`ConnectionTable`: at most ``per_client`` connections from one client address
  and ``total`` in all; one over either is refused at once (a 503 line, then closed);
- :func:`connection_budget`: ``total`` from the process's open-file limit, leaving room
  for the logs, the gRPC door and the descriptors a request needs, so that accepting never
  runs the process out of descriptors;
- :func:`body_deadline`: a request body must arrive within the body timeout plus what the
  minimum rate allows for what has arrived, so a body trickling in is cut off while one
  arriving at a fair rate is not, whatever its size.
"""

from __future__ import annotations

import resource
from collections import Counter
from dataclasses import dataclass, field

#: Descriptors kept back from connections: at least this many, or an eighth of the limit.
RESERVED_DESCRIPTORS = 64


def connection_budget(open_files: int | None = None) -> int:
    """Connections the HTTP door may hold at once under the open-file limit ``open_files``
    (the process's soft ``RLIMIT_NOFILE`` when ``None``; an unlimited one counts as 65536)."""
    if open_files is None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        open_files = soft if soft != resource.RLIM_INFINITY else 1 << 16
    reserve = max(RESERVED_DESCRIPTORS, open_files // 8)
    return max(open_files - reserve, 4)


@dataclass(slots=True)
class ConnectionTable:
    """The connections open now, by client address, with the two bounds (see the module docstring)."""

    per_client: int
    total: int
    _open: Counter[str] = field(default_factory=Counter)
    _count: int = 0

    def admit(self, client: str) -> str | None:
        """Count a new connection from ``client``; ``None`` when it is taken, else the
        reason it is refused (and it is not counted)."""
        if self._count >= self.total:
            return f"the server holds {self.total} connections already; try again later"
        if self._open[client] >= self.per_client:
            return f"{client} holds {self.per_client} connections already; use fewer at once"
        self._open[client] += 1
        self._count += 1
        return None

    def release(self, client: str) -> None:
        """A connection ``admit`` took from ``client`` has closed."""
        self._open[client] -= 1
        self._count -= 1
        if self._open[client] <= 0:
            del self._open[client]

    def __len__(self) -> int:
        return self._count

    def of(self, client: str) -> int:
        """Connections open from ``client``."""
        return self._open.get(client, 0)


def body_deadline(started: float, received: int, timeout: float, min_rate: int) -> float:
    """When a body that began at ``started`` and has ``received`` bytes so far must have
    sent more (or ended): ``timeout`` seconds, plus one second for each ``min_rate`` bytes
    received."""
    return started + timeout + received / min_rate


__all__ = ["RESERVED_DESCRIPTORS", "ConnectionTable", "body_deadline", "connection_budget"]
