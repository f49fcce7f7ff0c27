"""SQL target (SQLite, PostgreSQL) with its Alembic-managed schema."""

from .migrate import current_revision, head_revision
from .target import SqlTarget, create_sql_engine, upgrade_database

__all__ = ["SqlTarget", "create_sql_engine", "current_revision", "head_revision", "upgrade_database"]
