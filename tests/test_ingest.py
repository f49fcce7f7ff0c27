"""``ingest``: one patch per RDF Message, chained, resumable, all or nothing (docs/design.md §8).

Rules cited from the RDF Messages draft, https://w3c-cg.github.io/rsp/spec/messages, by section.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync import MemoryTarget, apply_events
from patchsync.errors import DecodeError
from patchsync.events import Add, Header, PatchEnd
from patchsync.ingest import ingest_messages
from patchsync.logs.patch_logs import read_events
from patchsync.terms.ntriples import NTriplesTerms

DATA = Path(__file__).parent / "data" / "messages"
NT = NTriplesTerms()


def patches(log: Path) -> list[dict[str, object]]:
    """Each patch's headers (IRI or literal text) and number of adds."""
    found: list[dict[str, object]] = []
    current: dict[str, object] = {"adds": 0}
    for event in read_events(log, adapter=NT):
        if type(event) is Header:
            current[event.key] = NT.unpack(event.value)[1]
        elif type(event) is Add:
            current["adds"] = int(str(current["adds"])) + 1
        elif type(event) is PatchEnd:
            found.append(current)
            current = {"adds": 0}
    return found


def state(log: Path) -> set[tuple[str, ...]]:
    target = MemoryTarget()
    apply_events(read_events(log, adapter=NT), target, source=str(log))
    return set(target.quads())


def test_each_message_is_one_patch_chained_empty_ones_too(tmp_path: Path) -> None:
    """§1.1: a message is taken atomically (one patch, one transaction) and can be empty (an
    empty patch, so message n is patch n); §1.4: the draft's example log, four messages."""
    log = tmp_path / "log.jellyp"
    assert ingest_messages(log, [DATA / "draft-log.ttl"], messages=True).appended == 4
    found = patches(log)
    assert [p["adds"] for p in found] == [2, 3, 0, 3]
    assert [p["ingest-message"] for p in found] == ["1", "2", "3", "4"]
    assert "prev" not in found[0] and all(b["prev"] == a["id"] for a, b in itertools.pairwise(found))
    assert len(state(log)) == 8


def test_a_rerun_appends_nothing_and_resumes_after_the_last_message(tmp_path: Path) -> None:
    """§3.1: messages are streamed out in the order they were written; a rerun continues the
    stream where the log stops instead of appending a message twice."""
    source = tmp_path / "log.nq"
    source.write_text("<a:s> <a:p> <a:o1> .\n# @message\n<a:s> <a:p> <a:o2> .\n")
    log = tmp_path / "out.jellyp"
    ingest_messages(log, [source], messages=True)
    before = log.read_bytes()
    again = ingest_messages(log, [source], messages=True)
    assert (again.appended, again.skipped) == (0, 2) and log.read_bytes() == before
    with source.open("a") as f:
        f.write("# @message\n<a:s> <a:p> <a:o3> .\n")
    assert ingest_messages(log, [source], messages=True).appended == 1
    found = patches(log)
    assert [p["ingest-message"] for p in found] == ["1", "2", "3"] and found[2]["prev"] == found[1]["id"]


def test_the_first_patch_follows_the_head_of_an_existing_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    (tmp_path / "start.rdfp").write_text("H id <urn:p:1> .\nTX .\nA <a:s> <a:p> <a:o> .\nTC .\n")
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", "convert", "start.rdfp", "log.jellyp"], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    ingest_messages(log, [DATA / "draft-products.ndjsonld"])
    found = patches(log)
    assert len(found) == 3 and found[1]["prev"] == "urn:p:1" and found[2]["prev"] == found[1]["id"]


def test_blank_nodes_stay_scoped_to_their_message_through_ingest_and_apply(tmp_path: Path) -> None:
    """§1.4 note: blank node identifiers are scoped to the message they occur in: ``_:x`` in two
    messages, and in two sources, is a different node in the target."""
    one, two = tmp_path / "one.nt", tmp_path / "two.nt"
    one.write_text("<a:s> <a:p> _:x .\n# @message\n<a:s> <a:p> _:x .\n")
    two.write_text("<a:s> <a:p> _:x .\n")
    log = tmp_path / "log.jellyp"
    ingest_messages(log, [one, two], messages=True)
    quads = state(log)
    assert len(quads) == 3 and len({q[2] for q in quads}) == 3


def test_a_malformed_message_ingests_nothing(tmp_path: Path) -> None:
    """§2.1 message mode: message 3 is malformed; neither it nor the messages before it are
    written, and an existing log stays byte for byte as it was."""
    good = tmp_path / "good.nq"
    good.write_text("<a:s> <a:p> <a:o> .\n")
    log = tmp_path / "log.jellyp"
    ingest_messages(log, [good])
    before = log.read_bytes()
    bad = tmp_path / "bad.nq"
    bad.write_text("<a:s> <a:p> <a:o> .\n# @message\n# @message\n<a:s> <a:p> .\n")
    with pytest.raises(DecodeError, match="message 3, line 4"):
        ingest_messages(log, [good, bad], messages=True)
    assert log.read_bytes() == before
    with pytest.raises(DecodeError):
        ingest_messages(tmp_path / "new.jellyp", [bad], messages=True)
    assert not (tmp_path / "new.jellyp").exists()


def test_the_command_line_reports_and_fails_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.ndjsonld").write_text('{"@id": "a:s"}\n{"@id": \n')
    run = [sys.executable, "-m", "patchsync", "ingest"]
    done = subprocess.run([*run, str(DATA / "draft-products.yamlld"), "-o", "log.jellyp"], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and "2 patches appended" in done.stdout, done.stderr
    done = subprocess.run([*run, "bad.ndjsonld", "-o", "log.jellyp"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("patchsync: bad.ndjsonld, message 2, line 2: ")
    assert len(patches(tmp_path / "log.jellyp")) == 2
