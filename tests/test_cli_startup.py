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


@pytest.mark.parametrize("args", [["--help"], ["status", "--help"], ["ingest", "--help"], ["serve", "--help"]])
def test_help_loads_no_codec(folder: Path, args: list[str]) -> None:
    # Every command's options are registered at start-up, so a choice list that lives beside
    # the code that uses it (ingest's modes once did) would load the codec for every command.
    code = (
        "import json, sys\nfrom patchsync.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('patchsync.codec', 'patchsync._proto')))),"
        " file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=folder, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


def test_the_probe_sees_heavy_imports(folder: Path) -> None:
    # The check can fail: a SQL target does load SQLAlchemy.
    assert "sqlalchemy" in loaded(["apply", "log.jellyp", "--target", "sqlite:///state.db"], folder)


def test_a_sql_target_at_the_newest_schema_opens_without_alembic(folder: Path) -> None:
    # Opening reads the stored revision with one query (sql/migrate.py, HEAD_REVISION);
    # Alembic, with Mako and Pygments behind it, loads only to create or upgrade a schema.
    subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", "log.jellyp", "--target", "sqlite:///at-head.db"],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    assert "alembic" not in loaded(["status", "--target", "sqlite:///at-head.db"], folder)
    # The check can fail: a database without the schema (an empty file) gets it from Alembic.
    (folder / "fresh.db").touch()
    assert "alembic" in loaded(["status", "--target", "sqlite:///fresh.db"], folder)


@pytest.mark.parametrize("args", [["inspect", "log.jellyp"], ["convert", "log.jellyp", "out.rdfp"]])
def test_jena_codecs_load_only_for_jena_files(folder: Path, args: list[str]) -> None:
    # RDF Binary's two wire codecs cost ~75 ms to import, a third of the 0.25 s budget; the
    # format registry (patchsync/codec/jena/__init__.py) names them without loading them.
    code = PROBE.replace(
        "{m.split('.')[0] for m in sys.modules} & set(HEAVY)",
        "{m for m in sys.modules if m.startswith('patchsync.codec.jena.')}",
    )
    assert code != PROBE
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=folder, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
    # The check can fail: converting to RDF Thrift loads them.
    (folder / "data.nq").write_text("<http://example.org/s> <http://example.org/p> <http://example.org/o> .\n")
    done = subprocess.run(
        [sys.executable, "-c", code, "convert", "data.nq", "out.rt"], cwd=folder, capture_output=True, text=True
    )
    assert "patchsync.codec.jena.thrift" in json.loads(done.stderr.strip().splitlines()[-1])


SERVE_PROBE = """
import io, json, os, sys
from patchsync.cli import main

class Out(io.StringIO):
    def write(self, text):
        if text.startswith("serving http"):
            names = {m for m in sys.modules if m.split('.')[0] in HEAVY or m in HEAVY}
            print(json.dumps(sorted(names)), file=sys.stderr)
            sys.stderr.flush()
            os._exit(0)
        return len(text)

sys.stdout = Out()
main(sys.argv[1:])
"""

#: What ``serve`` does not import to answer its first request: the remote-log clients
#: (the HTTP door names a log's address with the HTTP client's parser only for a snapshot),
#: and the targets' libraries.
SERVE_DEFERRED = (*HEAVY, "patchsync.remote.http_client", "patchsync.remote.grpc_client", "nats")


def test_serve_starts_without_the_clients_and_the_targets_libraries(folder: Path) -> None:
    args = ["serve", "--http", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--topic", "a=log.jellyp"]

    def loaded_by_serve(probe: str) -> list[str]:
        code = f"HEAVY = {SERVE_DEFERRED!r}\n" + probe
        done = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=folder, capture_output=True, text=True, timeout=120
        )
        return list(json.loads(done.stderr.strip().splitlines()[-1]))

    assert loaded_by_serve(SERVE_PROBE) == []
    # The check can fail: the module imported before the server starts is seen.
    assert "patchsync.remote.http_client" in loaded_by_serve("import patchsync.remote.http_client\n" + SERVE_PROBE)
