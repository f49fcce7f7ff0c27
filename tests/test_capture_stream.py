"""A recorder committing straight to a NATS JetStream stream (issue #15), against the real server;
and what a recorder does when its log refuses a patch (stream or file).

Each committed patch is one message, appended only if it follows the stream's head (the
chain rule of RDF Patch logs, rdf-patch-logs.md, "prev"); reading the stream back and
applying it to a fresh target must give the recorded dataset's state.
"""

from __future__ import annotations

import re

import pytest
from rdflib import Dataset, Graph, Literal, Namespace

from patchsync.apply.api import apply_events
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.capture import PatchLog, record
from patchsync.errors import ChainError, UsageError
from patchsync.nats import NatsLog, StreamUnavailable, StreamWriter, decode_message
from patchsync.terms.ntriples import NTriplesTerms

EX = Namespace("http://example.org/")


def replay(url: str) -> MemoryTarget:
    """A fresh target holding every patch of the stream, applied in order."""
    target = MemoryTarget()
    with NatsLog(url) as log:
        last, seq = log.head().seq, 1
        while seq <= last:
            msgs = log.fetch(seq, 100, timeout=2)
            assert msgs, f"{url}: sequence {seq} missing"
            for m in msgs:
                apply_events(decode_message(m, url, adapter=NTriplesTerms()), target, source=url)
            seq = msgs[-1].seq + 1
    return target


def nquads(ds: Dataset) -> list[tuple[str, str, str, str]]:
    """The dataset's quads as the memory target holds them (N-Triples, "" default graph)."""
    out = []
    for s, p, o, g in ds.quads((None, None, None, None)):
        gid = g.identifier if isinstance(g, Graph) else g
        graph = "" if gid is None or str(gid) == "urn:x-rdflib:default" else gid.n3()
        out.append((s.n3(), p.n3(), o.n3(), graph))
    return sorted(out)


def test_recorded_changes_replayed_from_the_stream_give_the_same_state(nats_stream: str) -> None:
    ds = Dataset()
    with record(ds, nats_stream) as rec:
        g = rec.graph.graph(EX.g)
        with rec.transaction(author="alice"):
            for i in range(20):
                g.add((EX[f"s{i}"], EX.p, Literal(i)))
            rec.graph.add((EX.a, EX.b, Literal("in the default graph")))
        with rec.transaction():
            g.remove((EX.s3, None, None))
            g.add((EX.s3, EX.p, Literal("changed", lang="en")))
        with pytest.raises(RuntimeError), rec.transaction():
            g.add((EX.never, EX.p, EX.o))
            raise RuntimeError("abort")  # a TA patch: the store is rolled back, nothing applied
        rec.graph.bind("ex", EX)
        g.remove((EX.s7, EX.p, None))
        rec.flush()
        head = rec.head
    target = replay(nats_stream)
    assert sorted(target.quads()) == nquads(ds)
    assert (EX.never, EX.p, EX.o) not in ds.graph(EX.g)
    assert target.namespaces()[("", "ex")] == f"<{EX}>"
    assert target.head() == head
    with NatsLog(nats_stream) as log:
        assert log.head().patch_id == head


def test_a_second_recorder_continues_the_streams_chain(nats_stream: str) -> None:
    ds = Dataset()
    with record(ds, nats_stream) as rec:
        rec.graph.add((EX.a, EX.p, Literal(1)))
        rec.flush()
        first = rec.head
    with record(ds, nats_stream) as rec:  # reads the stream's head on opening
        assert rec.head == first
        rec.graph.add((EX.b, EX.p, Literal(2)))
    assert sorted(replay(nats_stream).quads()) == nquads(ds)


def test_a_patch_the_stream_refuses_is_rolled_back_in_the_store(nats_stream: str) -> None:
    ds = Dataset()
    ours = StreamWriter(nats_stream)
    assert isinstance(ours, PatchLog)
    rec = record(ds, ours)
    rec.graph.add((EX.a, EX.p, Literal(1)))
    rec.flush()
    # Another writer moves the stream's head: our next patch no longer follows it.
    with record(Dataset(), nats_stream) as other:
        other.graph.add((EX.x, EX.p, Literal("other")))
    with pytest.raises(ChainError), rec.transaction():
        rec.graph.add((EX.b, EX.p, Literal(2)))
    assert (EX.b, EX.p, Literal(2)) not in rec.graph  # not in the stream, so not in the store
    assert len(ds) == 1
    with pytest.raises(UsageError, match="stopped after an error"):
        rec.graph.add((EX.c, EX.p, Literal(3)))
    rec.close()
    replica = replay(nats_stream)
    assert len(list(replica.quads())) == 2  # ours (a) and the other writer's (x)


def test_a_stream_takes_no_file_options(nats_stream: str) -> None:
    with pytest.raises(UsageError, match="a stream takes no fmt, fsync or segment limits"):
        record(Dataset(), nats_stream, fsync=True)


def test_an_unreachable_stream_fails_on_opening() -> None:
    # Nothing listens on port 1: the recorder never starts, nothing is recorded.
    with pytest.raises(StreamUnavailable, match=re.escape("127.0.0.1:1")):
        record(Dataset(), "nats://127.0.0.1:1/nowhere")


def test_a_failed_write_rolls_the_patch_back_too() -> None:
    # The same rule for a file log: /dev/full refuses every write (ENOSPC), as a full disk.
    ds = Dataset()
    ds.graph(EX.g).add((EX.kept, EX.p, Literal(0)))
    with open("/dev/full", "wb", buffering=0) as full:
        rec = record(ds, full)
        with pytest.raises(OSError), rec.transaction():
            rec.graph.graph(EX.g).add((EX.a, EX.p, Literal(1)))
        assert set(ds.graph(EX.g)) == {(EX.kept, EX.p, Literal(0))}
        with pytest.raises(UsageError, match="stopped after an error"):
            rec.graph.add((EX.b, EX.p, Literal(2)))
        rec.close()
