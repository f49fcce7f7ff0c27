"""Alembic environment for the patchsync schema: always run programmatically on a given connection."""

from __future__ import annotations

from alembic import context

from patchsync.apply.targets.sql.schema import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
