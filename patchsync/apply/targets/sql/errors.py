"""SQL driver errors (SQLAlchemy, psycopg, sqlite3) translated into the patchsync tree.

Every public method of :class:`~patchsync.apply.targets.sql.target.SqlTarget` that talks
to the database raises through :func:`translate`, so no driver exception leaves the
backend: the tail daemon and the CLI only ever see :class:`TargetUnavailable` ("out of
reach for now, reopen and resume") or :class:`ApplyError` ("a retry repeats it").

:data:`RULES` is the table, most specific first; the first rule matching the error or
anything it wraps (``orig``, ``__cause__``, ``__context__``) decides. Errors no rule
names are :class:`ApplyError`: disk full, read-only files, constraint or schema errors.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError

from patchsync.errors import ApplyError, ErrorRule, ErrorTable, TargetUnavailable, first_line, permanent_failure

#: SQLSTATEs after which the same work can succeed on a new connection, with why.
TRANSIENT_SQLSTATES: dict[str, str] = {
    "57P01": "admin shutdown",
    "57P02": "crash shutdown",
    "57P03": "server starting up",
    "53300": "too many connections",
    "40001": "serialization failure",
    "40P01": "deadlock",
}
#: The SQLSTATE of a duplicate key (see :func:`is_unique_violation`).
UNIQUE_VIOLATION = "23505"
#: SQLSTATE class 08: connection exceptions (refused, lost, rejected).
CONNECTION_CLASS = "08"
#: Primary SQLite result codes meaning another connection holds the lock.
SQLITE_BUSY = 5
SQLITE_LOCKED = 6


def _sqlstate(exc: BaseException) -> str | None:
    code = getattr(exc, "sqlstate", None)
    return code if isinstance(code, str) else None


def is_unique_violation(exc: BaseException) -> bool:
    """Whether ``exc`` is PostgreSQL's duplicate-key error. The write path expects it from
    plain inserts that race or guess (the PostgreSQL dialect's term dictionary and quad
    writes) and retries them another way."""
    return _sqlstate(exc) == UNIQUE_VIOLATION


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_psycopg(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # SQLite-only installs have no psycopg, hence no psycopg errors
        return False
    return isinstance(exc, psycopg.Error)


def _psycopg_connection_failure(exc: BaseException) -> bool:
    # No SQLSTATE: the failure happened on the connection itself (refused, closed by
    # the server), never in a statement.
    if not _is_psycopg(exc):
        return False
    import psycopg

    return isinstance(exc, psycopg.OperationalError) and _sqlstate(exc) is None


def _sqlite_locked_text(exc: BaseException) -> bool:
    # Errors raised by our own connect hook carry no code, only SQLite's message.
    return isinstance(exc, sqlite3.OperationalError) and _sqlite_code(exc) is None and "database is locked" in str(exc)


#: The translation table, most specific first; errors no row names are ``ApplyError``.
RULES: tuple[ErrorRule, ...] = (
    ErrorRule("no retry can fix it", (Exception,), ApplyError, lambda e: permanent_failure(e) is not None),
    ErrorRule("already translated", (TargetUnavailable,), TargetUnavailable),
    ErrorRule("SQLAlchemy lost the connection", (DisconnectionError,), TargetUnavailable),
    ErrorRule(
        "connection invalidated",
        (DBAPIError,),
        TargetUnavailable,
        lambda e: isinstance(e, DBAPIError) and e.connection_invalidated,
    ),
    ErrorRule("transient SQLSTATE", (Exception,), TargetUnavailable, lambda e: _sqlstate(e) in TRANSIENT_SQLSTATES),
    ErrorRule(
        "SQLSTATE class 08 (connection exception)",
        (Exception,),
        TargetUnavailable,
        lambda e: (_sqlstate(e) or "").startswith(CONNECTION_CLASS),
    ),
    ErrorRule("psycopg connection failure (no SQLSTATE)", (Exception,), TargetUnavailable, _psycopg_connection_failure),
    ErrorRule(
        "SQLITE_BUSY / SQLITE_LOCKED",
        (sqlite3.Error,),
        TargetUnavailable,
        lambda e: _sqlite_code(e) in (SQLITE_BUSY, SQLITE_LOCKED),
    ),
    ErrorRule(
        "SQLite 'database is locked' (no code)", (sqlite3.OperationalError,), TargetUnavailable, _sqlite_locked_text
    ),
    ErrorRule("any other driver error", (SQLAlchemyError, sqlite3.Error, Exception), ApplyError),
)


def reason(exc: BaseException) -> str:
    """The first line of the driver's message (SQLAlchemy adds SQL text and links below it)."""
    return first_line(exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc)


#: Every SQL driver error leaves through this table (rules matched over the error, the
#: driver error it wraps and what it was raised from).
ERRORS = ErrorTable(RULES, reason=reason)
classify = ERRORS.classify
translate = ERRORS.translate


__all__ = ["ERRORS", "RULES", "UNIQUE_VIOLATION", "classify", "is_unique_violation", "reason", "translate"]
