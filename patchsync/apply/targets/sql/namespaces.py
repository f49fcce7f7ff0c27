"""Prefix bindings of the SQL target (``ps_namespaces``), one row or a group's rows at a time.

A commit group (:mod:`patchsync.apply.group`) hands over the prefix rows of all its units
at once (:meth:`Namespaces.write`). Bindings of distinct ``(graph, name)`` pairs commute and
a later row on one pair replaces what an earlier one did, so the rows reduce to each pair's
last one: one upsert of the pairs left bound and one delete of those left unbound, whatever
the number of rows (how they are sent is the dialect's, see
:meth:`~patchsync.apply.targets.sql.dialects.base.Dialect.write_prefixes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from patchsync.apply.target import PrefixOp
from patchsync.apply.targets.sql import schema
from patchsync.apply.targets.sql.dialects.base import Dialect
from patchsync.apply.targets.sql.link import Link


class Namespaces:
    """The prefix rows of one ``SqlTarget``, a part it holds (the target opens units and
    translates errors around these calls)."""

    def __init__(self, link: Link, dialect: Dialect) -> None:
        self.link = link
        self.dialect = dialect
        self.sql = dialect.statements

    def read(self, conn: Connection) -> dict[tuple[str, str], str]:
        """Every binding: (graph, prefix) -> IRI."""
        n = schema.namespaces
        return {(r.g, r.prefix): r.iri for r in conn.execute(select(n))}

    def bind(self, graph: Any, name: str, iri: Any) -> None:
        self.link.cur.execute(self.sql.ns_upsert, (graph or "", name, iri))

    def unbind(self, graph: Any, name: str) -> None:
        self.link.cur.execute(self.sql.ns_delete, (graph or "", name))

    def write(self, ops: Sequence[PrefixOp]) -> None:
        """The prefix rows ``ops``, in log order, as one change (see the module docstring)."""
        final: dict[tuple[str, str], Any] = {}
        for bind, graph, name, iri in ops:
            final[(graph or "", name)] = iri if bind else None
        binds = [(g, name, iri) for (g, name), iri in final.items() if iri is not None]
        unbinds = [(g, name) for (g, name), iri in final.items() if iri is None]
        self.dialect.write_prefixes(self.link.cur, binds, unbinds)


__all__ = ["Namespaces"]
