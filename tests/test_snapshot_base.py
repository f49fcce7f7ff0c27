"""Snapshots with their position, and starting a replica from one (``snapshot``, ``--base``).

The rules are docs/design.md §10; the position travels in the first frame's metadata, which
the Jelly-RDF spec leaves to implementations ("treat it as comments",
jelly-protobuf-sources.txt, ``RdfStreamFrame.metadata``). Every check is differential: a
replica started from a snapshot plus the rest of the log must equal a replica that applied
the whole log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchsync._proto import rdf_pb2
from patchsync.apply.api import apply_events, apply_file
from patchsync.apply.base import load_base
from patchsync.apply.registry import open_target
from patchsync.apply.snapshot_file import POSITION_KEY, read_position, write_snapshot
from patchsync.apply.target import Checkpoint, SourceStatus, Target, dumpable
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.codec.framing import Framer
from patchsync.errors import ChainError, DecodeError, FormatError, UsageError
from patchsync.events import PrefixAdd
from patchsync.logs.patch_logs import read_events
from patchsync.logs.rdf_files import convert_rdf, jelly_summary
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import write_log
from .nats_helpers import patch_events, patch_id, write_chain

ROOT = Path(__file__).resolve().parents[1]
EX = "http://example.org/"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, cwd=cwd, timeout=120)


def state(target: Target) -> list[tuple[str, str, str, str]]:
    return sorted(dumpable(target).quads())


def full_state(log: Path) -> list[tuple[str, str, str, str]]:
    target = MemoryTarget()
    apply_file(log, target)
    return state(target)


def specs(tmp_path: Path, name: str) -> list[str]:
    return [f"sqlite:///{tmp_path / name}.db", f"file:{tmp_path / name}.nq", f"file:{tmp_path / name}.trig"]


def no_position() -> Checkpoint:
    return Checkpoint(0, 0, 0)


@pytest.mark.parametrize("kind", [0, 1, 2], ids=["sqlite", "file-nq", "file-trig"])
@pytest.mark.parametrize("split", [1, 6, 10])
def test_base_then_the_rest_of_the_log_equals_the_whole_log(tmp_path: Path, kind: int, split: int) -> None:
    full, first = tmp_path / "full.jellyp", tmp_path / "first.jellyp"
    ids = write_chain(full, "c", 10, size=3)
    write_chain(first, "c", split, size=3)
    source = open_target(specs(tmp_path, "a")[kind])
    apply_file(first, source)
    snap = tmp_path / "snap.jelly"
    report = write_snapshot(source, snap, name="a")
    source.close()
    assert report.position.head == ids[split - 1]
    # The position names the head and the checkpoint of the log the source applied.
    position = read_position(snap)
    assert position is not None and position.head == ids[split - 1]
    assert position.sources[str(first.resolve())].patches == split

    replica = open_target(specs(tmp_path, "b")[kind])
    loaded = load_base(replica, snap, [full])
    assert loaded.quads == report.quads
    result = apply_file(full, replica)
    assert result.patches == 10 - split  # only what follows the snapshot's last patch
    assert replica.head() == ids[-1]
    assert state(replica) == full_state(full)
    replica.close()
    # Reopened (a file target reads back its file and sidecar): a rerun applies nothing.
    replica = open_target(specs(tmp_path, "b")[kind])
    assert apply_file(full, replica).patches == 0
    assert state(replica) == full_state(full)
    replica.close()


def test_a_log_starting_after_the_snapshot_continues_it(tmp_path: Path) -> None:
    first, rest, full = tmp_path / "first.jellyp", tmp_path / "rest.jellyp", tmp_path / "full.jellyp"
    write_chain(first, "c", 4)
    write_chain(rest, "c", 3, start=5, prev=patch_id("c", 4))
    write_chain(full, "c", 7)
    source = MemoryTarget()
    apply_file(first, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    replica = MemoryTarget()
    assert load_base(replica, snap, [rest]).log_checkpoints == {}  # nothing to pass over
    apply_file(rest, replica)
    assert state(replica) == full_state(full)


def test_logs_that_do_not_continue_the_snapshot_load_nothing(tmp_path: Path) -> None:
    first, other = tmp_path / "first.jellyp", tmp_path / "other.jellyp"
    write_chain(first, "c", 4)
    write_chain(other, "x", 3)  # another chain: neither holds c:4 nor follows it
    source = MemoryTarget()
    apply_file(first, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    replica = MemoryTarget()
    with pytest.raises(ChainError, match=r"do not hold the base's last patch urn:patch:c:4"):
        load_base(replica, snap, [other])
    assert state(replica) == [] and replica.sources() == [] and replica.head() is None


def test_a_stream_sequence_checkpoint_travels_with_the_snapshot(tmp_path: Path) -> None:
    # A stream source's checkpoint holds the message sequence as its offset (see
    # patchsync.logs.payloads.decode_message); the snapshot carries it as stored.
    stream = "nats://127.0.0.1:4222/orders"
    nt = NTriplesTerms()
    source = MemoryTarget()
    log = write_log(tmp_path / "one.jellyp", patch_events("s", 1, None), adapter=nt)
    events = [e._replace(offset=7) for e in read_events(log, adapter=nt)]
    apply_events(events, source, source=stream)
    cp = source.checkpoint(stream)
    assert cp is not None and cp.offset == 7
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    replica = MemoryTarget()
    load_base(replica, snap, [stream])
    copied = replica.checkpoint(stream)
    assert copied is not None
    assert (copied.offset, copied.row, copied.patches, copied.last_id) == (cp.offset, cp.row, 1, patch_id("s", 1))
    assert replica.head() == patch_id("s", 1)
    assert nt.unpack(state(replica)[0][0])[1] == f"{EX}s1"
    # A replica reaching the same stream through another address resumes it there too.
    elsewhere = MemoryTarget()
    load_base(elsewhere, snap, ["nats://nats.internal:4222/orders", "nats://nats.internal:4222/other"])
    moved = elsewhere.checkpoint("nats://nats.internal:4222/orders")
    assert moved is not None and (moved.offset, moved.fingerprint) == (cp.offset, cp.fingerprint)
    assert elsewhere.checkpoint("nats://nats.internal:4222/other") is None
    assert elsewhere.checkpoint(stream) is None  # moved, not copied: status shows one entry
    # A replica that does not follow the stream does not take its checkpoint.
    other = MemoryTarget()
    load_base(other, snap)
    assert other.checkpoint(stream) is None and other.head() == patch_id("s", 1)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_namespaces_and_rdf_star_round_trip(tmp_path: Path, kind: str) -> None:
    # A quoted triple makes the writer declare RDF-star (Jelly-RDF spec, stream options:
    # a feature must be declared before it is used) and write the file again.
    nt = NTriplesTerms()
    source = MemoryTarget() if kind == "memory" else open_target(f"sqlite:///{tmp_path / 's.db'}")
    quoted = nt.triple(nt.iri(f"{EX}a"), nt.iri(f"{EX}b"), nt.literal("c"))
    source.checkpoint("s")
    source.begin()
    source.add([(quoted, nt.iri(f"{EX}says"), nt.literal("é\n"), nt.iri(f"{EX}g"))])
    source.add([(nt.bnode("b1"), nt.iri(f"{EX}p"), nt.literal("1", datatype=f"{EX}int"), None)])
    source.add_prefix(None, "ex", nt.iri(EX))
    source.add_prefix(nt.iri(f"{EX}g"), "g", nt.iri(f"{EX}graph/"))
    source.commit("s", no_position(), [])
    source.flush()
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    assert jelly_summary(snap.read_bytes(), str(snap))["options"]["rdf_star"] is True
    replica = MemoryTarget()
    load_base(replica, snap)
    assert state(replica) == state(source)
    assert replica.namespaces() == dumpable(source).namespaces()
    source.close()


def test_the_snapshot_is_plain_jelly_rdf(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 3, size=2)
    source = MemoryTarget()
    apply_file(log, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    data = snap.read_bytes()
    framer = Framer()
    framer.feed(data)
    framer.close()
    first = rdf_pb2.RdfStreamFrame.FromString(framer.next_frame()[1])  # type: ignore[index]
    assert first.rows[0].WhichOneof("row") == "options"  # the metadata rides on a normal frame
    assert POSITION_KEY in first.metadata
    # inspect shows it (the summary keeps frame metadata as text).
    shown = json.loads(jelly_summary(data, str(snap))["metadata"][POSITION_KEY])
    assert shown["head"] == patch_id("c", 3) and shown["sources"][str(log.resolve())]["patches"] == 3
    # Any Jelly reader reads the quads (the metadata is a comment to it).
    out = tmp_path / "snap.nq"
    with open(out, "wb") as f:
        convert_rdf(data, "jelly", f, "nq", source=str(snap))
    expected = "".join(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n" for s, p, o, g in state(source))
    assert sorted(out.read_text().splitlines()) == sorted(expected.splitlines())


@pytest.mark.parametrize("suffix", [".nq", ".trig", ".rt", ".rpb"])
def test_a_base_without_position_is_a_starting_state(tmp_path: Path, suffix: str) -> None:
    # As Spark's replay takes a base (docs/design.md §7): the logs apply from their start.
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 5)
    extra = f'<{EX}base> <{EX}p> "kept" <{EX}g> .\n'
    nq = tmp_path / "base.nq"
    nq.write_text(extra)
    base = tmp_path / f"base{suffix}"
    if suffix != ".nq":
        fmt = {".trig": "trig", ".rt": "rdf-thrift", ".rpb": "rdf-protobuf"}[suffix]
        with open(base, "wb") as f:
            convert_rdf(nq.read_bytes(), "nq", f, fmt, source=str(nq))
    replica = MemoryTarget()
    report = load_base(replica, base, [log])
    assert report.position is None and report.quads == 1
    assert apply_file(log, replica).patches == 5
    assert state(replica) == sorted([*full_state(log), (f"<{EX}base>", f"<{EX}p>", '"kept"', f"<{EX}g>")])


def test_a_non_empty_target_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 2)
    source = MemoryTarget()
    apply_file(log, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    before = state(source)
    with pytest.raises(UsageError, match="only into an empty target"):
        load_base(source, snap)
    assert state(source) == before


def test_corrupt_snapshots_fail_before_anything_is_loaded(tmp_path: Path) -> None:
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 3, size=50)
    source = MemoryTarget()
    apply_file(log, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    data = snap.read_bytes()
    cut = tmp_path / "cut.jelly"
    cut.write_bytes(data[: len(data) - 5])
    replica = MemoryTarget()
    with pytest.raises(DecodeError):
        load_base(replica, cut)
    assert state(replica) == [] and replica.sources() == []
    bad = tmp_path / "bad.jelly"
    bad.write_bytes(data.replace(b'"format": 1', b'"format": 9'))
    with pytest.raises(FormatError, match=r"snapshot position .* is malformed"):
        load_base(replica, bad)
    assert state(replica) == []


def test_the_snapshot_changes_with_the_target_only_between_units(tmp_path: Path) -> None:
    # A target that commits a unit between the two position reads is read again.
    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 4)
    source = MemoryTarget()
    apply_file(log, source)
    calls = 0
    original = source.sources

    def moving() -> list[SourceStatus]:
        nonlocal calls
        calls += 1
        if calls == 2:  # after the first read of the position: a unit lands
            source.begin()
            source.add([(f"<{EX}late>", f"<{EX}p>", '"x"', "")])
            source.commit("late", no_position(), [])
        return original()

    source.sources = moving  # type: ignore[method-assign]
    report = write_snapshot(source, tmp_path / "snap.jelly")
    assert report.attempts == 2
    assert "late" in report.position.sources
    assert report.quads == len(state(source))


def test_cli_snapshot_apply_base_and_tail_base(tmp_path: Path) -> None:
    full, first = tmp_path / "full.jellyp", tmp_path / "first.jellyp"
    write_chain(full, "c", 8, size=2)
    write_chain(first, "c", 5, size=2)
    a, b, t = (f"sqlite:///{tmp_path / n}.db" for n in "abt")
    assert run("apply", str(first), "--target", a).returncode == 0
    snap = tmp_path / "snap.jelly"
    done = run("snapshot", "--target", a, "-o", str(snap))
    assert done.returncode == 0, done.stderr
    assert b"at patch urn:patch:c:5" in done.stdout
    done = run("apply", "--base", str(snap), str(full), "--target", b)
    assert done.returncode == 0, done.stderr
    assert b"3 patches applied" in done.stdout
    done = run("tail", "--once", "--base", str(snap), str(full), "--target", t, "--state-dir", str(tmp_path / "st"))
    assert done.returncode == 0, done.stderr
    expected = full_state(full)
    assert sql_state(b) == sql_state(t) == expected
    # Loading the base again into the now filled target: one line, exit 2, nothing changed.
    again = run("apply", "--base", str(snap), str(full), "--target", b)
    assert again.returncode == 2
    assert again.stderr.decode().count("\n") == 1 and b"only into an empty target" in again.stderr
    assert sql_state(b) == expected
    # A corrupt snapshot: one line naming the file, exit 1, the target stays empty.
    (tmp_path / "cut.jelly").write_bytes(snap.read_bytes()[:-3])
    c = f"sqlite:///{tmp_path}/c.db"
    cut = run("apply", "--base", str(tmp_path / "cut.jelly"), str(full), "--target", c)
    assert cut.returncode == 1 and b"Traceback" not in cut.stderr
    assert cut.stderr.decode().count("\n") == 1 and b"cut.jelly" in cut.stderr
    assert sql_state(c) == []


def sql_state(spec: str) -> list[tuple[str, str, str, str]]:
    target = open_target(spec)
    try:
        return state(target)
    finally:
        target.close()


def test_prefix_only_patches_survive(tmp_path: Path) -> None:
    # A namespace change is state too: a replica from the snapshot holds it.
    log = tmp_path / "a.jellyp"
    events = patch_events("c", 1, None)
    events.insert(-2, PrefixAdd("ex", f"<{EX}>", None))
    write_log(log, events, adapter=NTriplesTerms())
    source = MemoryTarget()
    apply_file(log, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    replica = MemoryTarget()
    load_base(replica, snap)
    assert replica.namespaces() == source.namespaces() == {("", "ex"): f"<{EX}>"}


def test_pyjelly_reads_a_snapshot(tmp_path: Path) -> None:
    # Another implementation reads the quads and passes over the metadata it does not use.
    pytest.importorskip("pyjelly")
    import io

    from pyjelly.integrations.generic import generic_sink as pj
    from pyjelly.integrations.generic.parse import parse_jelly_flat

    log = tmp_path / "a.jellyp"
    write_chain(log, "c", 6, size=4)
    source = MemoryTarget()
    apply_file(log, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    read = [st for st in parse_jelly_flat(io.BytesIO(snap.read_bytes())) if isinstance(st, pj.Quad)]
    nt = NTriplesTerms()
    assert sorted((f"<{q.s._iri}>", f"<{q.p._iri}>", nt.literal(q.o._lex), f"<{q.g._iri}>") for q in read) == state(
        source
    )


@pytest.mark.parametrize("split", [2, 5, 9])
def test_tail_continues_a_directory_of_segments_after_the_base(tmp_path: Path, split: int) -> None:
    # Segments before the one holding the snapshot's last patch are passed over whole.
    from patchsync.tail import tail

    segments = tmp_path / "logs"
    segments.mkdir()
    prev = None
    for n, start in enumerate((1, 4, 7), 1):
        write_chain(segments / f"patch-{n:010d}.jellyp", "c", 3, start=start, prev=prev)
        prev = patch_id("c", start + 2)
    whole = tmp_path / "whole.jellyp"
    write_chain(whole, "c", 9)
    first = tmp_path / "first.jellyp"
    write_chain(first, "c", split)
    source = MemoryTarget()
    apply_file(first, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    replica = open_target(f"sqlite:///{tmp_path / 'r.db'}")
    report = load_base(replica, snap, [segments])
    assert len(report.log_checkpoints) == (split - 1) // 3 + 1
    reports = tail([segments], replica, once=True, state_dir=tmp_path / "state")
    assert all(r.state != "failed" for r in reports), [r.error for r in reports]
    assert sum(r.result.patches for r in reports) == 9 - split
    assert state(replica) == full_state(whole)
    replica.close()


def test_tail_base_continues_a_stream(tmp_path: Path, nats_stream: str) -> None:
    # The daemon following a stream (issue #15 part A) resumes after the snapshot's stream
    # sequence, here reaching the server through another address than the snapshot's.
    pytest.importorskip("nats")
    from patchsync.nats import publish_logs
    from patchsync.tail import tail

    first, rest, full = tmp_path / "first.jellyp", tmp_path / "rest.jellyp", tmp_path / "full.jellyp"
    write_chain(first, "c", 6, size=2)
    write_chain(rest, "c", 4, start=7, prev=patch_id("c", 6), size=2)
    write_chain(full, "c", 10, size=2)
    publish_logs([first], nats_stream)
    primary = MemoryTarget()
    tail([nats_stream], primary, once=True)
    snap = tmp_path / "snap.jelly"
    write_snapshot(primary, snap)
    publish_logs([first, rest], nats_stream)  # the stream moves on; the first six are skipped
    other = nats_stream.replace("127.0.0.1", "localhost")
    replica = open_target(f"sqlite:///{tmp_path / 'r.db'}")
    load_base(replica, snap, [other])
    reports = tail([other], replica, once=True)
    assert [r.result.patches for r in reports] == [4]
    assert state(replica) == full_state(full)
    replica.close()


@pytest.mark.parametrize("direction", ["postgres-to-sqlite", "sqlite-to-postgres"])
def test_snapshot_and_base_on_postgresql(tmp_path: Path, pg_url: str, direction: str) -> None:
    full, first = tmp_path / "full.jellyp", tmp_path / "first.jellyp"
    ids = write_chain(full, "c", 8, size=3)
    write_chain(first, "c", 5, size=3)
    sqlite = f"sqlite:///{tmp_path / 'x.db'}"
    source_spec, replica_spec = (pg_url, sqlite) if direction == "postgres-to-sqlite" else (sqlite, pg_url)
    source = open_target(source_spec)
    apply_file(first, source)
    snap = tmp_path / "snap.jelly"
    write_snapshot(source, snap)
    source.close()
    replica = open_target(replica_spec)
    load_base(replica, snap, [full])
    assert apply_file(full, replica).patches == 3
    assert replica.head() == ids[-1]
    assert state(replica) == full_state(full)
    replica.close()


def test_snapshots_taken_while_patches_are_applied_match_their_position(tmp_path: Path) -> None:
    # A real concurrent writer: every snapshot must hold exactly the state after the patch
    # its position names as head (docs/design.md §10), whenever it was taken.
    import threading

    from patchsync.apply.targets.sql import SqlTarget

    count = 60
    logs = []
    for n in range(1, count + 1):
        logs.append(tmp_path / f"p{n}.jellyp")
        write_chain(logs[-1], "c", 1, start=n, prev=patch_id("c", n - 1) if n > 1 else None, size=5)
    url = f"sqlite:///{tmp_path / 'w.db'}"
    writer = SqlTarget(url, group_units=1)
    reader = SqlTarget(url)
    done = threading.Event()

    def apply() -> None:
        try:
            for log in logs:
                apply_file(log, writer)
                time.sleep(0.01)  # a producer's pace: snapshots fall between patches
        finally:
            done.set()

    thread = threading.Thread(target=apply)
    thread.start()
    taken: list[tuple[int, list[tuple[str, str, str, str]]]] = []
    try:
        while not done.is_set() or not taken:
            snap = tmp_path / "snap.jelly"
            head = write_snapshot(reader, snap, attempts=50).position.head
            replica = MemoryTarget()
            load_base(replica, snap)
            taken.append((int(head.rsplit(":", 1)[1]) if head else 0, state(replica)))
    finally:
        thread.join()
        writer.close()
        reader.close()
    assert any(0 < n < count for n, _ in taken), "no snapshot fell while the patches were applied"
    expected: dict[int, list[tuple[str, str, str, str]]] = {0: []}
    replay = MemoryTarget()
    for n, log in enumerate(logs, 1):
        apply_file(log, replay)
        expected[n] = state(replay)
    for n, quads in taken:
        assert quads == expected[n], n
