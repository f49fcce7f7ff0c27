"""Every guide's shell blocks run as written (docs/*.md; the README's tour is test_docs.py's).

A page's ```` ```sh ```` blocks that a reader runs one after the other (:data:`WALKS`) run in
one ``bash -euo pipefail``, in a fresh folder and in the one ``make run`` leaves
(``docs_runner.ReaderFolder``: made once per module, put back before each walk), with this
checkout's ``patchsync`` and ``python`` and then ``.venv/bin`` (``oxigraph``) on PATH; each test
checks what its blocks promise (an output line, a file, a count), not only exit 0.

- A block marked ```` ```sh illustrative ```` is not run: it needs what a developer machine
  lacks (a container image, a deployed host's paths, a Spark submit that starts a JVM, an
  external Virtuoso server, a package index). :func:`test_every_sh_block_is_run_or_illustrative`
  fails for any other ```` ```sh ```` block of docs/ that no test runs, so a new block cannot go
  untested silently.
- The NATS blocks run on the server at 127.0.0.1:4222 (skipped when it is unreachable, unless
  ``PATCHSYNC_REQUIRE_NATS=1``), on a stream of the test's own in place of the page's name; a
  line that says ``(skip if one runs on :4222)`` is skipped, as it says.
- Every walk is marked ``slow`` (``make test`` and CI run them; ``make check`` does not), so that
  they keep pytest's order and the ``make run`` state is made once a module.
- The blocks that name ports (8710, 8711, 7878) run on those ports; when one is taken here the
  test is skipped, naming it; a lock file keeps two such walks (other workers', other runs')
  from overlapping.
- docs/conformance.md's commands are a clone's: they run in this checkout (skipped when its
  compiled core is stale, which ``make`` would rebuild).
"""

from __future__ import annotations

import fcntl
import json
import re
import socket
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from .docs_runner import DOCS, ROOT, STATES, ReaderFolder, run_shell, sh_blocks

#: The blocks a reader runs together, in order, in one shell: ``(page, index among its sh blocks)``.
WALKS: dict[str, list[tuple[str, int]]] = {
    "operators-pair": [("getting-started.md", 2)],
    "first-apply": [("getting-started.md", 3)],
    "diff-reverse": [("capture-and-diff.md", 0), ("capture-and-diff.md", 1)],
    "message-logs": [("message-logs.md", 0)],
    "message-logs-nats": [("message-logs.md", 1)],
    "tail-files": [("replication.md", 0)],
    "nats": [("replication.md", 1), ("snapshots-and-bootstrap.md", 1)],
    "serving": [("serving.md", 0), ("serving.md", 1), ("serving.md", 2)],
    "sparql-served": [("sparql-stores.md", 0)],
    "conformance": [("conformance.md", 0)],
}
#: Blocks another module runs as written.
ELSEWHERE = {
    ("snapshots-and-bootstrap.md", 0): "tests/test_doc_examples.py::test_snapshot_walkthrough_runs_as_written",
}
DEMO_STREAM = "nats://127.0.0.1:4222/demo"
SKIP_LINE = "(skip if one runs on :4222)"


def walk_code(name: str) -> str:
    code = []
    for page, index in WALKS[name]:
        block = sh_blocks(DOCS / page)[index]
        assert block.info == "", f"{page}:{block.line} is marked {block.info!r}"
        code.append(block.code)
    return "\n".join(code)


def run_walk(name: str, folder: Path, subst: dict[str, str] | None = None, drop: str = "") -> str:
    code = walk_code(name)
    if drop:
        assert drop in code
        code = "\n".join(line for line in code.splitlines() if drop not in line)
    for old, new in (subst or {}).items():
        assert old in code, old
        code = code.replace(old, new)
    done = run_shell(code, folder, str(Path(sys.executable).parent), flags="-euo pipefail", timeout=300)
    return done.stdout + done.stderr


def patchsync(folder: Path, *args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


def patches(folder: Path, target: str) -> int:
    return sum(
        row["patches"] for row in json.loads(patchsync(folder, "status", "--json", "--target", target))["sources"]
    )


def dump(folder: Path, db: str) -> list[str]:
    return sorted(patchsync(folder, "dump", "--target", f"sqlite:///out/{db}.db").splitlines())


@pytest.fixture
def documented_ports() -> Iterator[None]:
    """Held while a walk runs on the ports its page names: one such walk at a time on this
    machine, whichever worker or run it belongs to."""
    with open(Path(tempfile.gettempdir()) / "patchsync-doc-ports.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def need_ports(page: str, *ports: int) -> None:
    for port in ports:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                pytest.skip(f"{page} runs on 127.0.0.1:{port}, which another process holds here")


_READERS: dict[str, ReaderFolder] = {}


@pytest.fixture(scope="module", params=STATES)
def reader(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ReaderFolder:
    # Kept for the session: an xdist worker that ran out of queued tests tears module fixtures
    # down, and ``make run`` is the slow part.
    if request.param not in _READERS:
        _READERS[request.param] = ReaderFolder(tmp_path_factory.mktemp("guides"), request.param)
    return _READERS[request.param]


@pytest.fixture
def folder(reader: ReaderFolder) -> Iterator[Path]:
    yield reader.reset()


def before(reader: ReaderFolder) -> int:
    """The patches ``make run`` left in out/logs: none in a fresh folder."""
    return 500 if reader.state == "after make run" else 0


# -- the completeness rule --------------------------------------------------------------------


def test_every_sh_block_is_run_or_illustrative() -> None:
    run = {block for blocks in WALKS.values() for block in blocks} | set(ELSEWHERE)
    untested = []
    for page in sorted(DOCS.rglob("*.md")):
        for block in sh_blocks(page):
            key = (str(page.relative_to(DOCS)), block.index)
            if block.info == "illustrative":
                assert key not in run, f"{block.page}:{block.line} is illustrative but a test runs it"
            elif key not in run:
                untested.append(f"{block.page}:{block.line} (```sh {block.info})")
    assert not untested, "run these blocks in tests/test_guides.py, or mark them ```sh illustrative: " + ", ".join(
        untested
    )
    for (page, index), test in ELSEWHERE.items():
        assert sh_blocks(DOCS / page)[index].info == ""
        path, name = test.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), test


def test_the_illustrative_install_and_make_blocks_name_real_extras_and_targets() -> None:
    blocks = sh_blocks(DOCS / "getting-started.md")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {e for b in blocks for group in re.findall(r"'\.\[([\w,]+)\]'", b.code) for e in group.split(",")}
    assert named and named <= set(extras), named - set(extras)
    makefile = (ROOT / "Makefile").read_text()
    targets = {t for b in blocks for t in re.findall(r"^make (\w+)", b.code, re.M)}
    assert targets and all(re.search(rf"^{t}:", makefile, re.M) for t in targets), targets


# -- the walks --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_first_apply(folder: Path) -> None:
    out = run_walk("first-apply", folder)
    assert "total: 5 patches applied" in out
    assert '<http://example.org/library/book/1> <http://purl.org/dc/terms/title> "Dune"' in out  # dump
    assert re.search(r"library-more\.rdfp: byte \d+, frame 0, row \d+; 2 patches;", out)  # status


@pytest.mark.slow
def test_the_operators_pair(folder: Path, reader: ReaderFolder) -> None:
    run_walk("operators-pair", folder)
    assert patches(folder, "sqlite:///out/replica.db") == before(reader) + 500


@pytest.mark.slow
def test_diff_and_reverse(folder: Path) -> None:
    run_walk("diff-reverse", folder)
    assert (folder / "change.jellyp").stat().st_size > 0 and (folder / "undo.jellyp").stat().st_size > 0
    # The inverse took the copy of OLD, made NEW by the change, back to OLD.
    assert (folder / "state.nq").read_text().split() == (folder / "old.nq").read_text().split()


@pytest.mark.slow
def test_message_logs(folder: Path) -> None:
    out = run_walk("message-logs", folder)
    assert "messages:     3 (0 empty)" in out
    assert "events.jellyp: 3 patches appended (add)" in out
    assert len((folder / "merged.nq").read_text().splitlines()) == 10
    assert (folder / "events.nq").read_text().count("# @message") >= 2


@pytest.mark.slow
def test_message_logs_over_nats(folder: Path, nats_stream: str) -> None:
    out = run_walk("message-logs-nats", folder, {"nats://127.0.0.1:4222/events": nats_stream})
    assert "sensors.jellyp: 3 patches appended (replace-graph)" in out
    assert f"{nats_stream}: 3 patches appended (replace)" in out


@pytest.mark.slow
def test_tail_from_files(folder: Path, reader: ReaderFolder) -> None:
    run_walk("tail-files", folder)
    assert patches(folder, "sqlite:///out/replica.db") == before(reader) + 100


@pytest.mark.slow
def test_replication_over_nats(folder: Path, nats_stream: str) -> None:
    out = run_walk("nats", folder, {DEMO_STREAM: nats_stream}, drop=SKIP_LINE)
    assert f"{nats_stream}: 200 patches published, 0 already in the stream" in out
    assert f"{nats_stream}: 100 patches published, 200 already in the stream" in out
    assert "identical" in out.splitlines()
    direct = dump(folder, "direct")  # the third replica, from the first one's snapshot, too
    assert direct and dump(folder, "replica3") == direct


@pytest.mark.slow
def test_serving(folder: Path, documented_ports: None) -> None:
    need_ports("docs/serving.md", 8710, 8711)
    out = run_walk("serving", folder)
    assert "grpc://127.0.0.1:8710/library: 400 patches published, 0 already in the stream" in out
    assert "http://127.0.0.1:8711/library: sequence 400; 400 patches; last id urn:patch:400;" in out
    assert '"max_version": 400' in out and '{"version": 401, "location": "/library?version=401"}' in out
    assert (folder / "base.jelly").stat().st_size > 0
    assert (folder / "out" / "serve.txt").read_text().splitlines()[-1] == "stopped"  # SIGTERM: a clean stop


@pytest.mark.slow
def test_a_sparql_store_follows_a_served_log(folder: Path, oxigraph_binary: str, documented_ports: None) -> None:
    need_ports("docs/sparql-stores.md", 7878, 8710, 8711)
    assert Path(oxigraph_binary).parent == Path(sys.executable).parent  # .venv/bin, on the walk's PATH
    out = run_walk("sparql-served", folder)
    assert "grpc://127.0.0.1:8710/library: sequence 200; 200 patches; last id urn:patch:200;" in out


def test_the_conformance_commands(tmp_path: Path) -> None:
    stale = subprocess.run(["make", "-q", ".venv/.native"], cwd=ROOT, capture_output=True)
    if stale.returncode != 0:
        pytest.skip("this checkout's compiled core is stale (make conformance would rebuild it): make native")
    out = run_shell(walk_code("conformance"), ROOT, flags="-euo pipefail", programs_in=tmp_path).stdout
    tallies = re.findall(r"^(\d+) passed, (\d+) failed$", out, re.M)
    assert len(tallies) == 5 and all(int(passed) > 0 and failed == "0" for passed, failed in tallies), out
    assert re.search(r"^\d+ rules: \d+ covered", out, re.M)  # --coverage's table
