"""Each backend's driver-error table: which driver errors are transient, which are not.

Real driver exception objects (psycopg's SQLSTATE classes, sqlite3 errors with their
result codes, OSErrors with errno values) go through each table; then real failures
(a refused PostgreSQL connection, a locked SQLite database, a store directory held by
another handle, an unwritable file) come out of the targets as patchsync errors.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from patchsync.apply.targets.file import FILE_ERRORS, FileTarget, file_error
from patchsync.apply.targets.sql import SqlTarget
from patchsync.apply.targets.sql import errors as sql_errors
from patchsync.errors import ApplyError, CheckpointError, PatchsyncError, TargetHeld, TargetUnavailable

from .apply_helpers import apply_text, iri

psycopg = pytest.importorskip("psycopg")


def _pg(code: str) -> BaseException:
    return psycopg.errors.lookup(code)(f"server said {code}")  # type: ignore[no-any-return]


def _sqlite(code: int, message: str = "sqlite failed") -> sqlite3.Error:
    exc = sqlite3.OperationalError(message)
    exc.sqlite_errorcode = code
    return exc


def _wrapped(orig: BaseException, invalidated: bool = False) -> DBAPIError:
    return OperationalError("SELECT 1", {}, orig, connection_invalidated=invalidated)  # type: ignore[arg-type]


SQL_CASES: list[tuple[str, BaseException, type[ApplyError]]] = [
    ("admin shutdown", _pg("57P01"), TargetUnavailable),
    ("crash shutdown", _pg("57P02"), TargetUnavailable),
    ("server starting", _pg("57P03"), TargetUnavailable),
    ("too many connections", _pg("53300"), TargetUnavailable),
    ("serialization failure", _pg("40001"), TargetUnavailable),
    ("deadlock", _pg("40P01"), TargetUnavailable),
    ("connection failure (class 08)", _pg("08006"), TargetUnavailable),
    ("cannot connect (class 08)", _pg("08001"), TargetUnavailable),
    ("refused, no SQLSTATE", psycopg.OperationalError("connection refused"), TargetUnavailable),
    ("wrapped and invalidated", _wrapped(ValueError("gone"), invalidated=True), TargetUnavailable),
    ("wrapped admin shutdown", _wrapped(_pg("57P01")), TargetUnavailable),
    ("already transient", TargetUnavailable("x"), TargetUnavailable),
    ("pool disconnection", DisconnectionError("pre-ping failed"), TargetUnavailable),
    ("SQLITE_BUSY", _sqlite(5), TargetUnavailable),
    ("SQLITE_LOCKED", _sqlite(6), TargetUnavailable),
    ("SQLITE_BUSY_SNAPSHOT (extended)", _sqlite(5 | 2 << 8), TargetUnavailable),
    ("SQLite locked, no code", sqlite3.OperationalError("database is locked"), TargetUnavailable),
    ("wrapped SQLITE_BUSY", _wrapped(_sqlite(5)), TargetUnavailable),
    ("unique violation", _pg("23505"), ApplyError),
    ("undefined table", _pg("42P01"), ApplyError),
    ("PostgreSQL disk full", _pg("53100"), ApplyError),
    ("psycopg programming error", psycopg.ProgrammingError("bad SQL"), ApplyError),
    ("SQLITE_FULL", _sqlite(13, "database or disk is full"), ApplyError),
    ("SQLITE_READONLY", _sqlite(8, "attempt to write a readonly database"), ApplyError),
    ("SQLITE_CANTOPEN", _sqlite(14, "unable to open database file"), ApplyError),
    ("wrapped SQLITE_FULL", _wrapped(_sqlite(13)), ApplyError),
    # Connection failures no retry can fix (psycopg gives them no SQLSTATE either).
    (
        "no such database",
        psycopg.OperationalError('connection failed: FATAL:  database "x" does not exist'),
        ApplyError,
    ),
    (
        "host does not resolve",
        psycopg.OperationalError("failed to resolve host 'h.invalid': [Errno -2] Name or service not known"),
        ApplyError,
    ),
    (
        "wrapped failed authentication",
        _wrapped(psycopg.OperationalError('FATAL:  password authentication failed for user "u"')),
        ApplyError,
    ),
]


@pytest.mark.parametrize(("exc", "kind"), [c[1:] for c in SQL_CASES], ids=[c[0] for c in SQL_CASES])
def test_sql_table(exc: BaseException, kind: type[ApplyError]) -> None:
    assert sql_errors.classify(exc) is kind
    out = sql_errors.translate(exc, "db: adding quads failed")
    assert type(out) is kind
    if not isinstance(exc, PatchsyncError):
        assert str(out).startswith("db: adding quads failed: ")
        assert "\n" not in str(out)


def test_a_cause_chain_is_followed() -> None:
    try:
        try:
            raise _pg("57P01")
        except Exception as inner:
            raise RuntimeError("while committing") from inner
    except RuntimeError as outer:
        assert sql_errors.classify(outer) is TargetUnavailable


def test_patchsync_errors_pass_through_unchanged() -> None:
    exc = CheckpointError("replaced log")
    assert sql_errors.translate(exc, "where") is exc
    assert FILE_ERRORS.translate(exc, "where") is exc


def test_every_sql_rule_is_exercised() -> None:
    hit = set()
    for _, exc, _kind in SQL_CASES:
        rule = sql_errors.ERRORS.rule_for(exc)
        assert rule is not None
        hit.add(rule.name)
    assert hit == {rule.name for rule in sql_errors.RULES}


OX_CASES: list[tuple[str, BaseException, type[ApplyError]]] = [
    ("ENOSPC", OSError(errno.ENOSPC, "No space left on device"), ApplyError),
    ("EROFS", OSError(errno.EROFS, "Read-only file system"), ApplyError),
    ("RocksDB disk full (text)", OSError("IO error: No space left on device: /d/000012.log"), ApplyError),
    ("RocksDB read-only (text)", OSError("IO error: While open a file: /d/LOCK: Read-only file system"), ApplyError),
    (
        "held by another process",
        OSError("IO error: While lock file: /d/LOCK: Resource temporarily unavailable"),
        TargetHeld,  # a TargetUnavailable that apply waits for
    ),
    (
        "held by this process",
        OSError("IO error: lock hold by current process: /d/LOCK: No locks available"),
        TargetHeld,  # a TargetUnavailable that apply waits for
    ),
    ("other I/O", OSError("IO error: Corruption: bad block"), ApplyError),
    ("bad journal", ValueError("Invalid N-Quads"), ApplyError),
    ("bad term", TypeError("expected NamedNode"), ApplyError),
]


@pytest.mark.parametrize(("exc", "kind"), [c[1:] for c in OX_CASES], ids=[c[0] for c in OX_CASES])
def test_oxigraph_table(exc: BaseException, kind: type[ApplyError]) -> None:
    oxigraph = pytest.importorskip("patchsync.apply.targets.oxigraph")
    assert oxigraph.ERRORS.classify(exc) is kind
    out = oxigraph.ERRORS.translate(exc, "/d: oxigraph write failed")
    assert type(out) is kind and str(out).startswith("/d: oxigraph write failed: ")


FILE_CASES: list[tuple[str, BaseException]] = [
    ("disk full", OSError(errno.ENOSPC, "No space left on device")),
    ("quota", OSError(errno.EDQUOT, "Disk quota exceeded")),
    ("read-only", OSError(errno.EROFS, "Read-only file system")),
    ("permission", PermissionError(errno.EACCES, "Permission denied")),
    ("missing", FileNotFoundError(errno.ENOENT, "No such file or directory")),
    ("bad text", ValueError("line 3: expected a triple or quad")),
]


@pytest.mark.parametrize("exc", [c[1] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_file_table_nothing_is_transient(exc: Exception) -> None:
    out = file_error(exc, Path("/d/t.nq"), "cannot write the target")
    assert type(out) is ApplyError
    assert str(out).startswith("/d/t.nq: cannot write the target: ")


# -- real failures ----------------------------------------------------------------------


def test_a_refused_postgresql_connection_is_transient() -> None:
    with pytest.raises(TargetUnavailable, match="cannot open the database") as err:
        SqlTarget("postgresql+psycopg://postgres@127.0.0.1:1/test")
    assert err.value.__cause__ is not None


def test_a_locked_sqlite_database_is_transient(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    url = f"sqlite:///{db}?timeout=0.001"
    target = SqlTarget(url)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(TargetUnavailable, match="cannot open the database: database is locked") as opening:
            SqlTarget(url)
        assert not isinstance(opening.value.__cause__, PatchsyncError)
        with pytest.raises(TargetUnavailable, match="locked"):
            apply_text(f"A {iri('s')} {iri('p')} {iri('o')} .\n", target)
        target.discard()
    finally:
        holder.close()


def test_a_held_oxigraph_store_is_transient(tmp_path: Path) -> None:
    oxigraph = pytest.importorskip("patchsync.apply.targets.oxigraph")
    first = oxigraph.OxigraphTarget(tmp_path / "store")
    try:
        with pytest.raises(TargetUnavailable, match="cannot open the oxigraph store"):
            oxigraph.OxigraphTarget(tmp_path / "store")
    finally:
        first.close()


def test_an_unwritable_file_target_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / "gone-dir" / "t.nq"
    path.parent.mkdir()
    target = FileTarget(path)
    path.parent.rmdir()
    # The first write takes the lock beside the data, so that is what fails first.
    with pytest.raises(ApplyError, match=f"{path}.lock: cannot lock the target") as err:
        apply_text(f"A {iri('s')} {iri('p')} {iri('o')} .\n", target)
    assert not isinstance(err.value, TargetUnavailable)
    assert "No such file or directory" in str(err.value)
    assert isinstance(_innermost(err.value), OSError)


def test_a_file_target_in_a_missing_directory_is_refused_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "missing-dir" / "t.nq"
    with pytest.raises(ApplyError, match=f"{path}: cannot open the target: no such directory {path.parent}"):
        FileTarget(path)
    assert not path.parent.exists()


def _innermost(exc: BaseException) -> BaseException:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc
