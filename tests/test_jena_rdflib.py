"""RDF Thrift and RDF Protobuf wherever RDF files go in: the rdflib plugins
``patchsync-rdf-thrift`` / ``patchsync-rdf-protobuf``, ``diff`` and ``inspect``.

The expectations are Jena's: every file in ``tests/data/upstream/jena/written`` was written
by Apache Jena 4.5.0, and the ``.nq`` next to it is what Jena read back from it (see that
folder's README). Format: <https://jena.apache.org/documentation/io/rdf-binary.html> (RDF_StreamRow: prefix,
triple and quad rows; a quad without a graph is in the default graph).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest
import rdflib
from rdflib import BNode, Dataset, Graph, Literal, URIRef
from rdflib.compare import isomorphic
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
from rdflib.parser import Parser
from rdflib.serializer import Serializer

from patchsync.errors import DecodeError, FormatError, UsageError
from patchsync.logs.rdf_labels import read_labelled
from patchsync.plugins.rdflib_binary import RDF_PROTOBUF_FORMAT, RDF_THRIFT_FORMAT

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = ROOT / "tests" / "data" / "upstream" / "jena" / "written"
FORMATS = {".rt": RDF_THRIFT_FORMAT, ".rpb": RDF_PROTOBUF_FORMAT}
# rdflib 7 reads neither RDF-star nor the generalized statements of terms.sse.
JENA_FILES = sorted(
    p
    for p in WRITTEN.iterdir()
    if p.suffix in FORMATS and "<<" not in Path(f"{p}.nq").read_text() and not p.name.startswith("terms.")
)


def _entry_points() -> dict[str, dict[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {kind: dict(project["entry-points"][f"rdf.plugins.{kind}"]) for kind in ("parser", "serializer")}


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    """The plugins as pyproject declares them (an install registers the same entry points;
    registering here keeps the test independent of which checkout is installed)."""
    for kind, base in (("parser", Parser), ("serializer", Serializer)):
        for name, target in _entry_points()[kind].items():
            module, _, attr = target.partition(":")
            cls = getattr(import_module(module), attr)
            rdflib.plugin.register(name, base, module, attr)
            assert issubclass(cls, base)


def test_entry_point_names_cannot_clash_with_rdflib_or_pyjelly() -> None:
    declared = _entry_points()
    for kind in ("parser", "serializer"):
        assert {RDF_THRIFT_FORMAT, RDF_PROTOBUF_FORMAT} <= set(declared[kind])
        assert all(name.startswith("patchsync-") for name in declared[kind])
    # rdflib's built-in names and pyjelly's (jelly, application/x-jelly-rdf) are unprefixed.
    builtin = {p.name for p in rdflib.plugin.plugins() if not p.name.startswith("patchsync-")}
    assert not builtin & {RDF_THRIFT_FORMAT, RDF_PROTOBUF_FORMAT}


def _jena_dataset(path: Path) -> Dataset:
    ds = Dataset()
    saved = rdflib.NORMALIZE_LITERALS
    rdflib.NORMALIZE_LITERALS = False  # compare lexical forms as Jena read them
    try:
        ds.parse(Path(f"{path}.nq"), format="nquads")
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    return ds


def _quads(ds: Dataset) -> set[tuple[object, ...]]:
    return {(s, p, o, g) for s, p, o, g in ds.quads((None, None, None, None))}


@pytest.mark.parametrize("path", JENA_FILES, ids=lambda p: p.name)
def test_parser_reads_what_jena_wrote_as_jena_read_it(path: Path) -> None:
    expected = _jena_dataset(path)
    assert _quads(expected), "the expectation is not empty"
    # Labels kept: the very quads Jena read back (its .nq keeps the file's labels; rdflib's
    # N-Quads parser renames blank nodes, so the .nq is read by patchsync's line reader).
    kept = Dataset()
    kept.parse(path, format=FORMATS[path.suffix], keep_bnode_labels=True)
    labelled = read_labelled(Path(f"{path}.nq")).quads
    assert _quads(kept) == {(s, p, o, DATASET_DEFAULT_GRAPH_ID if g is None else g) for s, p, o, g in labelled}
    # Default (fresh blank nodes per parse, like rdflib's parsers): the same graphs up to
    # blank node names (graphs named by a blank node are compared by their number).
    fresh = Dataset()
    fresh.parse(path, format=FORMATS[path.suffix])

    def names(ds: Dataset) -> list[str]:
        return sorted("_:" if isinstance(c.identifier, BNode) else str(c.identifier) for c in ds.graphs() if len(c))

    assert names(fresh) == names(expected)
    for context in expected.graphs():
        if not isinstance(context.identifier, BNode):
            assert isomorphic(fresh.graph(context.identifier), context), context.identifier


@pytest.mark.parametrize("fmt", [RDF_THRIFT_FORMAT, RDF_PROTOBUF_FORMAT])
def test_serializer_round_trips_a_graph_and_a_dataset(tmp_path: Path, fmt: str) -> None:
    ex = "http://example.org/"
    g = Graph()
    g.bind("ex", ex)
    g.add((URIRef(ex + "s"), URIRef(ex + "p"), Literal("v", lang="en")))
    g.add((URIRef(ex + "s"), URIRef(ex + "p"), BNode("b1")))
    g.add((BNode("b1"), URIRef(ex + "q"), Literal("01", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer"))))
    g.serialize(destination=str(tmp_path / "g.bin"), format=fmt, namespaces=True)
    back = Graph().parse(tmp_path / "g.bin", format=fmt)
    assert isomorphic(back, g)
    assert dict(back.namespaces())["ex"] == URIRef(ex)

    ds = Dataset()
    ds.add((URIRef(ex + "a"), URIRef(ex + "p"), URIRef(ex + "b")))
    ds.graph(URIRef(ex + "g")).add((URIRef(ex + "a"), URIRef(ex + "p"), BNode("x")))
    ds.serialize(destination=str(tmp_path / "d.bin"), format=fmt)
    again = Dataset().parse(tmp_path / "d.bin", format=fmt, keep_bnode_labels=True)
    assert _quads(again) == _quads(ds)
    # A quad in a named graph cannot go into a plain Graph (docs/design.md §5).
    with pytest.raises(UsageError, match="parse into a Dataset"):
        Graph().parse(tmp_path / "d.bin", format=fmt)


def test_serializer_output_is_what_patchsync_convert_reads(tmp_path: Path) -> None:
    """The plugin writes the same statements the codec reads (differential: two readers)."""
    path = next(p for p in JENA_FILES if p.name == "writer-rt-23.rt")
    ds = Dataset().parse(path, format=RDF_THRIFT_FORMAT, keep_bnode_labels=True)
    ds.serialize(destination=str(tmp_path / "out.rpb"), format=RDF_PROTOBUF_FORMAT)
    done = _cli("convert", "out.rpb", "out.nq", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "out.nq").read_text().splitlines()) == sorted(Path(f"{path}.nq").read_text().splitlines())


def test_parser_errors_are_decode_errors_naming_the_file(tmp_path: Path) -> None:
    data = (WRITTEN / "writer-rt-05.rt").read_bytes()
    (tmp_path / "cut.rt").write_bytes(data[: len(data) - 3])
    with pytest.raises(DecodeError, match=r"cut\.rt.*truncated row"):
        Graph().parse(tmp_path / "cut.rt", format=RDF_THRIFT_FORMAT)


# -- CLI: diff and inspect --------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], cwd=cwd, capture_output=True, text=True)


OLD = """\
<http://example.org/s> <http://example.org/p> _:b1 .
_:b1 <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .
_:b2 <http://example.org/p> "gone" .
"""
NEW = """\
<http://example.org/s> <http://example.org/p> _:b1 .
_:b1 <http://example.org/p> "01"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .
"""


@pytest.mark.parametrize(("old", "new"), [(".rt", ".rpb"), (".rpb", ".rt"), (".rt", ".nq")])
def test_diff_of_binary_files_keeps_labels_and_lexical_forms(tmp_path: Path, old: str, new: str) -> None:
    """The diff of the binary files is the diff of the N-Quads they were converted from
    (blank nodes by label: RDF Patch names blank nodes by label, docs/design.md §1)."""
    (tmp_path / "old.nq").write_text(OLD)
    (tmp_path / "new.nq").write_text(NEW)
    for name, suffix in (("old", old), ("new", new)):
        if suffix != ".nq":
            assert _cli("convert", f"{name}.nq", f"{name}{suffix}", cwd=tmp_path).returncode == 0
    done = _cli("diff", f"old{old}", f"new{new}", "-o", "bin.rdfp", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert _cli("diff", "old.nq", "new.nq", "-o", "text.rdfp", cwd=tmp_path).returncode == 0
    rows = [line for line in (tmp_path / "bin.rdfp").read_text().splitlines() if not line.startswith("H ")]
    assert rows == [line for line in (tmp_path / "text.rdfp").read_text().splitlines() if not line.startswith("H ")]
    # Rows in diff's order: by graph (the default graph first), then subject, predicate, object.
    assert rows == [
        "TX .",
        'D _:b2 <http://example.org/p> "gone" .',
        'D _:b1 <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .',
        'A _:b1 <http://example.org/p> "01"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .',
        "TC .",
        "Z .",
    ]
    # ...and applying it to the old file gives the new one.
    assert _cli("convert", f"old{old}", "state.nq", cwd=tmp_path).returncode == 0
    applied = _cli("apply", "--no-progress", "bin.rdfp", "--target", "file:state.nq", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert sorted((tmp_path / "state.nq").read_text().splitlines()) == sorted(NEW.splitlines())


def test_diff_of_a_broken_binary_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.nq").write_text(OLD)
    assert _cli("convert", "a.nq", "a.rpb", cwd=tmp_path).returncode == 0
    (tmp_path / "b.rpb").write_bytes((tmp_path / "a.rpb").read_bytes()[:-4])
    done = _cli("diff", "a.rpb", "b.rpb", "-o", "d.rdfp", cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "b.rpb" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "d.rdfp").exists()


@pytest.mark.parametrize("name", ["writer-rt-23.rt", "writer-rt-23.values.rpb", "stream-graph.rt"])
def test_inspect_counts_rows_prefixes_and_term_kinds(name: str) -> None:
    path = WRITTEN / name
    done = _cli("inspect", "--json", str(path), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    # Independent count: Jena's own reading of the file, through rdflib.
    expected = _jena_dataset(path)
    quads = list(expected.quads((None, None, None, None)))
    assert summary["statements"] == len(quads)
    assert summary["format"] == FORMATS[path.suffix].removeprefix("patchsync-")
    assert summary["bytes"] == path.stat().st_size
    assert summary["rows"].get("triple", 0) + summary["rows"].get("quad", 0) == len(quads)
    objects = summary["terms"]["o"]
    assert objects.get("bnode", 0) == sum(1 for q in quads if isinstance(q[2], BNode))
    literals = sum(v for k, v in objects.items() if k.startswith("literal"))
    assert literals == sum(1 for q in quads if isinstance(q[2], Literal))
    named = sum(1 for q in quads if q[3] not in (None, DATASET_DEFAULT_GRAPH_ID))
    assert sum(v for k, v in summary["terms"].get("g", {}).items() if k != "default_graph") == named
    text = _cli("inspect", str(path), cwd=ROOT)
    assert text.returncode == 0 and f"statements: {len(quads)}" in text.stdout


def test_inspect_lists_declared_prefixes(tmp_path: Path) -> None:
    (tmp_path / "in.ttl").write_text("@prefix ex: <http://example.org/> .\nex:s ex:p ex:o .\n")
    assert _cli("convert", "in.ttl", "out.rt", cwd=tmp_path).returncode == 0
    summary = json.loads(_cli("inspect", "--json", "out.rt", cwd=tmp_path).stdout)
    assert summary["prefixes"]["ex"] == "http://example.org/"
    assert summary["rows"]["prefix"] >= 1 and summary["rows"]["triple"] == 1


def test_read_rdf_quads_gives_the_same_quads_for_every_convert_format(tmp_path: Path) -> None:
    """``read_rdf_quads`` (the one reader by format, also for ``--base`` snapshots): the same
    statements, labels and lexical forms from N-Quads and from each binary format."""
    from patchsync.logs.rdf_files import read_rdf_quads

    (tmp_path / "in.nq").write_text(OLD)
    expected = sorted(read_rdf_quads(tmp_path / "in.nq").quads, key=str)
    assert len(expected) == 3 and {q[0] for q in expected} == {"<http://example.org/s>", "_:b1", "_:b2"}
    for suffix in (".rt", ".rpb", ".jelly"):
        assert _cli("convert", "in.nq", f"out{suffix}", cwd=tmp_path).returncode == 0
        assert sorted(read_rdf_quads(tmp_path / f"out{suffix}").quads, key=str) == expected, suffix
    # The format can be named when the extension does not tell it.
    (tmp_path / "snapshot.bin").write_bytes((tmp_path / "out.rt").read_bytes())
    assert sorted(read_rdf_quads(tmp_path / "snapshot.bin", "rdf-thrift").quads, key=str) == expected
    with pytest.raises(FormatError, match=r"snapshot\.bin"):
        read_rdf_quads(tmp_path / "snapshot.bin")
