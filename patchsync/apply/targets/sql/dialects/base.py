"""What a SQL dialect decides for the SQL target: the strategy each dialect module fills in.

The target and its shared parts (:mod:`..terms`, :mod:`..quad_writes`, :mod:`..ledger`,
:mod:`..namespaces`, :mod:`..migrate`, :mod:`..engine`) ask the target's :class:`Dialect`
whenever the answer depends on the database: which statements, which locks, how an
engine's connections are set up, how a batch of keys or prefix rows is sent. One object per
dialect, chosen once from the URL (:func:`patchsync.apply.targets.sql.dialects.dialect_of`);
nothing outside the dialect modules tests a dialect's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from sqlalchemy import URL, Connection, Engine

from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.quad_writes import QuadWrites
from patchsync.apply.targets.sql.source_locks import SourceLocks
from patchsync.apply.targets.sql.statements import Statements

#: The target's way of reading: the connection, inside its open transaction or a short one.
Reading = Callable[[], AbstractContextManager[Connection]]


class Dialect:
    """One SQL dialect's rules (stateless; the parts it makes hold the state)."""

    #: SQLAlchemy's name of the dialect (``engine.dialect.name``).
    name: ClassVar[str]
    #: The name messages use.
    title: ClassVar[str]
    #: Every statement of the write path (:mod:`..statements`).
    statements: ClassVar[Statements]
    #: Settings of a target URL that patchsync reads itself (``?name=N``), by name.
    url_settings: ClassVar[Mapping[str, Any]] = {}
    #: The query listing the quad table's secondary indexes: (quoted name, the statement
    #: that makes it), see :mod:`..bulk`.
    secondary_indexes: ClassVar[str]

    def read_settings(self, url: URL) -> dict[str, float]:
        """The values of :attr:`url_settings` in ``url`` (refused when unusable)."""
        return {}

    def setup_engine(self, engine: Engine, settings: dict[str, float]) -> None:
        """Set up every connection ``engine`` makes the way patchsync relies on."""
        raise NotImplementedError

    def open_session(self, conn: Connection) -> None:
        """Session settings of the target's connection, sent in a transaction that commits."""

    def lock_target(self, cursor: Any) -> None:
        """The first statement of a write transaction: hold the target's write lock until it
        ends, so one applier at a time writes to a target (docs/design.md §3)."""

    def lock_schema(self, conn: Connection) -> None:
        """Wait until no other process changes the schema; held until the transaction ends."""

    def source_locks(self, link: Link, reading: Reading) -> SourceLocks:
        """The locks that keep a second applier off a source while one applies it, for one
        target (:mod:`..source_locks`; the checkpoint's version check guards every dialect
        anyway)."""
        return SourceLocks()

    def write_prefixes(self, cursor: Any, binds: list[tuple[str, str, Any]], unbinds: list[tuple[str, str]]) -> None:
        """Delete the ``(graph, prefix)`` pairs of ``unbinds``, then bind those of ``binds``."""
        raise NotImplementedError

    def write_records(self, cursor: Any, records: list[tuple[Any, ...]]) -> None:
        """Insert patch records (rows of the ``record`` statement's columns), in order."""
        cursor.executemany(self.statements.record, records)

    def quad_writes(self, link: Link, term_cache: int, term_cache_chars: int) -> QuadWrites:
        """The target's quad writes, holding its term dictionary (``.terms``), bounded so."""
        raise NotImplementedError


__all__ = ["Dialect", "Reading"]
