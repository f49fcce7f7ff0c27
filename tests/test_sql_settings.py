"""Settings in a SQL target's URL that patchsync reads itself (``?cache_mb=``, ``?checkpoint_pages=``).

SQLAlchemy's SQLite driver ignores query parameters it does not know (with a warning), so a
misspelt or unreadable size would silently run with the default: patchsync takes the setting
out of the URL before the driver sees it and refuses what it cannot use, in one line.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("setting", sorted(SQLITE_SETTINGS))
@pytest.mark.parametrize("value", ["0", "-5", "big", "1.5"])
def test_unusable_values_are_refused(tmp_path: Path, setting: str, value: str) -> None:
    unit = SQLITE_SETTINGS[setting].unit
    with pytest.raises(UsageError, match=rf"{setting} must be a whole number of {unit}"):
        create_sql_engine(f"sqlite:///{tmp_path / 'a.db'}?{setting}={value}")


@pytest.mark.parametrize("setting", sorted(SQLITE_SETTINGS))
def test_sqlite_settings_are_refused_on_postgresql(setting: str) -> None:
    # Refused before connecting: no server is needed to tell.
    with pytest.raises(UsageError, match=f"{setting} is a SQLite setting"):
        create_sql_engine(f"postgresql+psycopg://postgres@127.0.0.1:5432/test?{setting}=64")


def test_the_command_line_says_one_line(tmp_path: Path) -> None:
    log = tmp_path / "one.rdfp"
    log.write_text("A <http://e/s> <http://e/p> <http://e/o> .\n")
    db = tmp_path / "r.db"
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", str(log), "--target", f"sqlite:///{db}?cache_mb=lots"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cache_mb must be a whole number" in lines[0], done.stderr
    assert not db.exists()  # refused before anything was opened
