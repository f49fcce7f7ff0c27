"""SQL target (SQLite, PostgreSQL) with its Alembic-managed schema."""

from patchsync.apply.targets.sql.engine import create_sql_engine, upgrade_database
from patchsync.apply.targets.sql.migrate import current_revision, head_revision
from patchsync.apply.targets.sql.target import SqlTarget

__all__ = ["SqlTarget", "create_sql_engine", "current_revision", "head_revision", "upgrade_database"]
