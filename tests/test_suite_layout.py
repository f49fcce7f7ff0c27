"""How the suite is laid out (tests/README.md): the markers conftest.py gives each test
(tests/markers.py), and that no test imports ``bench/``."""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from . import process_helpers
from .markers import _spawns


def _runs_the_cli() -> None:
    subprocess.run([sys.executable, "-m", "patchsync", "--help"], check=True)


def _calls_a_helper_that_runs_the_cli() -> None:
    _runs_the_cli()


class _Server:
    def start(self) -> None:
        os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], os.environ)


def _starts_a_server() -> None:
    _Server().start()


class _NamedServer(_Server):
    name = "inherits start() from its base class"


def _starts_a_server_whose_start_is_inherited() -> None:
    _NamedServer().start()


def _pure() -> int:
    return sum(range(10))


def _waits() -> None:
    process_helpers.wait_for(lambda: True)


def _uses_os_but_starts_nothing() -> str:
    return os.path.join("a", "b")


@pytest.mark.parametrize(
    ("func", "starts"),
    [
        (_runs_the_cli, True),
        (_calls_a_helper_that_runs_the_cli, True),
        (_starts_a_server, True),
        (_starts_a_server_whose_start_is_inherited, True),
        (lambda: _runs_the_cli(), True),
        (_pure, False),
        (_waits, False),
        (_uses_os_but_starts_nothing, False),
    ],
)
def test_a_process_is_found_through_helpers_classes_and_lambdas(func: object, starts: bool) -> None:
    assert _spawns(func, set()) is starts


def test_an_in_process_test_is_unit_only(request: pytest.FixtureRequest) -> None:
    marks = {m.name for m in request.node.iter_markers()} & {"unit", "integration", "e2e", "postgres", "nats", "spark"}
    assert marks == {"unit"}


def test_a_test_starting_the_command_line_is_e2e_not_unit(request: pytest.FixtureRequest) -> None:
    _calls_a_helper_that_runs_the_cli()
    marks = {m.name for m in request.node.iter_markers()}
    assert "e2e" in marks and "unit" not in marks


def test_a_sparql_store_test_is_sparql_integration_and_e2e(
    request: pytest.FixtureRequest, oxigraph_server: Any
) -> None:
    marks = {m.name for m in request.node.iter_markers()}
    assert {"sparql", "integration", "e2e"} <= marks and "unit" not in marks


def test_a_wait_on_progress_outlasts_its_stall_while_progress_goes_on() -> None:
    ticks = itertools.count()
    seen = []

    def cond() -> bool:
        seen.append(1)
        return len(seen) > 20  # ~1 s of polls: far more than the stall of 0.2 s

    process_helpers.wait_for(cond, 0.2, "a growing log", progress=lambda: next(ticks))
    assert len(seen) == 21


def test_a_wait_on_progress_fails_once_progress_stops() -> None:
    with pytest.raises(AssertionError, match=r"waiting for a stuck server \(no progress for 0.2 s"):
        process_helpers.wait_for(lambda: False, 0.2, "a stuck server", progress=lambda: 0)


def test_only_the_postgres_case_of_sql_url_needs_postgres(request: pytest.FixtureRequest, sql_url: str) -> None:
    marks = {m.name for m in request.node.iter_markers()}
    postgres = sql_url.startswith("postgresql")
    assert ("postgres" in marks) is postgres
    assert ("integration" in marks) is postgres
    assert ("unit" in marks) is not postgres


def test_no_test_imports_bench() -> None:
    """Benchmarks may import the tests' workloads; a test never depends on a benchmark."""
    found = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.name}:{node.lineno} {n}" for n in names if n == "bench" or n.startswith("bench.")]
    assert found == []
