"""Opening SQL databases: engines with patchsync's per-dialect settings, schema upgrades."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from patchsync.apply.targets.sql.errors import translate
from patchsync.apply.targets.sql.migrate import current_revision, head_revision, serialise, upgrade
from patchsync.apply.targets.sql.pg_arrays import register as register_arrays
from patchsync.errors import UsageError


def create_sql_engine(url: str) -> Engine:
    """A SQLAlchemy engine for ``url`` with the per-dialect settings patchsync relies on.

    SQLite waits up to 30 s for another process's lock; ``?timeout=SECONDS`` in the URL
    (the sqlite3 driver's own parameter) sets another wait. The settings of
    :data:`SQLITE_SETTINGS` (``?cache_mb=N``, ``?checkpoint_pages=N``) are read by patchsync
    and applied to every connection; the driver never sees them.
    """
    try:
        parsed = make_url(url)
        settings = _sqlite_settings(parsed)
        engine = create_engine(parsed.difference_update_query(SQLITE_SETTINGS))
    except (ArgumentError, ImportError) as exc:
        raise UsageError(f"cannot open target {url!r}: {exc}") from exc
    except SQLAlchemyError as exc:
        raise translate(exc, f"cannot open target {url!r}") from exc
    if engine.dialect.name == "sqlite":
        _sqlite_setup(engine, settings)
    elif engine.dialect.name == "postgresql":
        _postgresql_setup(engine)
    else:
        raise UsageError(f"unsupported database {engine.dialect.name!r}: patchsync supports SQLite and PostgreSQL")
    return engine


@dataclass(frozen=True)
class SqliteSetting:
    """A setting of a SQLite target URL that patchsync reads itself (``?name=N``)."""

    default: int
    unit: str  # how messages name the value
    pragma: Callable[[int], str]  # the statement that applies it to each connection


#: patchsync's own SQLite URL settings: taken out of the URL before the driver sees it
#: (SQLAlchemy's driver would ignore them with a warning) and applied per connection.
SQLITE_SETTINGS: dict[str, SqliteSetting] = {
    # Inserts land all over the term and quad indexes; a 64 MiB page cache (SQLite's default
    # is 2 MiB) doubles the insert rate once the database outgrows the default.
    "cache_mb": SqliteSetting(64, "MiB", lambda v: f"PRAGMA cache_size=-{v * 1024}"),
    # SQLite checkpoints the WAL into the database once it holds this many pages; each
    # checkpoint writes every page dirtied since the last one.
    "checkpoint_pages": SqliteSetting(1000, "pages", lambda v: f"PRAGMA wal_autocheckpoint={v}"),
}


def _sqlite_settings(url: URL) -> dict[str, int]:
    """The values of :data:`SQLITE_SETTINGS` in ``url`` (refused anywhere but SQLite, and
    when not a positive whole number)."""
    name = url.render_as_string(hide_password=True)
    values = {}
    for key, setting in SQLITE_SETTINGS.items():
        raw = url.query.get(key)
        if raw is None:
            values[key] = setting.default
            continue
        if url.get_backend_name() != "sqlite":
            raise UsageError(f"{name}: {key} is a SQLite setting")
        try:
            value = int(str(raw))
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError(f"{name}: {key} must be a whole number of {setting.unit}, at least 1 (got {raw!r})")
        values[key] = value
    return values


def _sqlite_setup(engine: Engine, settings: dict[str, int]) -> None:
    try:
        busy_ms = int(float(str(engine.url.query.get("timeout", "30"))) * 1000)
    except ValueError:
        raise UsageError(f"{engine.url}: timeout must be a number of seconds") from None

    path = engine.url.database

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE is ours to send.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            # SQLite says "unable to open database file" when WAL cannot create its -shm
            # and -wal files next to the database: name the reason it cannot know.
            raise sqlite3.OperationalError(f"{exc}{_unwritable(path)}") from exc
        # WAL + NORMAL: a committed transaction survives a process crash; only power loss
        # can drop the last commits, and then checkpoint and data go back together.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={max(0, busy_ms)}")
        for key, value in settings.items():
            cursor.execute(SQLITE_SETTINGS[key].pragma(value))
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _postgresql_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        # The write path sends its batches as prebuilt binary arrays (pg_arrays).
        register_arrays(dbapi_connection)  # psycopg (3) is the only PostgreSQL driver supported


def _unwritable(path: str | None) -> str:
    """Why the directory of a SQLite database cannot be written, as a suffix ("" if it can)."""
    if not path or path == ":memory:":
        return ""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return f" ({directory} is on a read-only file system)"
    except OSError:
        return ""
    if not os.access(directory, os.W_OK):
        return f" ({directory} is not writable)"
    return ""


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
