"""The deploy recipes start on a fresh volume: the logs directory they tail does not exist yet.

The systemd unit's ``ExecStart`` and the Containerfile's ``CMD`` run here as written, their
``/var/lib/patchsync`` moved to a scratch folder: the daemon waits for the directory (one
``waiting`` line) instead of exiting 2, which the unit's ``RestartPreventExitStatus=2`` would
never restart, then tails the segments a producer writes there, and stops with exit 0 on
SIGTERM. (``tests/test_docs.py`` checks the recipe files themselves.)
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .process_helpers import produce, stop, wait_for

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
VOLUME = "/var/lib/patchsync"


def unit_argv() -> list[str]:
    line = next(x for x in (DEPLOY / "patchsync-tail.service").read_text().splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.partition("=")[2])[1:]


def container_argv() -> list[str]:
    line = next(x for x in (DEPLOY / "Containerfile").read_text().splitlines() if x.startswith("CMD "))
    argv: list[str] = json.loads(line.partition(" ")[2])
    return argv


def last_id(target: str) -> str | None:
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "status", "--json", "--target", target], capture_output=True, text=True
    )
    if done.returncode != 0:
        return None
    ids = [row["last_id"] for row in json.loads(done.stdout)["sources"]]
    return max(ids, key=lambda i: int(i.rpartition(":")[2])) if ids else None


@pytest.mark.parametrize("recipe", ["unit", "container"])
def test_the_tail_recipe_waits_for_its_logs_on_a_fresh_volume(tmp_path: Path, recipe: str, daemons: list[Any]) -> None:
    argv = [arg.replace(VOLUME, str(tmp_path)) for arg in (unit_argv() if recipe == "unit" else container_argv())]
    assert argv[0] == "tail"
    logs = Path(argv[1])
    assert not logs.exists()  # the volume is fresh
    target = next(argv[i + 1] for i, arg in enumerate(argv) if arg == "--target")
    err = tmp_path / "daemon.err"
    with err.open("w") as stderr:
        daemon = subprocess.Popen([sys.executable, "-m", "patchsync", *argv], stderr=stderr, text=True, cwd=tmp_path)
    daemons.append(daemon)
    wait_for(lambda: "event=waiting" in err.read_text() or daemon.poll() is not None, what="the waiting line")
    assert daemon.poll() is None, err.read_text()
    assert re.search(rf"event=waiting source={re.escape(str(logs))} reason=\"no such directory yet", err.read_text())
    produce(logs, "--count", "30", "--rate", "0", "--rotate", "20")
    wait_for(lambda: last_id(target) == "urn:patch:30", what="the first 30 patches applied")
    code, _ = stop(daemon)
    assert code == 0, err.read_text()
