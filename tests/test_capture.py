"""The rdflib change recorder (issue #6): what is recorded, transactions, chains, logs."""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from rdflib import BNode, ConjunctiveGraph, Dataset, Graph, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.plugins.stores.memory import Memory

from patchsync import Add, Delete, Header, PatchEnd, PrefixAdd, PrefixDelete, TxAbort, TxCommit, TxStart, UsageError
from patchsync.capture import LogWriter, Recorder, segment_files, unbind_prefix
from patchsync.events import Event
from patchsync.logs.patch_logs import iter_stream_events, read_events

from .helpers import content, patches

EX = "http://example.org/"
S, S2 = URIRef(EX + "s"), URIRef(EX + "s2")
P, P2 = URIRef(EX + "p"), URIRef(EX + "p2")
G, G2 = URIRef(EX + "g"), URIRef(EX + "g2")
DG = DATASET_DEFAULT_GRAPH_ID


# -- a plain replay (the applier of issue #4 replaces it when it lands) ---------------


def replay(events: Iterable[Event], target: Graph | None = None) -> Graph:
    """Apply committed units to ``target`` (a new Dataset by default) with set semantics.

    Rows outside a transaction form a unit ending at the next ``TX`` or at patch end;
    ``TX`` … ``TA`` applies nothing (docs/design.md §2).
    """
    if target is None:
        target = Dataset()
        # Only the log may bind prefixes: rdflib binds its defaults on first use otherwise.
        target._bind_namespaces = "none"  # type: ignore[attr-defined]
    ds = target
    unit: list[Event] = []
    # A statement without a graph is in the default graph (docs/design.md §5), never "any graph".
    quads = isinstance(ds, Dataset)

    def apply(rows: list[Event]) -> None:
        for e in rows:
            if type(e) is Add:
                ds.add((e.s, e.p, e.o, e.g or DG) if quads else (e.s, e.p, e.o))  # type: ignore[arg-type]
            elif type(e) is Delete:
                ds.remove((e.s, e.p, e.o, e.g or DG) if quads else (e.s, e.p, e.o))  # type: ignore[arg-type]
            elif type(e) is PrefixAdd:
                ds.store.bind(e.name, e.iri, override=True)
            elif type(e) is PrefixDelete:
                unbind_prefix(ds.store, e.name)
        rows.clear()

    for e in events:
        kind = type(e)
        if kind in (Add, Delete, PrefixAdd, PrefixDelete):
            unit.append(e)
        elif kind is TxStart or kind is TxCommit or kind is PatchEnd:
            apply(unit)
        elif kind is TxAbort:
            unit.clear()
    return ds


def state(graph: Graph) -> tuple[set[Any], dict[str, Any]]:
    """Quads (default graph as DG) and the store's namespace bindings."""
    if isinstance(graph, ConjunctiveGraph):
        default = graph.default_graph.identifier if isinstance(graph, Dataset) else graph.default_context.identifier
        quads = set()
        for s, p, o, g in graph.quads((None, None, None, None)):
            g = getattr(g, "identifier", g)  # ConjunctiveGraph yields graphs, Dataset identifiers
            quads.add((s, p, o, DG if g == default else g))
    else:
        quads = {(s, p, o, DG) for s, p, o in graph}
    return quads, dict(graph.store.namespaces())


def log_events(data: bytes, fmt: str = "jellyp") -> list[Event]:
    return list(iter_stream_events(io.BytesIO(data), fmt))


def recorded(**kwargs: Any) -> tuple[Recorder, io.BytesIO]:
    out = io.BytesIO()
    return Recorder(Dataset(), out, **kwargs), out


# -- what is recorded -----------------------------------------------------------------


def test_only_real_changes_are_recorded() -> None:
    rec, out = recorded()
    g = rec.graph
    g.add((S, P, Literal(1)))
    g.add((S, P, Literal(1)))  # present: nothing
    g.remove((S2, P, Literal(1)))  # absent: nothing
    g.add((S, P, Literal(1), G))  # same triple, other graph: a change
    rec.close()
    rows = [e for e in content(log_events(out.getvalue())) if type(e) in (Add, Delete)]
    assert rows == [Add(S, P, Literal(1), DG), Add(S, P, Literal(1), G)]


def test_pattern_removal_records_the_concrete_quads() -> None:
    rec, out = recorded()
    g = rec.graph
    g.addN([(S, P, Literal(1), G), (S, P, Literal(2), G2), (S2, P, Literal(3), G)])
    rec.flush()
    g.remove((S, None, None))  # all graphs
    rec.close()
    last = patches(log_events(out.getvalue()))[-1]
    assert {e for e in last if type(e) is Delete} == {
        Delete(S, P, Literal(1), G),
        Delete(S, P, Literal(2), G2),
    }
    assert state(rec.graph)[0] == {(S2, P, Literal(3), G)}


def test_every_rdflib_api_path_is_recorded() -> None:
    rec, out = recorded()
    ds = rec.graph
    named = ds.graph(G)
    named += [(S, P, Literal("a")), (S, P, Literal("b"))]
    named -= [(S, P, Literal("a"))]
    named.set((S, P, Literal("c")))
    ds.parse(data="@prefix ex: <http://example.org/> . ex:x ex:y [ ex:z 1 ] .", format="turtle")
    ds.update("INSERT { GRAPH <http://example.org/g2> { ?s ?p 9 } } WHERE { GRAPH ?g { ?s ?p 'c' } }")
    ds.update("DELETE { ?s <http://example.org/z> ?o } WHERE { ?s <http://example.org/z> ?o }")
    ds.bind("foo", URIRef("http://foo/"))
    rec.unbind("foo")
    ds.remove_graph(G2)
    rec.close()
    events = log_events(out.getvalue())
    assert state(replay(events)) == state(ds)
    rows = content(events)
    prefix_rows = [(type(e), e.name, e.iri) for e in rows if type(e) in (PrefixAdd, PrefixDelete)]
    assert (PrefixAdd, "foo", URIRef("http://foo/")) in prefix_rows
    assert (PrefixDelete, "foo", URIRef("http://foo/")) in prefix_rows
    assert Delete(S, P, Literal(9), G2) in rows  # remove_graph recorded the quads it dropped


def test_plain_graph_is_recorded_as_triples() -> None:
    out = io.BytesIO()
    rec = Recorder(Graph(identifier=G), out)
    rec.graph.add((S, P, BNode("b1")))
    rec.close()
    events = log_events(out.getvalue())
    assert events[0].options.statement_type.name == "TRIPLES"  # type: ignore[union-attr]
    assert Add(S, P, BNode("b1")) in content(events)


def test_conjunctive_graph_default_context_is_the_default_graph() -> None:
    out = io.BytesIO()
    with pytest.warns(DeprecationWarning, match="ConjunctiveGraph"):
        cg = ConjunctiveGraph()  # the caller's deprecated object: the warning is rdflib's to the caller
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=DeprecationWarning, module="patchsync")
        rec = Recorder(cg, out)
        rec.graph.add((S, P, Literal(1)))
        rec.graph.add((S, P, Literal(2), G))
        rec.close()
    # The same contexts as through the ConjunctiveGraph itself: its default context and G.
    assert (S, P, Literal(1)) in cg.default_context
    assert (S, P, Literal(2)) in cg.get_context(G)
    assert {Add(S, P, Literal(1), DG), Add(S, P, Literal(2), G)} <= set(content(log_events(out.getvalue())))


def test_a_conjunctive_graph_over_a_store_that_is_not_graph_aware_is_refused() -> None:
    from rdflib.plugins.stores.auditable import AuditableStore

    with pytest.warns(DeprecationWarning):
        cg = ConjunctiveGraph(store=AuditableStore(Memory()))
    with pytest.raises(UsageError, match="not graph-aware"):
        Recorder(cg, io.BytesIO())


def test_changes_reach_the_wrapped_store_and_the_original_object_sees_them() -> None:
    ds = Dataset()
    with Recorder(ds, io.BytesIO()) as rec:
        rec.graph.add((S, P, Literal(1), G))
    assert (S, P, Literal(1), G) in set(ds.quads((None, None, None, None)))


# -- patches, transactions, chains -----------------------------------------------------


def test_transactions_are_chained_patches_with_headers() -> None:
    rec, out = recorded(headers={"app": "test"})
    g = rec.graph
    with rec.transaction(user=Literal("ann")):
        g.add((S, P, Literal(1)))
    with rec.transaction():
        g.add((S, P, Literal(2)))
    with rec.transaction():
        pass  # nothing changed: no patch
    rec.close()
    ps = patches(log_events(out.getvalue()))
    assert len(ps) == 2
    ids = [next(e.value for e in p if type(e) is Header and e.key == "id") for p in ps]
    assert all(str(i).startswith("urn:uuid:") for i in ids) and ids[0] != ids[1]
    assert Header("prev", ids[0]) in ps[1]
    assert not any(type(e) is Header and e.key == "prev" for e in ps[0])
    assert Header("user", Literal("ann")) in ps[0] and Header("app", Literal("test")) in ps[1]
    assert [type(e) for e in ps[0] if type(e) is not Header] == [TxStart, Add, TxCommit]
    assert rec.head == str(ids[1])


def test_a_raising_block_writes_ta_and_rolls_the_store_back() -> None:
    rec, out = recorded()
    g = rec.graph
    g.add((S, P, Literal(1)))
    g.bind("ex", URIRef(EX))
    rec.flush()
    before = state(g)
    with pytest.raises(RuntimeError), rec.transaction():
        g.remove((S, None, None))
        g.add((S2, P, Literal(2), G))
        g.bind("ex", URIRef("http://other/"))
        g.bind("new", URIRef("http://new/"))
        raise RuntimeError("boom")
    assert state(g) == before
    rec.close()
    events = log_events(out.getvalue())
    last = patches(events)[-1]
    assert type(last[-1]) is TxAbort
    assert state(replay(events)) == before


def test_autocommit_policy_and_flush() -> None:
    rec, out = recorded(autocommit=2)
    g = rec.graph
    for i in range(5):
        g.add((S, P, Literal(i)))
    assert len(patches(log_events(out.getvalue()))) == 2  # the fifth change is still pending
    rec.flush()
    assert len(patches(log_events(out.getvalue()))) == 3
    rec.close()


def test_pending_changes_are_committed_before_a_transaction() -> None:
    rec, out = recorded()
    rec.graph.add((S, P, Literal(0)))
    with rec.transaction():
        rec.graph.add((S, P, Literal(1)))
    rec.close()
    assert [len([e for e in p if type(e) is Add]) for p in patches(log_events(out.getvalue()))] == [1, 1]


def test_misuse_is_a_usage_error() -> None:
    rec, _ = recorded()
    with rec.transaction():
        with pytest.raises(UsageError, match="do not nest"), rec.transaction():
            pass
        with pytest.raises(UsageError):
            rec.flush()
    rec.close()
    with pytest.raises(UsageError, match="closed"):
        rec.graph.add((S, P, Literal(1)))
    with pytest.raises(UsageError):
        Recorder(Dataset(), io.BytesIO(), autocommit=0)


def test_uncommitted_changes_are_not_in_the_log() -> None:
    rec, out = recorded()
    rec.graph.add((S, P, Literal(1)))
    assert out.getvalue() == b""
    with rec.transaction():
        rec.graph.add((S, P, Literal(2)))
        assert out.getvalue()[len(out.getvalue()) :] == b""  # nothing written mid-block
        written = len(out.getvalue())
    assert len(out.getvalue()) > written
    rec.close()


# -- log files ------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ["jellyp", "rdfp"])
def test_appending_to_a_log_continues_its_chain(tmp_path: Path, ext: str) -> None:
    log = tmp_path / f"log.{ext}"
    ds = Dataset()
    with Recorder(ds, log) as rec:
        with rec.transaction():
            rec.graph.add((S, P, Literal(1)))
        first = rec.head
    with Recorder(ds, log) as rec:
        assert rec.head == first
        with rec.transaction():
            rec.graph.add((S, P, Literal(2)))
    ps = patches(read_events(log))
    assert len(ps) == 2 and Header("prev", URIRef(first or "")) in ps[1]
    assert state(replay(read_events(log)))[0] == state(ds)[0]


@pytest.mark.parametrize("ext", ["jellyp", "rdfp"])
def test_a_second_recorder_on_the_same_log_is_refused(tmp_path: Path, ext: str) -> None:
    log = tmp_path / f"log.{ext}"
    with Recorder(Dataset(), log), pytest.raises(UsageError, match="lock"):
        Recorder(Dataset(), log)


@pytest.mark.parametrize("ext", ["jellyp", "rdfp"])
def test_a_crash_between_patches_leaves_the_committed_patches(tmp_path: Path, ext: str) -> None:
    log = tmp_path / f"log.{ext}"
    rec = Recorder(Dataset(), log)
    with rec.transaction():
        rec.graph.add((S, P, Literal(1)))
    rec.graph.add((S, P, Literal(2)))  # pending, never committed: the process "dies" here
    committed = log.read_bytes()
    # The process dies: its descriptor (and lock) go away without finishing the stream.
    raw = rec.log._appender._file if rec.log._appender is not None else rec.log._text_file
    assert raw is not None
    raw.close()
    assert log.read_bytes() == committed
    ps = patches(read_events(log))
    assert len(ps) == 1 and Add(S, P, Literal(1), DG if ext == "jellyp" else None) in ps[0]
    # A torn write of the next patch is cut off by the next writer.
    with log.open("ab") as f:
        f.write(b"\x05\x0a" if ext == "jellyp" else b"H id <urn:x> .\nTX .\nA <http://x> ")
    with Recorder(Dataset(), log) as again:
        assert again.head is not None
        again.graph.add((S, P, Literal(3)))
    assert len(patches(read_events(log))) == 2


@pytest.mark.parametrize(
    "torn",
    [b"H id <urn:x> .\n", b"H id <urn:x> .\nTX .\nA <http://x> <http://p> <http://o> .\n", b"TX .\nA <http://x> "],
)
def test_a_torn_text_patch_is_cut_but_a_whole_one_without_z_is_kept(tmp_path: Path, torn: bytes) -> None:
    # RDF Patch text (https://afs.github.io/rdf-delta/rdf-patch.html, "Transactions") does
    # not end patches with "Z ."; a log written by another tool may hold one patch and no Z.
    log = tmp_path / "log.rdfp"
    whole = (
        b"H id <urn:uuid:0b2c5d0e-1f1a-4d5e-9a40-6c4f0a1d2e3f> .\nTX .\nA <http://s> <http://p> <http://o> .\nTC .\n"
    )
    log.write_bytes(whole)
    with Recorder(Dataset(), log) as rec:
        assert rec.head == "urn:uuid:0b2c5d0e-1f1a-4d5e-9a40-6c4f0a1d2e3f"
        rec.graph.add((S, P, Literal(1)))
    ps = patches(read_events(log))
    assert len(ps) == 2 and log.read_bytes().startswith(whole)
    assert Add(URIRef("http://s"), URIRef("http://p"), URIRef("http://o"), None) in ps[0]
    # A write cut short after the last "Z ." is cut off instead: an open transaction, a
    # patch of headers alone, or a part of a line.
    before = log.read_bytes()
    with log.open("ab") as f:
        f.write(torn)
    with Recorder(Dataset(), log) as again:
        assert again.head is not None
    assert log.read_bytes() == before


def test_a_large_patch_reaches_the_file_only_at_commit(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    with Recorder(Dataset(), log) as rec:
        with rec.transaction():
            rec.graph.add((S, P, Literal(0)))
        size = log.stat().st_size
        with rec.transaction():
            for i in range(3000):  # several encoder frames
                rec.graph.add((S, P, Literal(i + 1)))
            assert log.stat().st_size == size  # a tailing reader sees nothing of it yet
        assert log.stat().st_size > size
    assert len(patches(read_events(log))) == 2


def test_fsync_is_called_on_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    with Recorder(Dataset(), tmp_path / "log.jellyp", fsync=True) as rec:
        with rec.transaction():
            rec.graph.add((S, P, Literal(1)))
        assert len(calls) == 1
    with Recorder(Dataset(), tmp_path / "log2.rdfp", fsync=True) as rec:
        with rec.transaction():
            rec.graph.add((S, P, Literal(1)))
        assert len(calls) == 2


@pytest.mark.parametrize("fmt", ["jellyp", "rdfp"])
def test_rotation_by_patch_count_keeps_one_chain(tmp_path: Path, fmt: str) -> None:
    ds = Dataset()
    with Recorder(ds, LogWriter(tmp_path, fmt=fmt, max_segment_patches=2)) as rec:
        for i in range(5):
            with rec.transaction():
                rec.graph.add((S, P, Literal(i)))
    # Reopening the directory appends to its newest segment.
    with Recorder(ds, LogWriter(tmp_path, fmt=fmt, max_segment_patches=2)) as rec, rec.transaction():
        rec.graph.add((S, P, Literal(5)))
    files = segment_files(tmp_path)
    assert [f.name for f in files] == [f"patch-{i:010d}.{fmt}" for i in range(1, 5)]
    events = [e for f in files for e in read_events(f)]
    ps = patches(events)
    assert len(ps) == 6
    ids = [next(e.value for e in p if type(e) is Header and e.key == "id") for p in ps]
    for before, p in zip(ids, ps[1:], strict=False):
        assert Header("prev", before) in p
    assert state(replay(events))[0] == state(ds)[0]


def test_rotation_by_size(tmp_path: Path) -> None:
    directory = tmp_path / "segments"  # created for a new segmented log
    with Recorder(Dataset(), directory, max_segment_bytes=200) as rec:
        for i in range(6):
            with rec.transaction():
                rec.graph.add((S, P, Literal("x" * 100 + str(i))))
    files = segment_files(directory)
    assert len(files) >= 3
    assert sum(len(patches(read_events(f))) for f in files) == 6


def test_rotation_needs_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="directory"):
        Recorder(Dataset(), tmp_path / "log.jellyp", max_segment_patches=1)


def test_unbind_prefix_on_a_store_without_support_is_a_usage_error() -> None:
    class Other(Memory):
        pass

    unbind_prefix(Other(), "x")  # Memory subclasses are fine
    from rdflib.store import Store

    with pytest.raises(UsageError):
        unbind_prefix(Store(), "x")


@pytest.mark.parametrize("in_tx", [False, True])
def test_a_change_the_log_cannot_hold_is_undone_and_stops_the_recorder(tmp_path: Path, in_tx: bool) -> None:
    from patchsync import EncodeError

    log = tmp_path / "log.jellyp"
    rec = Recorder(Dataset(), log)
    g = rec.graph
    with rec.transaction():
        g.add((S, P, Literal(1)))
    committed = log.read_bytes()
    before = state(g)
    with pytest.raises(EncodeError, match="generalized"):
        if in_tx:
            with rec.transaction():
                g.add((S2, P, Literal(2)))
                g.add((Literal("subject"), P, Literal(3)))  # a literal subject: not RDF
        else:
            g.add((S2, P, Literal(2)))
            g.add((Literal("subject"), P, Literal(3)))
    # The whole open patch (the block, or the pending changes outside one) is undone:
    # the store holds exactly what the log says.
    assert state(g) == before
    with pytest.raises(UsageError, match="stopped after an error"):
        g.add((S, P, Literal(9)))
    rec.close()
    assert log.read_bytes() == committed  # nothing of the failed patch was written
    assert len(patches(read_events(log))) == 1


def test_an_rdflib_replica_through_the_applier_is_equivalent(tmp_path: Path) -> None:
    from patchsync.apply import apply_file
    from patchsync.apply.targets.rdflib_store import RdflibTarget

    log = tmp_path / "log.jellyp"
    with Recorder(Dataset(), log) as rec:
        ds = rec.graph
        with rec.transaction():
            ds.bind("ex", URIRef(EX))
            ds.bind("tmp", URIRef("http://tmp/"))
            ds.graph(G).add((S, P, BNode("n1")))
            ds.add((BNode("n1"), P2, Literal("01", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer"))))
        with rec.transaction():
            rec.unbind("tmp")
            ds.parse(data='<http://example.org/s2> <http://example.org/p> "é" .', format="nt")
    replica = Dataset()
    apply_file(log, RdflibTarget(replica))
    assert state(replica) == state(rec.graph)  # quads, labels, lexical forms, namespaces


@pytest.mark.parametrize("kind", ["simple-memory", "other-store"])
def test_stores_without_the_memory_fast_path(kind: str) -> None:
    from rdflib.plugins.stores.auditable import AuditableStore
    from rdflib.plugins.stores.memory import SimpleMemory

    graph: Graph = Graph(store=SimpleMemory()) if kind == "simple-memory" else Graph(store=AuditableStore(Memory()))
    out = io.BytesIO()
    rec = Recorder(graph, out)
    g = rec.graph
    g.add((S, P, Literal(1)))
    g.add((S, P, Literal(1)))  # present: not recorded
    g.add((S, P2, BNode("x")))
    g.remove((S, P, None))
    g.remove((S, P, None))  # absent: not recorded
    rec.close()
    events = log_events(out.getvalue())
    assert len([e for e in events if type(e) in (Add, Delete)]) == 3
    assert state(replay(events))[0] == state(g)[0]


def test_flat_streams_are_refused(tmp_path: Path) -> None:
    from patchsync import PatchOptions, StreamType

    flat = PatchOptions(stream_type=StreamType.FLAT)
    with pytest.raises(UsageError, match="patch boundaries"):
        Recorder(Dataset(), io.BytesIO(), options=flat)
    log = tmp_path / "flat.jellyp"
    from patchsync.logs.patch_logs import LogAppender

    with LogAppender(log, flat) as out:
        out.write([Add(S, P, Literal(1))])
    size = log.stat().st_size
    with pytest.raises(UsageError, match="FLAT"):
        Recorder(Dataset(), log)
    assert log.stat().st_size == size  # nothing appended
    Recorder(Dataset(), log.with_name("again.jellyp")).close()  # and the lock was released
    with LogAppender(log):
        pass


def test_a_committed_patch_leaves_no_rollback_state() -> None:
    # The rollback list and its context objects live only as long as the open patch: a
    # recorder running for days over many graphs must not keep one object per graph.
    rec = Recorder(Dataset(), io.BytesIO(), autocommit=10)
    ex = "http://example.org/"
    for i in range(25):
        rec.graph.add((URIRef(ex + "s"), URIRef(ex + "p"), Literal(i), URIRef(f"{ex}g{i}")))  # type: ignore[arg-type]
    state = rec._rec
    # Patches committed every 10 changes (rdflib's first-use namespace bindings count too):
    # only the open patch's graphs are held.
    assert 0 < len(state.contexts) < 10 and state.undo
    rec.flush()
    assert (state.contexts, state.undo) == ({}, [])
    with rec.transaction():
        rec.graph.add((URIRef(ex + "s"), URIRef(ex + "p"), Literal("t"), URIRef(ex + "g")))  # type: ignore[arg-type]
        assert len(state.contexts) == 1
    assert (state.contexts, state.undo) == ({}, [])
    rec.close()


def test_a_rolled_back_bind_leaves_a_store_rdflib_can_go_on_from() -> None:
    # rdflib's bind(override=False) of a prefix taken by another IRI maps that IRI to a
    # prefix bound elsewhere; the undo restores the bindings and leaves maps that agree,
    # so the same binds run again without rdflib's KeyError.
    ns1, ns2 = URIRef("http://ns1/"), URIRef("http://ns2/")
    rec = Recorder(Dataset(), io.BytesIO(), fmt="jellyp")
    before = dict(rec.graph.namespaces())
    binds = [("", ns1, True, True), ("", ns2, True, False), ("", ns2, False, True)]
    with pytest.raises(RuntimeError), rec.transaction():
        for prefix, ns, override, replace in binds:
            rec.graph.bind(prefix, ns, override=override, replace=replace)
        raise RuntimeError("abort")
    assert dict(rec.graph.namespaces()) == before
    for prefix, ns, override, replace in binds:
        rec.graph.bind(prefix, ns, override=override, replace=replace)
    assert dict(rec.graph.namespaces())[""] == ns1
