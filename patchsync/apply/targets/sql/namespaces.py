"""Prefix bindings of the SQL target (``ps_namespaces``), one row or a group's rows at a time.

A commit group (:mod:`patchsync.apply.group`) hands over the prefix rows of all its units
at once (:meth:`Namespaces.write_prefixes`). Bindings of distinct ``(graph, name)`` pairs
commute and a later row on one pair replaces what an earlier one did, so the rows reduce to
each pair's last one: one upsert of the pairs left bound and one delete of those left
unbound, whatever the number of rows (on PostgreSQL each one statement over arrays).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Connection, select

from patchsync.apply.target import PrefixOp
from patchsync.apply.targets.sql import schema
from patchsync.apply.targets.sql.statements import Statements


class Namespaces:
    """``add_prefix``, ``delete_prefix``, ``write_prefixes`` and ``namespaces`` for ``SqlTarget`` (a mixin)."""

    dialect: str
    sql: Statements
    _cur: Any

    def _guard(self, what: str) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _reading(self) -> AbstractContextManager[Connection]:
        raise NotImplementedError

    def _before_write(self) -> None:
        raise NotImplementedError

    def namespaces(self) -> dict[tuple[str, str], str]:
        n = schema.namespaces
        with self._reading() as conn:
            return {(r.g, r.prefix): r.iri for r in conn.execute(select(n))}

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        with self._guard("binding a prefix"):
            self._before_write()
            self._cur.execute(self.sql.ns_upsert, (graph or "", name, iri))

    def delete_prefix(self, graph: Any, name: str) -> None:
        with self._guard("removing a prefix"):
            self._before_write()
            self._cur.execute(self.sql.ns_delete, (graph or "", name))

    def write_prefixes(self, ops: Sequence[PrefixOp]) -> None:
        """The prefix rows ``ops``, in log order, as one change (see the module docstring)."""
        final: dict[tuple[str, str], Any] = {}
        for bind, graph, name, iri in ops:
            final[(graph or "", name)] = iri if bind else None
        binds = [(g, name, iri) for (g, name), iri in final.items() if iri is not None]
        unbinds = [(g, name) for (g, name), iri in final.items() if iri is None]
        with self._guard("writing prefixes"):
            self._before_write()
            cursor = self._cur
            if self.dialect == "postgresql":
                # Columns as arrays: one statement each, however many pairs.
                for sql, rows in ((self.sql.ns_delete_many, unbinds), (self.sql.ns_upsert_many, binds)):
                    if rows:
                        cursor.execute(sql, [list(column) for column in _columns(rows)])
            else:
                # In-process statements: one per pair costs SQLite no round trip.
                if unbinds:
                    cursor.executemany(self.sql.ns_delete, unbinds)
                if binds:
                    cursor.executemany(self.sql.ns_upsert, binds)


def _columns(rows: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    return zip(*rows, strict=True)


__all__ = ["Namespaces"]
