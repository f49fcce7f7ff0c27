"""Schema management through Alembic, configured in code (no ``alembic.ini``).

Schema changes are serialised across processes by the dialect's schema lock
(:meth:`~patchsync.apply.targets.sql.dialects.base.Dialect.lock_schema`), taken before the
revision is read again and the migration runs, so replicas started together find the schema
made by the first one instead of racing it (concurrent ``CREATE TABLE`` of one name fails on
PostgreSQL's catalog; SQLite's ``BEGIN IMMEDIATE`` already holds the write lock).

The migration scripts live in the top-level ``migrations/`` folder and ship inside the
package as ``patchsync/apply/targets/sql/migrations`` (a symbolic link to it, followed by wheel and
editable builds), so an installed patchsync can upgrade a database without the source tree.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, inspect

from patchsync.apply.targets.sql.dialects import dialect_of
from patchsync.apply.targets.sql.schema import VERSION_TABLE
from patchsync.errors import ApplyError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: The newest revision in ``migrations/versions``, known without loading Alembic (whose import
#: costs a SQL target's opening 0.15-0.3 s: it pulls in Mako and Pygments). A test holds it
#: to :func:`head_revision`, so adding a migration without updating it fails the suite.
HEAD_REVISION = "0004"


def _config(connection: Connection) -> object:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest schema revision this patchsync knows."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def current_revision(connection: Connection) -> str | None:
    """The database's schema revision, ``None`` if patchsync never created its schema there."""
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def serialise(connection: Connection) -> None:
    """Wait until no other process changes this schema; held until the transaction ends
    (the dialect's lock, see the module docstring)."""
    dialect_of(connection).lock_schema(connection)


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` inside the connection's transaction."""
    from alembic import command

    serialise(connection)
    config = _config(connection)
    command.upgrade(config, revision)  # type: ignore[arg-type]


def _at_head(connection: Connection) -> bool:
    """Whether the database is at :data:`HEAD_REVISION`, read with one query and no Alembic."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return False
    rows = connection.exec_driver_sql(f"SELECT version_num FROM {VERSION_TABLE}").fetchall()
    # Anything else (no row, several heads) is left to Alembic's own reading below.
    return len(rows) == 1 and rows[0][0] == HEAD_REVISION


def ensure_schema(connection: Connection) -> None:
    """Create the schema in an empty database; refuse a database at another revision."""
    if _at_head(connection):
        # The usual case, every time a target opens: nothing to create or refuse.
        return
    # Another process may be creating or upgrading the schema right now: wait for it, then
    # read the revision it left.
    serialise(connection)
    if _at_head(connection):
        return
    current = current_revision(connection)
    head = head_revision()
    if current == head:
        return
    if current is None:
        existing = [t for t in inspect(connection).get_table_names() if t.startswith("ps_")]
        if existing:
            raise ApplyError(
                f"the database has patchsync tables ({', '.join(sorted(existing))}) but no schema version; "
                "refusing to touch it"
            )
        upgrade(connection)
        return
    raise ApplyError(
        f"the database schema is at revision {current}, this patchsync needs {head}: "
        "run 'patchsync db upgrade TARGET' first"
    )
