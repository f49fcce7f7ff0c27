"""Settings in a SQL target's URL that patchsync reads itself (``?timeout=``, ``?cache_mb=``,
``?checkpoint_pages=``).

SQLAlchemy's SQLite driver ignores query parameters it does not know (with a warning) and
fails on an unreadable ``timeout`` with a traceback, so a misspelt or unreadable setting would
silently run with the default or crash: patchsync takes the settings out of the URL before the
driver sees them and refuses, in one line, a value it cannot use and any other parameter.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from sqlalchemy import text

from patchsync.apply.targets.sql.engine import SQLITE_SETTINGS, create_sql_engine
from patchsync.errors import UsageError


def cache_kib(url: str) -> int:
    engine = create_sql_engine(url)
    try:
        with engine.connect() as conn:
            # A negative cache_size is a size in KiB (SQLite's PRAGMA cache_size).
            return -int(conn.execute(text("PRAGMA cache_size")).scalar_one())
    finally:
        engine.dispose()


def test_default_page_cache(tmp_path: Path) -> None:
    assert cache_kib(f"sqlite:///{tmp_path / 'a.db'}") == SQLITE_SETTINGS["cache_mb"].default * 1024


def test_cache_mb_sets_the_page_cache_and_never_reaches_the_driver(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SQLAlchemy warns about parameters the driver ignores
        assert cache_kib(f"sqlite:///{tmp_path / 'a.db'}?cache_mb=300&timeout=2") == 300 * 1024


def pragma(url: str, name: str) -> int:
    engine = create_sql_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(f"PRAGMA {name}")).scalar_one())
    finally:
        engine.dispose()


def test_checkpoint_pages_sets_the_wal_autocheckpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert pragma(url, "wal_autocheckpoint") == SQLITE_SETTINGS["checkpoint_pages"].default
    assert pragma(f"{url}?checkpoint_pages=25000&cache_mb=8", "wal_autocheckpoint") == 25000


def test_timeout_sets_the_busy_timeout_and_never_reaches_the_driver(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert pragma(url, "busy_timeout") == SQLITE_SETTINGS["timeout"].default * 1000 == 30_000
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pragma(f"{url}?timeout=2.5", "busy_timeout") == 2500


UNUSABLE = {
    "timeout": ["0", "-5", "abc", "nan", "inf"],
    "cache_mb": ["0", "-5", "big", "1.5"],
    "checkpoint_pages": ["0", "-5", "big", "1.5"],
}


def test_every_setting_has_unusable_values_here() -> None:
    assert UNUSABLE.keys() == SQLITE_SETTINGS.keys()


@pytest.mark.parametrize(("setting", "value"), [(s, v) for s, values in UNUSABLE.items() for v in values])
def test_unusable_values_are_refused(tmp_path: Path, setting: str, value: str) -> None:
    rule = SQLITE_SETTINGS[setting].rule
    with pytest.raises(UsageError, match=rf"{setting} must be {re.escape(rule)} \(got '{re.escape(value)}'\)"):
        create_sql_engine(f"sqlite:///{tmp_path / 'a.db'}?{setting}={value}")


@pytest.mark.parametrize("query", ["bogus=1", "timeout=2&mode=ro", "isolation_level=SERIALIZABLE"])
def test_other_parameters_are_refused_naming_the_ones_taken(tmp_path: Path, query: str) -> None:
    unknown = next(part.partition("=")[0] for part in query.split("&") if part.partition("=")[0] not in SQLITE_SETTINGS)
    with pytest.raises(UsageError) as err:
        create_sql_engine(f"sqlite:///{tmp_path / 'a.db'}?{query}")
    assert f"unknown parameter {unknown!r}" in str(err.value)
    assert all(f"?{name}=" in str(err.value) for name in SQLITE_SETTINGS)


def test_a_setting_given_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="timeout is given 2 times"):
        create_sql_engine(f"sqlite:///{tmp_path / 'a.db'}?timeout=1&timeout=2")


@pytest.mark.parametrize("setting", sorted(SQLITE_SETTINGS))
def test_sqlite_settings_are_refused_on_postgresql(setting: str) -> None:
    # Refused before connecting: no server is needed to tell.
    with pytest.raises(UsageError, match=f"{setting} is a SQLite setting"):
        create_sql_engine(f"postgresql+psycopg://postgres@127.0.0.1:5432/test?{setting}=64")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("cache_mb=lots", "cache_mb must be a whole number"),
        ("timeout=abc", "timeout must be a number of seconds above 0"),
        ("timeout=0", "timeout must be a number of seconds above 0"),
        ("bogus=1", "unknown parameter 'bogus'"),
    ],
)
def test_the_command_line_says_one_line(tmp_path: Path, query: str, says: str) -> None:
    log = tmp_path / "one.rdfp"
    log.write_text("A <http://e/s> <http://e/p> <http://e/o> .\n")
    db = tmp_path / "r.db"
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", str(log), "--target", f"sqlite:///{db}?{query}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert not db.exists()  # refused before anything was opened


@pytest.mark.parametrize("query", ["timeout=", "cache_mb=&timeout=2", "sslmode="])
def test_a_parameter_without_a_value_is_refused_not_taken_as_the_default(tmp_path: Path, query: str) -> None:
    # SQLAlchemy's URL parser drops such a parameter, which would leave the default in force.
    key = query.split("=")[0]
    with pytest.raises(UsageError, match=f"parameter '{key}' has no value"):
        create_sql_engine(f"sqlite:///{tmp_path / 'a.db'}?{query}")
