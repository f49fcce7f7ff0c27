"""The manual's examples run as printed (the README's tour is tests/test_docs.py's).

The ```python blocks of docs/library.md and docs/capture-and-diff.md run in a fresh
interpreter, in a folder prepared with the files they name (``log.jellyp``) and with their
placeholders (``chunk``, ``s``, ``p``, ``o``, ``g``) bound; then what they wrote is checked. The
snapshot walkthrough of docs/snapshots-and-bootstrap.md runs as written, and the output lines
docs/replication.md shows are what ``patchsync publish`` prints.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync import Add, read_events

from .docs_runner import STATES, prepare, run_shell, sh_blocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()

PRELUDE = """
from rdflib import URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
s, p, o = URIRef("http://example.org/s"), URIRef("http://example.org/p"), URIRef("http://example.org/o")
g = DATASET_DEFAULT_GRAPH_ID
chunk = open("log.jellyp", "rb").read()
"""


def _block(page: str, section: str) -> str:
    text = (DOCS / page).read_text()
    start = text.index(section)
    match = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert match, f"no python example under {section!r}"
    return match.group(1)


def _run(code: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "patchsync", "convert", str(ROOT / "examples" / "library.rdfp"), "log.jellyp"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return tmp_path


def test_library_example(folder: Path) -> None:
    before = list(read_events(folder / "log.jellyp"))
    out = _run(_block("library.md", "# The library"), folder)
    assert (folder / "state.db").exists()
    assert len(out.splitlines()) == len(before)  # one line per event
    after = list(read_events(folder / "log.jellyp"))
    assert len(after) > len(before) and any(isinstance(e, Add) for e in after[len(before) :])


def test_capture_example(folder: Path) -> None:
    _run(_block("capture-and-diff.md", "## Capturing changes"), folder)
    events = list(read_events(folder / "changes.jellyp"))
    adds = [e for e in events if isinstance(e, Add)]
    assert [str(a.s) for a in adds] == ["http://example.org/s"]


@pytest.mark.slow
@pytest.mark.parametrize("state", STATES)
def test_snapshot_walkthrough_runs_as_written(tmp_path: Path, state: str) -> None:
    prepare(tmp_path, state)  # after make run: its 500 patches in out/logs, its replica in out/replica.db
    walkthrough = sh_blocks(DOCS / "snapshots-and-bootstrap.md")[0]
    assert "patchsync snapshot" in walkthrough.code
    run_shell(walkthrough.code, tmp_path, flags="-euo pipefail")
    dumps = {}
    for db in ("primary", "from-base", "from-base2"):
        out = tmp_path / f"{db}.nq"
        subprocess.run(
            [sys.executable, "-m", "patchsync", "dump", "--target", f"sqlite:///out/{db}.db", "-o", str(out)],
            cwd=tmp_path,
            check=True,
            capture_output=True,
        )
        dumps[db] = sorted(out.read_text().splitlines())
    # The primary applied the log as it was at the snapshot; the replicas 100 patches more: bring it level.
    subprocess.run(
        [sys.executable, "-m", "patchsync", "apply", *sorted(map(str, (tmp_path / "out/logs").iterdir())),
         "--target", "sqlite:///out/primary.db"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "patchsync", "dump", "--target", "sqlite:///out/primary.db", "-o", "primary.nq"],
        cwd=tmp_path,
        check=True,
    )
    primary = sorted((tmp_path / "primary.nq").read_text().splitlines())
    assert len(primary) > 0 and dumps["from-base"] == primary and dumps["from-base2"] == primary


def test_the_publish_lines_show_what_publish_prints(tmp_path: Path, nats_stream: str) -> None:
    shown = re.findall(r"^#    \S+: (.* patches published, .*)$", (DOCS / "replication.md").read_text(), re.M)
    assert len(shown) == 2
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "producer.py"), "a.jellyp", "--count", "3", "--rate", "0"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    url = nats_stream
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "publish", "a.jellyp", url], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().removeprefix(f"{url}: ")
    for line in shown:
        # The page's figures stand for any figures; the words and their order are what it shows.
        pattern = re.sub(r"\d+(?:\\\.\d+)?", r"[\\d.]+", re.escape(line))
        assert re.fullmatch(pattern.replace("urn:patch:[\\d.]+", "\\S+"), printed), (line, printed)


def test_every_target_scheme_is_documented() -> None:
    from patchsync.apply.registry import target_schemes

    for scheme in {s.partition("+")[0] for s in target_schemes()}:  # a SQLAlchemy driver is a spelling of its dialect
        assert re.search(rf"`{re.escape(scheme)}[:+]", README), f"the README does not name the {scheme}: target"
