"""The README's Python examples run as printed (issue #12: the layout changes no example).

Each ```python block of the "Library" and "Capturing changes" sections is run in a fresh
interpreter, in a folder prepared with the files it names (``log.jellyp``) and with its
placeholders (``chunk``, ``s``, ``p``, ``o``, ``g``) bound; then what it wrote is checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync import Add, read_events

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

PRELUDE = """
from rdflib import URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
s, p, o = URIRef("http://example.org/s"), URIRef("http://example.org/p"), URIRef("http://example.org/o")
g = DATASET_DEFAULT_GRAPH_ID
chunk = open("log.jellyp", "rb").read()
"""


def _block(section: str) -> str:
    start = README.index(section)
    match = re.search(r"```python\n(.*?)```", README[start:], re.S)
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
    out = _run(_block("## Library"), folder)
    assert (folder / "state.db").exists()
    assert len(out.splitlines()) == len(before)  # one line per event
    after = list(read_events(folder / "log.jellyp"))
    assert len(after) > len(before) and any(isinstance(e, Add) for e in after[len(before) :])


def test_capture_example(folder: Path) -> None:
    _run(_block("### Capturing changes"), folder)
    events = list(read_events(folder / "changes.jellyp"))
    adds = [e for e in events if isinstance(e, Add)]
    assert [str(a.s) for a in adds] == ["http://example.org/s"]
