"""Loading an empty quad table in bulk: its secondary indexes built after the rows.

Each quad inserted into ``ps_quads`` lands at a random place in each secondary index
(``posg``, ``ogsp``, ``gspo``, see :mod:`.schema`); once those trees outgrow the CPU's
caches every insert is a descent through cold pages, which is what bounds the rate of a
growing table (bench.scale_bench). An index built after the rows sorts them once instead.

Those indexes serve readers' pattern lookups only: the write path reaches ``ps_quads``
through its primary key, and ``ps_terms`` keeps its own indexes. So a unit writing into an
empty table may drop them, insert, and make them again before it commits. DDL is
transactional in SQLite and PostgreSQL: a rollback (of the unit's savepoint or of the
whole transaction) or a crash brings the indexes back with the empty table, and no
committed state ever lacks them. The definitions are read from the database's catalog,
so whatever the migrations made is what is rebuilt.
"""

from __future__ import annotations

from typing import Any

from patchsync.apply.targets.sql.dialects.base import Dialect

#: Whether the quad table holds any row.
ANY_QUAD = "SELECT 1 FROM ps_quads LIMIT 1"


def secondary_indexes(cursor: Any, dialect: Dialect) -> list[tuple[str, str]]:
    """The quad table's non-unique indexes (a unique one is a constraint the load relies on):
    (quoted name, the statement that makes it), read from the dialect's catalog."""
    return [(str(name), str(ddl)) for name, ddl in cursor.execute(dialect.secondary_indexes).fetchall()]


def drop_secondary(cursor: Any, dialect: Dialect) -> list[str]:
    """Drop the quad table's secondary indexes; returns the statements that make them again."""
    found = secondary_indexes(cursor, dialect)
    for name, _ddl in found:
        cursor.execute(f"DROP INDEX {name}")
    return [ddl for _name, ddl in found]


def build(cursor: Any, statements: list[str]) -> None:
    """Make the indexes :func:`drop_secondary` dropped, each with one sort of the table."""
    for ddl in statements:
        cursor.execute(ddl)


__all__ = ["ANY_QUAD", "build", "drop_secondary", "secondary_indexes"]
