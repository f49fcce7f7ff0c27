"""Running the documentation's shell blocks as a reader would: shared by the README's tour
(``test_docs.py``) and the guides (``test_guides.py``).

- :func:`sh_blocks` lists a page's ```` ```sh ```` blocks with their info strings. A block
  marked ```` ```sh illustrative ```` shows commands that cannot run on a developer machine as
  written (a container, a deployed host's paths, a Spark submit, an external server); every
  other block of docs/ is run by a test (``test_guides.py`` holds the list and checks it).
- :func:`prepare` makes a reader's folder in one of :data:`STATES`: a fresh folder, or the one
  ``make run`` leaves (its 500 patches in ``out/logs``, their replica in ``out/replica.db``);
  :class:`ReaderFolder` makes that state once and puts it back, at the same path (checkpoints
  name their logs by absolute path), before each page that starts from it.
- :func:`run_shell` runs a block in such a folder with this checkout's ``patchsync`` and
  ``python`` first on PATH, in a session of its own, stopped with every process it left.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .process_helpers import make_run, programs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: The states a reader starts from: a fresh clone's folder, and what ``make run`` left (the
#: README says to take its tour after it).
STATES = ("fresh", "after make run")

FENCE = re.compile(r"^```sh([^\n]*)\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository, e.g. docs/serving.md
    index: int  # its place among the page's ```sh blocks, from 0
    info: str  # the info string after ``sh``, e.g. "illustrative", "tour nats"
    code: str
    line: int  # of its opening fence


def sh_blocks(page: Path) -> list[Block]:
    """Every ```` ```sh ```` block of ``page``, in order."""
    text = page.read_text()
    return [
        Block(str(page.relative_to(ROOT)), i, m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
        for i, m in enumerate(FENCE.finditer(text))
    ]


def prepare(folder: Path, state: str) -> Path:
    """``folder`` as a reader has it in ``state``: ``examples/`` there, and ``make run``'s output."""
    assert state in STATES, state
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "examples").symlink_to(ROOT / "examples")
    programs(folder)
    if state == "after make run":
        make_run(folder)
    return folder


class ReaderFolder:
    """A folder in ``state``, made once and put back as it was by :meth:`reset` (same path)."""

    def __init__(self, base: Path, state: str) -> None:
        self.state = state
        self.folder = prepare(base / "reader", state)
        self._template = base / "template"
        shutil.copytree(self.folder, self._template, symlinks=True)

    def reset(self) -> Path:
        shutil.rmtree(self.folder)
        shutil.copytree(self._template, self.folder, symlinks=True)
        return self.folder


def run_shell(
    code: str,
    cwd: Path,
    path: str = "",
    *,
    flags: str = "-e",
    timeout: float = 120,
    programs_in: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``bash FLAGS`` as a reader would in ``cwd``; ``path``: directories put on
    PATH after ``patchsync`` and ``python`` (their wrappers made in ``programs_in``, by default
    ``cwd``). Fails the test, showing the code and its output, unless it exits 0."""
    env = programs(programs_in or cwd)
    if path:
        env["PATH"] = env["PATH"].replace(os.pathsep, f"{os.pathsep}{path}{os.pathsep}", 1)
    # A session of its own: a server or daemon a failing block left running is stopped with it.
    shell = subprocess.Popen(
        ["bash", *flags.split(), "-c", code], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = shell.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()
    done = subprocess.CompletedProcess(shell.args, shell.returncode, stdout, stderr)
    assert done.returncode == 0, f"the block failed in {cwd}:\n{code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    return done
