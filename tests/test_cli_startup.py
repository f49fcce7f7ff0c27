"""Commands load only what they use (issue #16: start-up under 0.25 s without a SQL target).

Times live in ``bench/startup_bench.py``; this pins the imports that make them, which a test
can check exactly: a command run in a fresh interpreter, then ``sys.modules`` inspected.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("sqlalchemy", "alembic", "psycopg", "pyspark", "watchdog", "pyoxigraph", "rdflib")

PROBE = """
import json, sys
from patchsync.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))), file=sys.stderr)
"""


def loaded(args: list[str], cwd: Path) -> set[str]:
    code = f"HEAVY = {HEAVY!r}\n" + PROBE
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup")
    subprocess.run(
        [sys.executable, "-m", "patchsync", "convert", str(ROOT / "examples" / "library.rdfp"), "log.jellyp"],
        cwd=path,
        check=True,
        capture_output=True,
    )
    return path


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["--version"], set()),
        (["--help"], set()),
        (["inspect", "log.jellyp"], set()),
        (["convert", "log.jellyp", "out.rdfp"], set()),
        # A file target holds N-Triples strings: rdflib loads only to read a file it did not write.
        (["status", "--target", "file:state.nq"], set()),
        (["dump", "--target", "file:state.nq"], set()),
    ],
)
def test_commands_import_only_what_they_use(folder: Path, args: list[str], allowed: set[str]) -> None:
    assert loaded(args, folder) <= allowed


def test_the_probe_sees_heavy_imports(folder: Path) -> None:
    # The check can fail: a SQL target does load SQLAlchemy.
    assert "sqlalchemy" in loaded(["status", "--target", "sqlite:///state.db"], folder)
