"""``patchsync apply``, ``dump``, ``status`` and ``db upgrade`` as a user runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.apply import MemoryTarget, apply_file

from .apply_helpers import state
from .process_helpers import produce

ROOT = Path(__file__).resolve().parents[1]
LOGS = [ROOT / "examples" / "library.rdfp", ROOT / "examples" / "library-more.rdfp"]


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, cwd=cwd, timeout=120)


def reference_nquads() -> set[str]:
    ref = MemoryTarget()
    for log in LOGS:
        apply_file(log, ref)
    return {f"{s} {p} {o} {g} ." if g else f"{s} {p} {o} ." for s, p, o, g in state(ref)[0]}


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_apply_then_dump_is_the_committed_state(sql_url: str, tmp_path: Path, fmt: str) -> None:
    logs = [str(p) for p in LOGS]
    if fmt == "jellyp":
        logs = []
        for p in LOGS:
            out = tmp_path / (p.stem + ".jellyp")
            assert run("convert", str(p), str(out)).returncode == 0
            logs.append(str(out))
    proc = run("apply", *logs, "--target", sql_url)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "total: 5 patches applied" in out and "1 aborted" in out
    dump = run("dump", "--target", sql_url)
    assert dump.returncode == 0, dump.stderr
    assert set(dump.stdout.decode().splitlines()) == reference_nquads()
    again = run("apply", *logs, "--target", sql_url)
    assert again.returncode == 0
    assert "total: 0 patches applied, 0 units" in again.stdout.decode()
    assert run("dump", "--target", sql_url).stdout == dump.stdout
    status = run("status", "--target", sql_url, "--json")
    assert status.returncode == 0
    sources = json.loads(status.stdout)["sources"]
    assert [s["patches"] for s in sources] == [3, 2] or [s["patches"] for s in sources] == [2, 3]
    assert {s["last_id"] for s in sources} == {
        "uuid:7c1b2a52-3f1e-4d55-9a0e-0c3f0c1f9a03",
        "uuid:7c1b2a52-3f1e-4d55-9a0e-0c3f0c1f9a05",
    }


def test_default_target_is_an_embedded_sqlite_file(tmp_path: Path) -> None:
    proc = run("apply", *map(str, LOGS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "patchsync.db").exists()
    text = run("status", cwd=tmp_path).stdout.decode()
    assert "library-more.rdfp" in text and "2 patches" in text
    trig = run("dump", "--format", "trig", cwd=tmp_path)
    assert trig.returncode != 0 and b"RDF-star" in trig.stderr  # the example holds a quoted triple


def test_chain_error_is_one_line_and_applies_nothing_more(sqlite_url: str) -> None:
    # library-more.rdfp alone: its first patch follows a patch the target never saw.
    proc = run("apply", str(LOGS[1]), "--target", sqlite_url)
    err = proc.stderr.decode()
    assert proc.returncode == 1
    assert err.count("\n") == 1 and err.startswith("patchsync: ") and "Traceback" not in err
    assert "9a04" in err and "9a03" in err
    assert run("dump", "--target", sqlite_url).stdout == b""
    ok = run("apply", str(LOGS[1]), "--target", sqlite_url, "--chain", "ignore")
    assert ok.returncode == 0, ok.stderr


def test_truncated_log_applies_complete_units_then_fails(tmp_path: Path, sqlite_url: str) -> None:
    data = LOGS[0].read_text()
    cut = tmp_path / "cut.rdfp"
    cut.write_text(data[: data.index("TC .", data.index("9a02> ."))])  # inside patch 2's transaction
    proc = run("apply", str(cut), "--target", sqlite_url)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "cut.rdfp" in err and "byte" in err
    status = json.loads(run("status", "--target", sqlite_url, "--json").stdout)
    assert status["sources"][0]["patches"] == 1


def test_db_upgrade_and_bad_targets(sqlite_url: str) -> None:
    proc = run("db", "upgrade", sqlite_url)
    assert proc.returncode == 0 and b"upgraded from empty" in proc.stdout
    assert b"already at revision" in run("db", "upgrade", sqlite_url).stdout
    bad = run("apply", str(LOGS[0]), "--target", "nonsense")
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
    missing = run("apply", "nope.rdfp", "--target", sqlite_url)
    assert missing.returncode == 2 and b"no such file" in missing.stderr


def test_status_of_a_file_target_reads_only_its_sidecar(tmp_path: Path) -> None:
    log = tmp_path / "log.rdfp"
    log.write_text("H id <urn:x:1> .\nA <http://example.org/s> <http://example.org/p> _:b1 .\n", encoding="utf-8")
    assert run("apply", str(log), "--target", "file:state.nq", cwd=tmp_path).returncode == 0
    # The checkpoints live in the sidecar: status does not parse the data file...
    (tmp_path / "state.nq").write_text("<http://example.org/s> broken\n", encoding="utf-8")
    status = run("status", "--target", "file:state.nq", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert [s["last_id"] for s in json.loads(status.stdout)["sources"]] == ["urn:x:1"]
    # ...while dump does, and says where the file is broken in one line.
    dump = run("dump", "--target", "file:state.nq", cwd=tmp_path)
    assert dump.returncode != 0
    err = dump.stderr.decode().strip()
    assert "state.nq: cannot read the target: line 1, column 24" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_directory_is_its_segments_in_file_name_order(tmp_path: Path) -> None:
    # The README's sources: a directory of .jellyp segments, read in file-name order, by
    # apply as by tail; their checkpoints are the same, so a tail after it applies nothing.
    logs = tmp_path / "logs"
    assert produce(logs, "--count", "25", "--rate", "0", "--rotate", "10") == "urn:patch:25"
    segments = sorted(str(p) for p in logs.glob("*.jellyp"))
    assert len(segments) == 3
    by_dir, by_files = f"sqlite:///{tmp_path / 'dir.db'}", f"sqlite:///{tmp_path / 'files.db'}"
    done = run("apply", str(logs), "--target", by_dir)
    assert done.returncode == 0, done.stderr.decode()
    assert [line.split(":")[0] for line in done.stdout.decode().splitlines()[:-1]] == segments
    assert run("apply", *segments, "--target", by_files).returncode == 0
    dumps = [sorted(run("dump", "--target", t).stdout.decode().splitlines()) for t in (by_dir, by_files)]
    assert dumps[0] and dumps[0] == dumps[1]
    again = run("tail", str(logs), "--target", by_dir, "--once")
    assert again.returncode == 0 and not re.search(r"event=applied .*units=[1-9]", again.stderr.decode())
    status = json.loads(run("status", "--json", "--target", by_dir).stdout)
    assert [row["patches"] for row in status["sources"]] == [10, 10, 5]


def test_a_directory_without_segments_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = run("apply", str(tmp_path / "empty"), "--target", f"sqlite:///{tmp_path / 'x.db'}")
    assert done.returncode == 2
    assert (
        done.stderr.decode().strip()
        == f"patchsync: {tmp_path / 'empty'}: a directory without .jellyp segments; a directory stands for its segments"
    )
    assert not (tmp_path / "x.db").exists()
