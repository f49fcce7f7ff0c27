"""The SQL dialects patchsync supports, each a strategy object, chosen once from the URL.

Everything that differs between SQLite and PostgreSQL (statements, locks, engine and
session setup, how batches and prefix rows are sent, the term dictionary's way of storing
new terms) is in :mod:`.sqlite` and :mod:`.postgres`; the SQL target and its shared parts
ask the dialect the URL names (:func:`dialect_of`, :func:`dialect_for_url`) and never test
a dialect's name themselves (tests/test_sql_dialects.py).
"""

from __future__ import annotations

from sqlalchemy import URL, Connection, Engine

from patchsync.apply.targets.sql.dialects.base import Dialect
from patchsync.apply.targets.sql.dialects.postgres import PostgresDialect
from patchsync.apply.targets.sql.dialects.sqlite import SqliteDialect
from patchsync.errors import UsageError

#: The supported dialects by SQLAlchemy dialect name (a URL's backend, ``sqlite``,
#: ``postgresql``, whatever its driver).
DIALECTS: dict[str, Dialect] = {d.name: d for d in (SqliteDialect(), PostgresDialect())}


def dialect_for_url(url: URL) -> Dialect:
    """The dialect of a database URL; a :class:`UsageError` naming it if unsupported."""
    dialect = DIALECTS.get(url.get_backend_name())
    if dialect is None:
        supported = " and ".join(d.title for d in DIALECTS.values())
        raise UsageError(
            f"{url.render_as_string(hide_password=True)}: unsupported database {url.get_backend_name()!r}: "
            f"patchsync supports {supported}"
        )
    return dialect


def dialect_of(bind: Engine | Connection) -> Dialect:
    """The dialect of an engine or of a connection's engine (see :func:`dialect_for_url`)."""
    return dialect_for_url(bind.engine.url)


def url_settings(url: URL, dialect: Dialect) -> dict[str, float]:
    """The patchsync settings ``url`` gives ``dialect``; a setting of another dialect is refused."""
    for other in DIALECTS.values():
        for key in other.url_settings:
            if key in url.query and key not in dialect.url_settings:
                raise UsageError(f"{url.render_as_string(hide_password=True)}: {key} is a {other.title} setting")
    return dialect.read_settings(url)


def setting_names() -> set[str]:
    """Every URL setting any dialect reads itself (taken out of the URL the driver sees)."""
    return {key for d in DIALECTS.values() for key in d.url_settings}


__all__ = ["DIALECTS", "Dialect", "dialect_for_url", "dialect_of", "setting_names", "url_settings"]
