"""``patchsync compact LOG... -o NET``, as a user runs it (the library: test_streams_compact.py).

Applying the net patch must give the state the logs give (set semantics, docs/design.md §5:
the last operation on a statement decides), it stands for the run in the chain (its id is
the last patch's, its prev the first patch's: RDF Patch logs, rdf-patch-logs.md, "id" and
"prev" headers), and aborted transactions (TX … TA, rdf-patch-text.md) are left out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.apply.api import apply_file
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.events import Add, Delete, Event, Header, PatchEnd, TxAbort, TxCommit, TxStart
from patchsync.logs.patch_logs import read_events, write_events
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms

from .nats_helpers import patch_id, write_chain

ROOT = Path(__file__).resolve().parents[1]
EX = "http://example.org/"
NT = NTriplesTerms()


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, cwd=ROOT, timeout=120)


def dump_after(*logs: Path) -> list[tuple[str, str, str, str]]:
    target = MemoryTarget()
    for log in logs:
        apply_file(log, target)
    return sorted(target.quads())


def headers(path: Path) -> list[tuple[str, str]]:
    return [(e.key, e.value) for e in read_events(path, adapter=NT) if type(e) is Header]


def quad(n: int) -> tuple[str, str, str, str]:
    return (f"<{EX}s{n}>", f"<{EX}p>", f'"{n}"', f"<{EX}g>")


@pytest.mark.parametrize("suffix", [".jellyp", ".rdfp"])
def test_compact_gives_the_logs_state_and_keeps_the_chain(tmp_path: Path, suffix: str) -> None:
    a, b = tmp_path / "a.jellyp", tmp_path / "b.jellyp"
    write_chain(a, "c", 5, size=3)
    ids = write_chain(b, "c", 4, start=6, prev=patch_id("c", 5), size=3)
    net = tmp_path / f"net{suffix}"
    done = run("compact", str(a), str(b), "-o", str(net))
    assert done.returncode == 0, done.stderr
    assert b"9 patches compacted into one" in done.stdout
    assert dump_after(net) == dump_after(a, b)
    assert headers(net) == [("id", f"<{ids[-1]}>")]  # the first patch has no prev
    # A replica continues after the net patch with the patches that follow it.
    rest = tmp_path / "rest.jellyp"
    write_chain(rest, "c", 2, start=10, prev=ids[-1])
    assert dump_after(net, rest) == dump_after(a, b, rest)


def test_a_compacted_middle_run_keeps_its_prev(tmp_path: Path) -> None:
    first, middle = tmp_path / "first.jellyp", tmp_path / "middle.jellyp"
    write_chain(first, "c", 3)
    ids = write_chain(middle, "c", 4, start=4, prev=patch_id("c", 3))
    net = tmp_path / "net.jellyp"
    assert run("compact", str(middle), "-o", str(net)).returncode == 0
    assert headers(net) == [("id", f"<{ids[-1]}>"), ("prev", f"<{patch_id('c', 3)}>")]
    assert dump_after(first, net) == dump_after(first, middle)


def test_add_then_delete_nets_out_and_aborted_changes_are_dropped(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    events: list[Event] = [
        Header("id", "<urn:p:1>"),
        TxStart(),
        Add(*quad(1)),
        Add(*quad(2)),
        TxCommit(),
        PatchEnd(),
        Header("id", "<urn:p:2>"),
        Header("prev", "<urn:p:1>"),
        TxStart(),
        Delete(*quad(1)),  # added then deleted: absent from the net patch
        Add(*quad(3)),
        TxCommit(),
        TxStart(),
        Add(*quad(4)),  # aborted: never applied
        Delete(*quad(2)),
        TxAbort(),
        PatchEnd(),
    ]
    with open(log, "wb") as f:
        write_events(events, f, "jellyp", options=PatchOptions(), adapter=NT)
    net = tmp_path / "net.rdfp"
    done = run("compact", str(log), "-o", str(net))
    assert done.returncode == 0, done.stderr
    rows = [e for e in read_events(net, adapter=NT) if type(e) in (Add, Delete)]
    # quad 1: a delete (its net effect on any starting state); 2 and 3 adds; 4 nowhere.
    assert sorted((type(e).__name__, e[:4]) for e in rows) == sorted(
        [("Delete", quad(1)), ("Add", quad(2)), ("Add", quad(3))]
    )
    assert dump_after(net) == dump_after(log)


def test_errors_are_one_line(tmp_path: Path) -> None:
    a, other = tmp_path / "a.jellyp", tmp_path / "other.jellyp"
    write_chain(a, "c", 2)
    write_chain(other, "x", 2, prev="urn:nowhere")
    net = tmp_path / "net.jellyp"
    broken = run("compact", str(a), str(other), "-o", str(net))
    assert broken.returncode == 1 and broken.stderr.decode().count("\n") == 1
    assert b"not one chain" in broken.stderr and not net.exists()
    missing = run("compact", str(tmp_path / "nope.jellyp"), "-o", str(net))
    assert missing.returncode == 2 and b"nope.jellyp: no such file" in missing.stderr
    wrong = run("compact", str(a), "-o", str(tmp_path / "net.nq"))
    assert wrong.returncode != 0 and wrong.stderr.decode().count("\n") == 1 and b"Traceback" not in wrong.stderr


def test_a_directory_stands_for_its_segments_in_file_name_order(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    write_chain(logs / "seg-1.jellyp", "d", 3, size=2)
    ids = write_chain(logs / "seg-2.jellyp", "d", 2, start=4, prev=patch_id("d", 3), size=2)
    net = tmp_path / "net.jellyp"
    done = run("compact", str(logs), "-o", str(net))
    assert done.returncode == 0, done.stderr
    assert b"5 patches compacted into one" in done.stdout
    assert dump_after(net) == dump_after(logs / "seg-1.jellyp", logs / "seg-2.jellyp")
    assert headers(net) == [("id", f"<{ids[-1]}>")]
