"""Shared fixtures, and the markers every test gets from what it uses (tests/markers.py).

PostgreSQL: each pytest process (each xdist worker) creates a database of its own on the
server at ``PATCHSYNC_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``)
and drops it at the end; each test gets a fresh schema in it. NATS: each test gets a stream
of its own on the server at ``PATCHSYNC_NATS_URL``, named after its worker. Tests
that need PostgreSQL are skipped when the server is unreachable, unless
``PATCHSYNC_REQUIRE_PG=1``, which turns that into a failure (CI sets it).
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from . import sparql_helpers
from .helpers import worker_tag
from .markers import kinds

PG_ADMIN_URL = os.environ.get("PATCHSYNC_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
_schemas = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test unit, integration (postgres, nats, spark) and/or e2e (tests/README.md);
    keep together what shares an expensive fixture; run the ``slow`` tests first.

    ``make test`` hands tests to the pytest-xdist workers one at a time (``--dist
    loadgroup``), so a long test started last would keep one worker busy while the others
    have nothing left: started first, the short tests fill in around it (the sort is stable,
    everything else keeps its order). Tests that share a module-scoped fixture, and the Spark
    tests (one JVM a worker), carry an ``xdist_group`` so that one worker runs them all and
    builds the fixture once.
    """
    for item in items:
        for name in sorted(kinds(item)):
            item.add_marker(name)
    spark_modules = {_module_of(item) for item in items if item.get_closest_marker("spark") is not None}
    for item in items:
        group = "spark" if _module_of(item) in spark_modules else _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _shared_fixture_group(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name, ())
        if defs and defs[-1].scope == "module":
            return _module_of(item)
    return None


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a database created for this pytest process (dropped afterwards)."""
    try:
        import psycopg
        from sqlalchemy.engine import make_url
    except ImportError as exc:  # pragma: no cover - the postgres extra is missing
        if os.environ.get("PATCHSYNC_REQUIRE_PG") == "1":
            pytest.fail(f"PATCHSYNC_REQUIRE_PG=1 but psycopg is not installed: {exc}")
        pytest.skip("psycopg not installed")
    url = make_url(PG_ADMIN_URL)
    name = f"patchsync_test_{worker_tag()}"
    conninfo = dict(host=url.host, port=url.port or 5432, user=url.username, dbname=url.database, autocommit=True)
    if url.password:
        conninfo["password"] = url.password
    try:
        admin = psycopg.connect(**conninfo, connect_timeout=3)  # type: ignore[arg-type]
    except psycopg.OperationalError as exc:
        if os.environ.get("PATCHSYNC_REQUIRE_PG") == "1":
            pytest.fail(f"PATCHSYNC_REQUIRE_PG=1 but PostgreSQL is unreachable at {url.host}: {exc}")
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        # A new connection: the fault tests restart the server during the run, which
        # would have closed one held since the start.
        with psycopg.connect(**conninfo, connect_timeout=10) as admin:  # type: ignore[arg-type]
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """A PostgreSQL URL whose search path is a schema of its own (a clean database per test)."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(pg_database)
    schema = f"t{next(_schemas)}"
    with psycopg.connect(
        host=url.host, port=url.port or 5432, user=url.username, dbname=url.database, autocommit=True
    ) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)


@pytest.fixture
def sqlite_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    """Each SQL database in turn."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


# -- NATS JetStream (patchsync.nats) --------------------------------------------------
# Like PostgreSQL: tests that need the server are skipped when it is unreachable, unless
# PATCHSYNC_REQUIRE_NATS=1 (CI), which turns that into a failure.

NATS_URL = os.environ.get("PATCHSYNC_NATS_URL", "nats://127.0.0.1:4222")


def _nats_missing(reason: str) -> None:
    if os.environ.get("PATCHSYNC_REQUIRE_NATS") == "1":
        pytest.fail(f"PATCHSYNC_REQUIRE_NATS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def nats_server() -> str:
    """Address (``nats://HOST:PORT``) of the NATS server with JetStream the tests use."""
    try:
        import nats  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the nats extra is missing
        _nats_missing(f"nats-py is not installed: {exc}")
    from patchsync.nats import NatsLog, StreamNotFound, StreamUnavailable

    try:
        with NatsLog(f"{NATS_URL}/patchsync_probe", connect_timeout=2, reconnect_attempts=1) as log:
            log.ensure_stream(create=False)
    except StreamNotFound:
        pass  # JetStream answered: the probe stream simply does not exist
    except StreamUnavailable as exc:
        _nats_missing(f"NATS JetStream is unreachable at {NATS_URL}: {exc}")
    return NATS_URL


@pytest.fixture
def nats_stream(nats_server: str) -> Iterator[str]:
    """A stream address of this test's own (``nats://HOST:PORT/STREAM``), deleted afterwards."""
    from patchsync.nats import NatsLog

    from .nats_helpers import unique_stream

    url = f"{nats_server}/{unique_stream()}"
    yield url
    with NatsLog(url) as log:
        log.delete_stream()


@pytest.fixture(scope="session")
def nats_server_binary() -> str:
    """The nats-server executable, for tests that start (and kill) servers of their own."""
    from .nats_helpers import NATS_SERVER

    if not os.access(NATS_SERVER, os.X_OK):
        _nats_missing(f"{NATS_SERVER} is not installed")
    return NATS_SERVER


@pytest.fixture(autouse=True)
def _apply_snapshots_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """``patchsync apply`` keeps decoder snapshots in a cache directory: one per run, not ~/.cache."""
    monkeypatch.setenv("PATCHSYNC_SNAPSHOT_DIR", str(_snapshot_dir(tmp_path_factory)))
    # serve's NATS id indexes (and anything else kept in the user's cache): one place per run.
    monkeypatch.setenv("XDG_CACHE_HOME", str(_snapshot_dir(tmp_path_factory) / "cache"))


_SNAPSHOT_DIRS: list[Any] = []


def _snapshot_dir(factory: pytest.TempPathFactory) -> Any:
    if not _SNAPSHOT_DIRS:
        _SNAPSHOT_DIRS.append(factory.mktemp("apply-snapshots"))
    return _SNAPSHOT_DIRS[0]


@pytest.fixture
def daemons() -> Iterator[list[subprocess.Popen[str]]]:
    """A list the test appends its daemon processes to; any still running are killed after it."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.communicate()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One ``local[2]`` SparkSession for every Spark test (starting a JVM costs seconds)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    import patchsync.spark as ps

    session = ps.session("local[2]", app_name="patchsync-tests", quiet=True, **{"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


# -- SPARQL stores (tests/sparql_helpers.py) ---------------------------------------------
# The Oxigraph server and Virtuoso, started by the tests on free loopback ports: skipped when
# their programs are not installed, unless PATCHSYNC_REQUIRE_SPARQL=1 (CI), which turns that
# into a failure.


def _sparql_missing(reason: str) -> None:
    if os.environ.get("PATCHSYNC_REQUIRE_SPARQL") == "1":
        pytest.fail(f"PATCHSYNC_REQUIRE_SPARQL=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def oxigraph_binary() -> str:
    """The ``oxigraph`` executable (PyPI ``oxigraph``), for tests that start servers of their own."""
    reason = sparql_helpers.missing_binaries(sparql_helpers.OXIGRAPH)
    if reason is not None:
        _sparql_missing(reason)
    return sparql_helpers.OXIGRAPH


@pytest.fixture(scope="session")
def virtuoso_binary() -> str:
    """The ``virtuoso-t`` executable (Debian ``virtuoso-opensource``; ``isql-vt`` beside it)."""
    reason = sparql_helpers.missing_binaries(sparql_helpers.VIRTUOSO, sparql_helpers.ISQL)
    if reason is not None:
        _sparql_missing(reason)
    return sparql_helpers.VIRTUOSO


@pytest.fixture
def oxigraph_server(oxigraph_binary: str, tmp_path: Any) -> Iterator[Any]:
    """A fresh Oxigraph server of this test's own (it starts in a fraction of a second)."""
    with sparql_helpers.OxigraphServer(tmp_path / "oxigraph") as server:
        yield server


@pytest.fixture(scope="session")
def _virtuoso_of_this_worker(virtuoso_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with sparql_helpers.VirtuosoServer(tmp_path_factory.mktemp("virtuoso")) as server:
        yield server


@pytest.fixture
def virtuoso_server(_virtuoso_of_this_worker: Any) -> Any:
    """The Virtuoso server of this pytest process, emptied of every graph but its own.

    Creating a Virtuoso database takes seconds, so each worker starts one and each test gets
    it wiped; a test that stops, kills or reconfigures a server starts its own
    ``VirtuosoServer(tmp_path)`` (with the ``virtuoso_binary`` fixture).
    """
    server = _virtuoso_of_this_worker
    server.wipe()
    return server


_STORE = (pytest.mark.sparql, pytest.mark.e2e)


@pytest.fixture(params=[pytest.param("oxigraph", marks=_STORE), pytest.param("virtuoso", marks=_STORE)])
def sparql_server(request: pytest.FixtureRequest) -> Any:
    """Each SPARQL store in turn: ``oxigraph_server``, then ``virtuoso_server``."""
    return request.getfixturevalue(f"{request.param}_server")
