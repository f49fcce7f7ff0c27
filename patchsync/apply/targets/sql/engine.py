"""Opening SQL databases: engines with patchsync's per-dialect settings, schema upgrades."""

from __future__ import annotations

from urllib.parse import parse_qsl

from sqlalchemy import Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from patchsync._lazy import optional_dependency
from patchsync.apply.targets.sql.dialects import dialect_for_url, setting_names, url_settings
from patchsync.apply.targets.sql.dialects.sqlite import SQLITE_SETTINGS, SqliteSetting
from patchsync.apply.targets.sql.errors import translate
from patchsync.apply.targets.sql.migrate import current_revision, head_revision, serialise, upgrade
from patchsync.errors import UsageError


def create_sql_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` with the per-dialect settings patchsync relies on.

    A SQLite URL's parameters are :data:`SQLITE_SETTINGS` (``?timeout=SECONDS``, by default 30,
    the wait for another process's lock; ``?cache_mb=N``, ``?checkpoint_pages=N``), read by
    patchsync and applied to every connection; the driver never sees them, and any other
    parameter is refused. The dialect
    (:mod:`.dialects`) is chosen here from the URL, before any driver is loaded.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise UsageError(f"cannot open target {url!r}: {exc}") from exc
    # SQLAlchemy drops a parameter given without a value, so ``?timeout=`` would silently
    # mean the default; the user meant something, so say it.
    for key, value in parse_qsl(url.partition("?")[2], keep_blank_values=True):
        if not value:
            raise UsageError(f"{parsed.render_as_string(hide_password=True)}: parameter {key!r} has no value")
    dialect = dialect_for_url(parsed)
    settings = url_settings(parsed, dialect)
    try:
        with optional_dependency(f"target {parsed.render_as_string(hide_password=True)!r}"):
            engine = create_engine(parsed.difference_update_query(setting_names()))
    except (ArgumentError, ImportError) as exc:
        raise UsageError(f"cannot open target {url!r}: {exc}") from exc
    except SQLAlchemyError as exc:
        raise translate(exc, f"cannot open target {url!r}") from exc
    dialect.setup_engine(engine, settings)
    return engine


def upgrade_database(url: str, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the patchsync schema of the database at ``url``; returns (before, after)."""
    engine = create_sql_engine(url)
    try:
        with engine.begin() as conn:
            serialise(conn)  # the revision read next is the one the upgrade starts from
            before = current_revision(conn)
            upgrade(conn, revision)
            after = current_revision(conn)
    except (SQLAlchemyError, engine.dialect.loaded_dbapi.Error) as exc:
        raise translate(exc, f"{safe_url(engine)}: schema upgrade failed") from exc
    finally:
        engine.dispose()
    return before, after or head_revision()


def safe_url(engine: Engine) -> str:
    """The engine's URL with any password hidden (for messages)."""
    return engine.url.render_as_string(hide_password=True)


__all__ = ["SQLITE_SETTINGS", "SqliteSetting", "create_sql_engine", "safe_url", "upgrade_database"]
