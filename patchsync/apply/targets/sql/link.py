"""The SQL target's connection to its database, as the parts of the target share it.

The target (:mod:`.target`) opens one SQLAlchemy connection and talks to the driver's own
cursor on the hot path; its parts (the term dictionary, the quad writes, the ledger) are
given this one object rather than copies of the cursor, so whatever the target swaps in
(a new cursor, ``None`` once closed) every part sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine


@dataclass
class Link:
    """The engine, the driver's cursor and the name messages use."""

    engine: Engine
    name: str
    #: The driver's base error class: what the hot path's statements raise.
    dbapi_error: type[Exception]
    #: The driver's cursor of the target's connection (``None`` before it opens and once closed).
    cur: Any = None


__all__ = ["Link"]
