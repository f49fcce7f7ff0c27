"""Quad writes of the SQL target: adds, deletes and presence over term-id keys.

Quads are stored as four term ids (see :mod:`.schema`). Each run of adds (or deletes) from
the applier becomes one write of the batch's keys, in key order: the primary key B-tree is
then walked forward instead of at random, and concurrent PostgreSQL appliers take row
locks in one order. The driver's row count is the number of rows that changed the table,
which is exactly the set-semantics count the applier reports. How a batch is sent, and how
``add_each`` and ``delete_each`` tell which quads changed the table, is the dialect's
(:mod:`.dialects`); this module holds what both share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql.link import Link
from patchsync.apply.targets.sql.statements import Statements
from patchsync.apply.targets.sql.terms import TermDictionary


class QuadWrites:
    """The quad statements of one target, a part it holds beside its term dictionary ``terms``."""

    def __init__(self, link: Link, sql: Statements, terms: TermDictionary) -> None:
        self.link = link
        self.sql = sql
        self.terms = terms

    def execute(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        """Run ``sql`` over ``keys`` (sorted here, see the module docstring); the rows it changed."""
        keys.sort()
        return self._send(sql, keys)

    def _send(self, sql: str, keys: list[tuple[int, int, int, int]]) -> int:
        raise NotImplementedError

    def add(self, quads: Sequence[Quad]) -> int:
        """Store ``quads``; how many were absent."""
        raise NotImplementedError

    def delete(self, quads: Sequence[Quad]) -> int:
        """Remove ``quads``; how many were present."""
        keys = [k for k in self.terms.keys(quads, create=False) if k is not None]
        return self.execute(self.sql.delete_quads, keys) if keys else 0

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`add`, telling whether each quad was added (it was absent before)."""
        raise NotImplementedError

    def add_each_later(self, quads: Sequence[Quad]) -> Callable[[], list[bool]]:
        """:meth:`add_each`, the write perhaps left running (the dialect's choice, see
        :class:`.Link`); the function returned waits for it and tells which were added."""
        added = self.add_each(quads)
        return lambda: added

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        """:meth:`delete`, telling whether each quad was deleted (it was present before)."""
        raise NotImplementedError

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        """Whether each quad is present."""
        aligned: list[Any] = self.terms.keys(quads, create=False)
        keys = [k for k in aligned if k is not None]
        found = self._present(keys) if keys else set()
        return [k is not None and k in found for k in aligned]

    def _present(self, keys: list[tuple[int, int, int, int]]) -> set[tuple[int, int, int, int]]:
        """Which of ``keys`` are stored."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the writes hold beside the connection (a thread)."""


__all__ = ["QuadWrites"]
