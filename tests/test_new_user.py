"""What a new user meets following the README: every command does what its name and suffix say.

Each test runs the real command line in a scratch folder holding the README's example logs
(``examples/library*.rdfp``, which contain an RDF-star quoted triple).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def patchsync(cwd: Path, *args: str, umask: int = -1, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        umask=umask,
    )


def ok(cwd: Path, *args: str, umask: int = -1) -> str:
    done = patchsync(cwd, *args, umask=umask)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def one_line_error(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The example logs, applied into ``lib.db``."""
    for name in ("library.rdfp", "library-more.rdfp"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    ok(tmp_path, "apply", "--no-progress", "--target", "sqlite:///lib.db", "library.rdfp", "library-more.rdfp")
    return tmp_path


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_written_files_get_the_mode_open_would_give(folder: Path, umask: int) -> None:
    want = 0o666 & ~umask
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.nq", umask=umask)
    ok(folder, "convert", "library.rdfp", "library.jellyp", umask=umask)
    (folder / "plain.nt").write_text("<http://e/s> <http://e/p> <http://e/o> .\n")
    ok(folder, "diff", "plain.nt", "plain.nt", "-o", "none.rdfp", umask=umask)
    ok(folder, "reverse", "library-more.rdfp", "-o", "undo.rdfp", umask=umask)
    for name in ("state.nq", "library.jellyp", "none.rdfp", "undo.rdfp"):
        assert (folder / name).stat().st_mode & 0o777 == want, name


def test_rewriting_a_file_keeps_its_mode(folder: Path) -> None:
    (folder / "state.nq").write_text("")
    (folder / "state.nq").chmod(0o640)
    ok(folder, "dump", "--target", "sqlite:///lib.db", "-o", "state.nq", umask=0o022)
    assert (folder / "state.nq").stat().st_mode & 0o777 == 0o640
