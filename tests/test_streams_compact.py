"""The net effect of logs as one patch (``compact``): same final state as the logs, one patch."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchsync.apply.api import apply_file
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.errors import ChainError, DecodeError, UsageError
from patchsync.events import Add, Delete, PatchEnd, TxAbort, TxCommit, TxStart
from patchsync.logs.compact import compact_logs
from patchsync.logs.patch_logs import read_events, write_events
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms

from .apply_helpers import rdfp_to_jellyp
from .nats_helpers import patch_events, patch_id, write_chain


def state(*paths: Path) -> set[tuple[str, str, str, str]]:
    target = MemoryTarget()
    for path in paths:
        apply_file(path, target)
    return set(target.quads())


@pytest.mark.parametrize("suffix", [".jellyp", ".rdfp"])
def test_the_net_patch_has_the_logs_effect(tmp_path: Path, suffix: str) -> None:
    a, b = tmp_path / "a.jellyp", tmp_path / "b.rdfp"
    ids = write_chain(a, "c", 6, size=3) + write_chain(b, "c", 4, start=7, prev=patch_id("c", 6), size=3)
    net = tmp_path / f"net{suffix}"
    report = compact_logs([a, b], net)
    assert (report.patches, report.first_prev, report.last_id) == (10, None, ids[-1])
    assert state(net) == state(a, b)
    events = list(read_events(net, adapter=NTriplesTerms()))
    assert sum(1 for e in events if type(e) is PatchEnd) == 1
    # Each statement once: 30 adds, of which 9 were deleted again by later patches.
    assert (report.added, report.deleted) == (21, 9)


def test_a_replica_continues_the_chain_after_the_net_patch(tmp_path: Path) -> None:
    first, rest = tmp_path / "first.jellyp", tmp_path / "rest.jellyp"
    write_chain(first, "c", 5)
    write_chain(rest, "c", 3, start=6, prev=patch_id("c", 5))
    net = tmp_path / "net.jellyp"
    compact_logs([first], net)
    target = MemoryTarget()
    apply_file(net, target)
    apply_file(rest, target)  # prev of patch 6 is the net patch's id: the chain holds
    assert set(target.quads()) == state(first, rest)


def test_aborted_transactions_are_left_out(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    events = patch_events("c", 1, None)
    events += [*patch_events("c", 2, patch_id("c", 1))[:-2], TxAbort(), PatchEnd()]
    with open(log, "wb") as f:
        write_events(events, f, "jellyp", options=PatchOptions(), adapter=NTriplesTerms())
    net = tmp_path / "net.rdfp"
    compact_logs([log], net)
    text = net.read_text()
    assert '"v1.0"' in text and '"v2.0"' not in text


def test_the_last_operation_on_a_statement_wins(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    s, p, o, g = "<http://x/s>", "<http://x/p>", '"o"', "<http://x/g>"
    events = [TxStart(), Add(s, p, o, g), Delete(s, p, o, g), TxCommit(), PatchEnd()]
    events += [TxStart(), Delete(s, p, '"q"', g), Add(s, p, '"q"', g), TxCommit(), PatchEnd()]
    with open(log, "wb") as f:
        write_events(events, f, "jellyp", options=PatchOptions(), adapter=NTriplesTerms())
    net = tmp_path / "net.rdfp"
    compact_logs([log], net)
    lines = [line for line in net.read_text().splitlines() if line[:2] in ("A ", "D ")]
    assert lines == [f"D {s} {p} {o} {g} .", f'A {s} {p} "q" {g} .']


def test_logs_that_do_not_chain_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jellyp", tmp_path / "b.jellyp"
    write_chain(a, "c", 2)
    write_chain(b, "x", 1, prev="urn:elsewhere")
    with pytest.raises(ChainError, match=r"b\.jellyp: patch urn:patch:x:1 has prev urn:elsewhere, .* urn:patch:c:2"):
        compact_logs([a, b], tmp_path / "net.jellyp")
    assert not (tmp_path / "net.jellyp").exists()
    with pytest.raises(UsageError, match="at least one log"):
        compact_logs([], tmp_path / "net.jellyp")


@pytest.mark.parametrize("suffix", [".rdfp", ".jellyp"])
def test_rows_before_an_aborted_transaction_are_kept(tmp_path: Path, suffix: str) -> None:
    # The rows before TX are a committed implicit unit (docs/design.md §2), whatever the
    # transaction after them does.
    text = 'H id <urn:p:1> .\nA <http://e/x> <http://e/p> "x" .\nTX .\nA <http://e/y> <http://e/p> "y" .\nTA .\n'
    log = tmp_path / f"a{suffix}"
    if suffix == ".rdfp":
        log.write_text(text)
    else:
        log.write_bytes(rdfp_to_jellyp(text))
    net = tmp_path / "net.rdfp"
    compact_logs([log], net)
    assert state(net) == state(log) == {("<http://e/x>", "<http://e/p>", '"x"', "")}


def test_a_log_cut_inside_a_unit_fails_naming_the_byte_and_writes_nothing(tmp_path: Path) -> None:
    log = tmp_path / "a.rdfp"
    log.write_text('H id <urn:p:1> .\nA <http://e/x> <http://e/p> "x" .\nTX .\nA <http://e/y> <http://e/p> "y" .\n')
    net = tmp_path / "net.jellyp"
    with pytest.raises(DecodeError, match=r"a\.rdfp.*line 5.*inside a transaction"):
        compact_logs([log], net)
    assert not net.exists()
