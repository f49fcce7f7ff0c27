"""rdflib plugins (entry points ``patchsync-jelly`` and ``patchsync-jellyp``) and the CLI
for ``.jelly`` files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.plugin import Parser, Serializer, get

from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import DecodeError, UsageError
from patchsync.options import PatchOptions, StreamType
from patchsync.plugins.rdflib_formats import JellyParser, JellyPatchParser, JellySerializer

from .helpers import RDF_SUITE

ROOT = Path(__file__).resolve().parents[1]
FROM_JELLY = RDF_SUITE / "from_jelly"
EX = "http://example.org/"


def sample_dataset() -> Dataset:
    ds = Dataset()
    ds.add(
        (
            URIRef(EX + "s"),
            URIRef(EX + "p"),
            Literal("01", datatype=URIRef("http://www.w3.org/2001/XMLSchema#int"), normalize=False),
        )
    )
    ds.graph(URIRef(EX + "g")).add((BNode(), URIRef(EX + "p"), Literal("x", lang="en")))
    ds.graph(BNode()).add((URIRef(EX + "s"), URIRef(EX + "p"), URIRef(EX + "o")))
    return ds


def test_plugins_are_registered_under_names_pyjelly_does_not_use() -> None:
    assert get("patchsync-jelly", Parser) is JellyParser
    assert get("patchsync-jellyp", Parser) is JellyPatchParser
    assert get("patchsync-jelly", Serializer) is JellySerializer


def test_dataset_round_trips_through_the_plugins(tmp_path: Path) -> None:
    ds = sample_dataset()
    path = tmp_path / "d.jelly"
    ds.serialize(destination=str(path), format="patchsync-jelly")
    back = Dataset()
    back.parse(str(path), format="patchsync-jelly")
    assert len(back) == len(ds) == 3
    assert sorted(len(g) for g in back.graphs()) == sorted(len(g) for g in ds.graphs())
    literal = next(back.objects(URIRef(EX + "s"), URIRef(EX + "p")))
    assert str(literal) == "01"  # lexical form kept, not normalised


def test_each_parse_gives_blank_nodes_of_its_own(tmp_path: Path) -> None:
    # Jelly-RDF spec, "Blank nodes": labels are scoped to the stream. One label is one node
    # within a parse; parsing the same file twice into one graph must not merge the nodes
    # (as rdflib's own parsers behave), unless keep_bnode_labels asks for the labels.
    g = Graph()
    b = BNode()
    g.add((b, URIRef(EX + "p"), Literal(1)))
    g.add((b, URIRef(EX + "q"), Literal(2)))
    path = tmp_path / "b.jelly"
    g.serialize(destination=str(path), format="patchsync-jelly")
    back = Graph()
    back.parse(str(path), format="patchsync-jelly")
    assert len(set(back.subjects())) == 1 and len(back) == 2
    back.parse(str(path), format="patchsync-jelly")
    assert len(set(back.subjects())) == 2 and len(back) == 4
    kept = Graph()
    kept.parse(str(path), format="patchsync-jelly", keep_bnode_labels=True)
    kept.parse(str(path), format="patchsync-jelly", keep_bnode_labels=True)
    assert len(kept) == 2


def test_graph_round_trips_and_namespaces_are_optional(tmp_path: Path) -> None:
    g = Graph()
    g.bind("ex", EX)
    g.add((URIRef(EX + "s"), URIRef(EX + "p"), BNode()))
    path = tmp_path / "g.jelly"
    g.serialize(destination=str(path), format="patchsync-jelly", namespaces=True)
    back = Graph(bind_namespaces="none")
    back.parse(str(path), format="patchsync-jelly")
    assert back.isomorphic(g)
    assert ("ex", URIRef(EX)) in set(back.namespaces())


def test_named_graphs_do_not_go_into_a_single_graph(tmp_path: Path) -> None:
    # docs/design.md §5: QUADS into a single-graph target fail clearly if a quad names a graph.
    path = tmp_path / "d.jelly"
    sample_dataset().serialize(destination=str(path), format="patchsync-jelly")
    with pytest.raises(UsageError, match="Dataset"):
        Graph().parse(str(path), format="patchsync-jelly")


def test_rdf_star_is_refused_not_dropped() -> None:
    with pytest.raises(UsageError, match="RDF-star"):
        Dataset().parse(str(FROM_JELLY / "triples_rdf_star" / "pos_001" / "in.jelly"), format="patchsync-jelly")


def test_parser_reports_rule_and_position() -> None:
    with pytest.raises(DecodeError) as info:
        Dataset().parse(str(FROM_JELLY / "triples_rdf_1_1" / "neg_007" / "in.jelly"), format="patchsync-jelly")
    assert info.value.frame == 0 and info.value.row is not None and "in.jelly" in info.value.source


# -- the Jelly-Patch log parser ---------------------------------------------------------------

S, P = URIRef(EX + "s"), URIRef(EX + "p")


def node(n: str) -> URIRef:
    return URIRef(EX + n)


def test_patch_log_is_applied_unit_by_unit(tmp_path: Path) -> None:
    # docs/design.md §2: committed TX applied, TA dropped, rows outside TX are a unit ending at TX
    # or patch end, an incomplete unit at the end is never applied.
    enc: PatchEncoder[URIRef] = PatchEncoder(PatchOptions(stream_type=StreamType.PUNCTUATED))
    enc.add(S, P, node("a"))
    enc.tx_start()
    enc.add(S, P, node("b"), node("g"))
    enc.delete(S, P, node("a"))
    enc.tx_commit()
    enc.tx_start()
    enc.add(S, P, node("aborted"))
    enc.tx_abort()
    enc.add(S, P, node("c"))
    enc.end_patch()
    complete = enc.take()
    enc.add(S, P, node("incomplete"))
    enc._flush_frame()  # a writer that died before ending its patch
    path = tmp_path / "log.jellyp"
    path.write_bytes(complete + enc.take())
    ds = Dataset()
    with pytest.raises(DecodeError, match="ends inside a patch"):
        ds.parse(str(path), format="patchsync-jellyp")
    assert set(ds.quads((None, None, None, None))) == {
        (S, P, node("b"), node("g")),
        (S, P, node("c"), DATASET_DEFAULT_GRAPH_ID),
    }


def test_patch_log_blank_nodes_are_system_identifiers(tmp_path: Path) -> None:
    # docs/design.md §1: _:b1 is the same node in every patch and in the target.
    enc: PatchEncoder[object] = PatchEncoder(PatchOptions(stream_type=StreamType.FRAME))
    enc.add(BNode("b1"), P, node("x"))
    enc.end_patch()
    enc.delete(BNode("b1"), P, node("x"))
    enc.end_patch()
    enc.finish()
    path = tmp_path / "log.jellyp"
    path.write_bytes(enc.take())
    ds = Dataset()
    ds.parse(str(path), format="patchsync-jellyp")
    assert len(ds) == 0


# -- CLI -------------------------------------------------------------------------------------


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], capture_output=True, cwd=ROOT, timeout=120)


def test_cli_converts_jelly_to_text_and_back(tmp_path: Path) -> None:
    source = FROM_JELLY / "quads_rdf_star" / "pos_003" / "in.jelly"
    nq, back, trig = tmp_path / "a.nq", tmp_path / "b.jelly", tmp_path / "c.trig"
    assert run("convert", str(source), str(nq)).returncode == 0
    assert run("convert", str(nq), str(back)).returncode == 0
    again = tmp_path / "again.nq"
    assert run("convert", str(back), str(again)).returncode == 0
    assert again.read_text() == nq.read_text()  # RDF-star survives; labels kept exactly
    plain = FROM_JELLY / "quads_rdf_1_1" / "pos_003" / "in.jelly"
    assert run("convert", str(plain), str(trig)).returncode == 0
    ds = Dataset()
    ds.parse(str(trig), format="trig")
    assert len(list(ds.quads((None, None, None, None)))) == 3


def test_cli_inspect_jelly() -> None:
    proc = run("inspect", str(FROM_JELLY / "graphs_rdf_1_1" / "pos_010" / "in.jelly"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "GRAPHS" in out and "frames:     2" in out


def test_cli_errors_are_one_line() -> None:
    proc = run("inspect", str(FROM_JELLY / "triples_rdf_1_1" / "neg_007" / "in.jelly"))
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1 and "frame 0, row" in err
    proc = run("convert", str(FROM_JELLY / "triples_rdf_1_1" / "pos_001" / "in.jelly"), "x.rdfp")
    assert proc.returncode == 2 and "not from one kind to the other" in proc.stderr.decode()
