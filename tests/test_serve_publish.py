"""``patchsync publish`` into a served log through either door reports the topic's head.

A rerun of publish whose patches are all in the topic already appends nothing; what it
reports is the topic's head after the run, which may lie past the end of the logs given
(RDF Patch logs, https://afs.github.io/rdf-delta/rdf-patch-logs.html, "Identifying Patches").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .nats_helpers import write_chain

RUN = [sys.executable, "-m", "patchsync"]


def _serve(tmp_path: Path, daemons: list[subprocess.Popen[str]]) -> dict[str, str]:
    proc = subprocess.Popen(
        [*RUN, "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--topic", f"t={tmp_path / 'topic'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    daemons.append(proc)
    assert proc.stdout is not None
    doors: dict[str, str] = {}
    for line in proc.stdout:
        if line.startswith("serving "):
            _, door, _, address = line.split()
            doors[door] = address
        if len(doors) == 2:
            return {"grpc": f"grpc://{doors['grpc']}/t", "http": f"http://{doors['http']}/t"}
    raise AssertionError("serve did not start")


@pytest.mark.parametrize("door", ["grpc", "http"])
def test_a_rerun_reports_the_topics_head_not_its_own_last_patch(
    tmp_path: Path, daemons: list[subprocess.Popen[str]], door: str
) -> None:
    url = _serve(tmp_path, daemons)[door]
    first, longer = tmp_path / "a.jellyp", tmp_path / "b.jellyp"
    ids = write_chain(first, "p", 5)
    more = write_chain(longer, "p", 6)
    assert more[:5] == ids

    def publish(log: Path) -> str:
        done = subprocess.run([*RUN, "publish", str(log), url], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "5 patches published" in publish(first)
    assert "1 patches published" in publish(longer)
    again = publish(first)
    assert "0 patches published" in again and f"head {more[-1]} " in again, again
