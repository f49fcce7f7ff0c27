"""The SQL target's connection to its database, as the parts of the target share it.

The target (:mod:`.target`) opens one SQLAlchemy connection and talks to the driver's own
cursor on the hot path; its parts (the term dictionary, the quad writes, the ledger) are
given this one object rather than copies of the cursor, so whatever the target swaps in
(a new cursor, ``None`` once closed) every part sees.

A write may be left running on the cursor from a thread while the applier goes on decoding
(:meth:`Link.leave_running`, PostgreSQL's ``add_each_later``): the server then works beside
the client. Every later use of the cursor goes through :attr:`Link.cur`, which first waits
for that write and finishes it (:meth:`Link.land`), so no statement of the target's can
interleave with it or see it half done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine


@dataclass
class Link:
    """The engine, the driver's cursor and the name messages use."""

    engine: Engine
    name: str
    #: The driver's base error class: what the hot path's statements raise.
    dbapi_error: type[Exception]
    _cur: Any = None
    # Waits for the write left running on the cursor and finishes it (see leave_running).
    _landing: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def cur(self) -> Any:
        """The driver's cursor of the target's connection (``None`` before it opens and once
        closed), once no write is left running on it."""
        if self._landing is not None:
            self.land()
        return self._cur

    @cur.setter
    def cur(self, cursor: Any) -> None:
        self._cur = cursor

    def leave_running(self, landing: Callable[[], None]) -> None:
        """A write is running on the cursor from another thread: ``landing`` waits for it and
        finishes it (it may use :attr:`cur`), before anything else uses the cursor."""
        self.land()
        self._landing = landing

    def land(self) -> None:
        """Wait for the write left running on the cursor, if any, and finish it; its error
        (raised once, here) is the caller's."""
        landing, self._landing = self._landing, None
        if landing is not None:
            landing()


__all__ = ["Link"]
