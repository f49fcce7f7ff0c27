"""``ingest`` modes, destinations, ``--state``, resuming and refusals, checked differentially.

Each mode's log is applied to a fresh SQLite target and compared (up to blank node renaming)
with the dataset computed independently with rdflib: every message parsed on its own (so its
blank nodes are its own) and folded by the mode's rule. Rules cited from the RDF Messages
draft, https://w3c-cg.github.io/rsp/spec/messages, by section.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
from rdflib import Dataset, Graph, URIRef
from rdflib.compare import isomorphic
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync.apply.api import apply_events, apply_file
from patchsync.apply.registry import open_target
from patchsync.errors import DecodeError, UsageError
from patchsync.events import Add, Delete, Header, PatchEnd
from patchsync.ingest import ingest_messages
from patchsync.logs.patch_logs import read_events
from patchsync.terms.ntriples import NTriplesTerms

NT = NTriplesTerms()

#: The messages every mode is checked on: graphs replaced, kept and emptied, blank nodes
#: with one label in two messages, an empty message, a message repeating what is there.
MESSAGES = [
    '<a:s1> <a:p> "1" <a:g1> .\n<a:s2> <a:p> _:b <a:g1> .\n_:b <a:q> "x" <a:g1> .\n<a:s> <a:p> "d" .\n',
    '<a:s1> <a:p> "2" <a:g1> .\n<a:s3> <a:p> "3" <a:g2> .\n',
    "",
    '<a:s2> <a:p> _:b <a:g1> .\n_:b <a:q> "x" <a:g1> .\n',
    '<a:s> <a:p> "d2" .\n<a:s4> <a:p> <a:o> <a:g3> .\n',
    '<a:s1> <a:p> "2" <a:g1> .\n<a:s4> <a:p> <a:o> <a:g3> .\n',
]

Quad = tuple[object, object, object, object]


def message_log(path: Path, messages: Sequence[str]) -> Path:
    """An N-Quads message log (§2.1: a ``# @message`` comment line ends a message)."""
    path.write_text("# @message\n".join(messages))
    return path


def parse(text: str) -> set[Quad]:
    """One message's quads as rdflib reads them (fresh blank nodes per call)."""
    ds = Dataset()
    ds.parse(data=text, format="nquads")
    out: set[Quad] = set()
    for s, p, o, g in ds.quads((None, None, None, None)):
        gid = g.identifier if isinstance(g, Graph) else g
        out.add((s, p, o, None if gid is None or gid == DATASET_DEFAULT_GRAPH_ID else gid))
    return out


def expected(mode: str, messages: Iterable[str], start: Iterable[Quad] = ()) -> set[Quad]:
    """The dataset after the messages, by the mode's rule, computed with rdflib alone."""
    data = set(start)
    for text in messages:
        message = parse(text)
        if mode == "add":
            data |= message
        elif mode == "replace-graph":
            named = {q[3] for q in message}
            data = {q for q in data if q[3] not in named} | message
        else:
            data = message
    return data


def as_graph(quads: Iterable[Quad]) -> Graph:
    """A dataset as one graph (the graph name folded into the predicate), so that blank nodes
    shared across graphs are matched once by the isomorphism check."""
    graph = Graph()
    for s, p, o, g in quads:
        graph.add((s, URIRef(f"{p}#in={g or ''}"), o))  # type: ignore[arg-type]
    return graph


def target_quads(spec: str) -> set[Quad]:
    target = open_target(spec)
    try:
        lines = "".join(f"{s} {p} {o} {g} .\n" for s, p, o, g in target.quads())  # type: ignore[attr-defined]
    finally:
        target.close()
    return parse(lines)


def applied(log: Path, spec: str) -> set[Quad]:
    """The dataset the log leaves in a fresh SQLite target."""
    target = open_target(spec)
    try:
        apply_file(log, target)
    finally:
        target.close()
    return target_quads(spec)


def same(actual: set[Quad], wanted: set[Quad]) -> bool:
    return len(actual) == len(wanted) and isomorphic(as_graph(actual), as_graph(wanted))


def patches(log: Path) -> list[dict[str, object]]:
    """Each patch's headers and its numbers of adds and deletes."""
    found: list[dict[str, object]] = []
    current: dict[str, object] = {"A": 0, "D": 0}
    for event in read_events(log, adapter=NT):
        if type(event) is Header:
            current[event.key] = NT.unpack(event.value)[1]
        elif type(event) in (Add, Delete):
            key = "A" if type(event) is Add else "D"
            current[key] = int(str(current[key])) + 1
        elif type(event) is PatchEnd:
            found.append(current)
            current = {"A": 0, "D": 0}
    return found


MODES = ["add", "replace-graph", "replace"]


@pytest.mark.parametrize("suffix", ["jellyp", "rdfp"])
@pytest.mark.parametrize("mode", MODES)
def test_each_mode_leaves_the_dataset_rdflib_computes(tmp_path: Path, mode: str, suffix: str) -> None:
    """§1.1: a message is one atomic act (one patch, one transaction), possibly empty (a patch
    all the same: message n is patch n); §1.4 note: ``_:b`` of message 1 and of message 4 are
    two nodes, so replacing ``a:g1`` drops the first one's triples."""
    source = message_log(tmp_path / "in.nq", MESSAGES)
    log = tmp_path / f"out.{suffix}"
    done = ingest_messages(log, [source], mode=mode, messages=True)
    assert (done.appended, done.skipped) == (len(MESSAGES), 0)
    found = patches(log)
    assert [p["ingest-message"] for p in found] == [str(n) for n in range(1, len(MESSAGES) + 1)]
    assert all(b["prev"] == a["id"] for a, b in itertools.pairwise(found)) and "prev" not in found[0]
    assert found[2]["A"] == 0 and found[2]["D"] == (len(expected(mode, MESSAGES[:2])) if mode == "replace" else 0)
    assert same(applied(log, f"sqlite:///{tmp_path / 'check.db'}"), expected(mode, MESSAGES))


@pytest.mark.parametrize("mode", MODES)
def test_a_state_target_is_kept_and_gives_the_same_patches(tmp_path: Path, mode: str) -> None:
    """With ``--state`` the deletes come from the target, which holds each patch's result
    after the run; the log is the one replaying the destination gives."""
    source = message_log(tmp_path / "in.nq", MESSAGES)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    ingest_messages(tmp_path / "with.jellyp", [source], mode=mode, state=state, messages=True)
    ingest_messages(tmp_path / "without.jellyp", [source], mode=mode, messages=True)
    assert patches(tmp_path / "with.jellyp") == patches(tmp_path / "without.jellyp")
    assert same(target_quads(state), expected(mode, MESSAGES))


def test_replace_graph_keeps_what_an_earlier_log_holds_in_other_graphs(tmp_path: Path) -> None:
    log = tmp_path / "log.rdfp"
    log.write_text('H id <urn:p:0> .\nTX .\nA <a:x> <a:p> "kept" <a:g9> .\nA <a:s1> <a:p> "old" <a:g1> .\nTC .\nZ .\n')
    source = message_log(tmp_path / "in.nq", MESSAGES[:2])
    ingest_messages(log, [source], mode="replace-graph", messages=True)
    start = parse('<a:x> <a:p> "kept" <a:g9> .\n<a:s1> <a:p> "old" <a:g1> .\n')
    assert same(applied(log, f"sqlite:///{tmp_path / 'c.db'}"), expected("replace-graph", MESSAGES[:2], start))
    assert patches(log)[1]["prev"] == "urn:p:0"


def test_blank_nodes_are_scoped_to_their_message_in_replace_graph(tmp_path: Path) -> None:
    """§1.4 note: the same label in the next message is another node: the patch deletes the
    old node's triples and adds the new node's, and the target holds one node, not both."""
    source = message_log(tmp_path / "in.nt", ["<a:s> <a:p> _:x .\n_:x <a:q> <a:o> .\n"] * 2)
    log = tmp_path / "log.jellyp"
    ingest_messages(log, [source], mode="replace-graph", messages=True)
    assert [(p["A"], p["D"]) for p in patches(log)] == [(2, 0), (2, 2)]
    quads = applied(log, f"sqlite:///{tmp_path / 'c.db'}")
    assert len(quads) == 2 and len({q[2] for q in quads if str(q[1]) == "a:p"}) == 1


def test_a_rerun_after_a_crash_mid_write_gives_the_same_log(tmp_path: Path) -> None:
    """A log cut anywhere (a writer killed mid-write) is completed by a rerun into exactly the
    patches, ids included, of an uninterrupted run: nothing twice, nothing lost."""
    source = message_log(tmp_path / "in.nq", MESSAGES)
    whole = tmp_path / "whole.jellyp"
    ingest_messages(whole, [source], mode="replace", messages=True)
    data = whole.read_bytes()
    reference = patches(whole)
    for cut in sorted({len(data) * k // 7 for k in range(1, 7)} | {len(data) - 1}):
        log = tmp_path / f"cut{cut}.jellyp"
        log.write_bytes(data[:cut])
        again = ingest_messages(log, [source], mode="replace", messages=True)
        assert again.appended + again.skipped == len(MESSAGES)
        assert patches(log) == reference, cut


def test_a_state_target_that_lags_the_destination_is_caught_up(tmp_path: Path) -> None:
    """A crash between the destination's write and the state's leaves the state behind: the
    rerun rebuilds the missing patches from the state and applies them to it alone."""
    source, log = tmp_path / "in.nq", tmp_path / "log.jellyp"
    db = tmp_path / "state.db"
    state = f"sqlite:///{db}"
    message_log(source, MESSAGES[:2])
    ingest_messages(log, [source], mode="replace-graph", state=state, messages=True)
    shutil.copy(db, tmp_path / "early.db")
    message_log(source, MESSAGES[:4])
    ingest_messages(log, [source], mode="replace-graph", state=state, messages=True)
    shutil.copy(tmp_path / "early.db", db)  # the state as a crash after message 2 left it
    message_log(source, MESSAGES)
    done = ingest_messages(log, [source], mode="replace-graph", state=state, messages=True)
    assert (done.appended, done.skipped, done.caught_up) == (2, 4, 2)
    wanted = expected("replace-graph", MESSAGES)
    assert same(target_quads(state), wanted)
    assert same(applied(log, f"sqlite:///{tmp_path / 'check.db'}"), wanted)
    assert len(patches(log)) == len(MESSAGES)


def test_a_killed_ingest_rerun_appends_each_message_once(tmp_path: Path) -> None:
    """kill -9 while the ingest writes: the rerun completes the log and the state target."""
    messages = [f'<a:s{i % 7}> <a:p> "{i}" <a:g{i % 3}> .\n' for i in range(400)]
    source = message_log(tmp_path / "in.nq", messages)
    log, state = tmp_path / "log.jellyp", f"sqlite:///{tmp_path / 'state.db'}"
    run = [sys.executable, "-m", "patchsync", "ingest", str(source), "-o", str(log), "--messages"]
    run += ["--mode", "replace-graph", "--state", state]
    child = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while child.poll() is None and (not log.exists() or log.stat().st_size < 2_000):
            time.sleep(0.002)
    finally:
        child.kill()
        child.wait()
    done = subprocess.run(run, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    counts = re.search(r"(\d+) patches appended .*\((\d+) messages were already ingested", done.stdout)
    assert counts is not None and int(counts[1]) + int(counts[2]) == len(messages), done.stdout
    found = patches(log)
    assert [p["ingest-message"] for p in found] == [str(n) for n in range(1, len(messages) + 1)]
    wanted = expected("replace-graph", messages)
    assert same(target_quads(state), wanted)


def test_into_a_stream_with_a_state_target(tmp_path: Path, nats_stream: str) -> None:
    """One patch per message published to the stream (§1.3: the stream keeps the messages'
    order); a rerun publishes nothing; the stream replayed gives the mode's dataset."""
    from patchsync.nats import NatsLog, decode_message

    source = message_log(tmp_path / "in.nq", MESSAGES)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    done = ingest_messages(nats_stream, [source], mode="replace-graph", state=state, messages=True)
    assert done.appended == len(MESSAGES)
    again = ingest_messages(nats_stream, [source], mode="replace-graph", state=state, messages=True)
    assert (again.appended, again.skipped) == (0, len(MESSAGES))
    check = f"sqlite:///{tmp_path / 'check.db'}"
    target = open_target(check)
    with NatsLog(nats_stream) as stream:
        messages = stream.fetch(1, 100, timeout=2)
        assert stream.head().seq == len(MESSAGES) == len(messages)
        for m in messages:
            apply_events(decode_message(m, nats_stream, adapter=target.adapter), target, source=nats_stream)
    target.close()
    wanted = expected("replace-graph", MESSAGES)
    assert same(target_quads(check), wanted) and same(target_quads(state), wanted)


def test_add_into_a_stream_and_its_refusals(tmp_path: Path, nats_stream: str) -> None:
    from patchsync.nats import NatsLog

    source = message_log(tmp_path / "in.nq", MESSAGES[:3])
    with pytest.raises(UsageError, match=r"--mode replace needs the current state.*name --state TARGET"):
        ingest_messages(nats_stream, [source], mode="replace", messages=True)
    bad = tmp_path / "bad.nq"
    bad.write_text('<a:s> <a:p> "1" .\n# @message\n<a:s> <a:p> .\n')
    with pytest.raises(DecodeError, match="message 2, line 3"):
        ingest_messages(nats_stream, [source, bad], messages=True)
    assert ingest_messages(nats_stream, [source], messages=True).appended == 3
    with NatsLog(nats_stream) as stream:
        assert stream.head().seq == 3  # the malformed run published nothing


def test_a_state_at_another_head_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    source = message_log(tmp_path / "in.nq", MESSAGES)
    state = f"sqlite:///{tmp_path / 'state.db'}"
    ingest_messages(tmp_path / "one.jellyp", [source], mode="replace", state=state, messages=True)
    log = tmp_path / "two.jellyp"
    with pytest.raises(UsageError, match=r"--state .* is at message 6 of .* but .*two.jellyp is empty"):
        ingest_messages(log, [source], mode="replace", state=state, messages=True)
    assert not log.exists()
    other = tmp_path / "other.rdfp"
    other.write_text("H id <urn:p:1> .\nTX .\nA <a:s> <a:p> <a:o> .\nTC .\nZ .\n")
    before = other.read_bytes()
    with pytest.raises(UsageError, match=r"is empty but .*other.rdfp is at patch urn:p:1"):
        ingest_messages(other, [source], state=f"sqlite:///{tmp_path / 'new.db'}", messages=True)
    assert other.read_bytes() == before


def test_refusals_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    source = message_log(tmp_path / "in.nq", MESSAGES[:2])
    with pytest.raises(UsageError, match="named twice"):
        ingest_messages(tmp_path / "a.jellyp", [source, tmp_path / "." / "in.nq"], messages=True)
    with pytest.raises(UsageError, match="unknown source scheme nope://"):
        ingest_messages("nope://host/x", [source], messages=True)
    with pytest.raises(UsageError, match="--mode merge"):
        ingest_messages(tmp_path / "a.jellyp", [source], mode="merge", messages=True)
    assert not (tmp_path / "a.jellyp").exists()
    run = [sys.executable, "-m", "patchsync", "ingest", "--messages", "-o"]
    done = subprocess.run([*run, "nats://127.0.0.1:1/S", "--mode", "replace", "in.nq"], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "needs the current state" in done.stderr
    (tmp_path / "bad.ttl").write_text("<a:s> <a:p> <a:o> .\n# @message\n<a:s> <a:p> <a:o>, .\n")
    done = subprocess.run([*run, "x.rdfp", "in.nq", "bad.ttl"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.startswith("patchsync: bad.ttl, message 2, line 3")
    assert done.stderr.count("\n") == 1 and not (tmp_path / "x.rdfp").exists()
