"""The format registry (patchsync/formats.py) and the tables built from it."""

from __future__ import annotations

import pytest

from patchsync import formats
from patchsync.apply.targets.file import FILE_FORMATS
from patchsync.errors import FormatError
from patchsync.logs.patch_logs import PATCH_FORMATS, format_of
from patchsync.logs.rdf_files import RDF_FORMATS, rdf_format_of
from patchsync.logs.rdf_labels import LABELLED_FORMATS


def test_names_and_suffixes_are_unique() -> None:
    names = [f.name for f in formats.FORMATS]
    suffixes = [s for f in formats.FORMATS for s in f.suffixes]
    assert len(names) == len(set(names)) and len(suffixes) == len(set(suffixes))


def test_tables_of_the_readers_come_from_the_registry() -> None:
    assert PATCH_FORMATS == {".jellyp": "jellyp", ".rdfp": "rdfp"}
    assert RDF_FORMATS == {
        ".jelly": "jelly",
        ".nt": "nt",
        ".nq": "nq",
        ".ttl": "ttl",
        ".trig": "trig",
        ".rt": "rdf-thrift",
        ".rpb": "rdf-protobuf",
    }
    assert FILE_FORMATS == {".nt": "nt", ".nq": "nquads", ".ttl": "turtle", ".trig": "trig"}
    # The file target keeps labels of every format it reads (docs/design.md §1).
    assert LABELLED_FORMATS == FILE_FORMATS


@pytest.mark.parametrize(
    ("path", "given", "expected"),
    [("a.jellyp", None, "jellyp"), ("a.RDFP", None, "rdfp"), ("-", "jellyp", "jellyp"), ("a.bin", ".rdfp", "rdfp")],
)
def test_patch_format_by_suffix_or_name(path: str, given: str | None, expected: str) -> None:
    assert format_of(path, given) == expected


def test_unknown_patch_formats_name_the_known_ones() -> None:
    with pytest.raises(FormatError, match=r"README.md: cannot tell the format from the extension '.md'; use one of "
                       r"\.jellyp, \.rdfp or name the format"):  # fmt: skip
        format_of("README.md")
    with pytest.raises(FormatError, match=r"unknown patch format 'nq' \(expected one of: jellyp, rdfp\)"):
        format_of("x", "nq")


def test_rdf_formats_are_not_patch_formats() -> None:
    assert rdf_format_of("x.jellyp") is None and rdf_format_of("x.trig") == "trig"
    assert rdf_format_of("-", "jelly") == "jelly" and rdf_format_of("-", "jellyp") is None


def test_roles() -> None:
    assert formats.names(formats.DUMP) == ["jelly", "nt", "nq", "ttl", "trig", "rdf-thrift", "rdf-protobuf"]
    assert "n3" in formats.names(formats.DIFF_INPUT) and "n3" not in formats.names(formats.RDF_CONVERT)
    rdfxml = formats.by_suffix("onto.owl")
    assert rdfxml is not None and rdfxml.rdflib_name == "xml" and not rdfxml.keeps_labels


@pytest.mark.parametrize(("fmt", "refused"), [("nt", True), ("ttl", True), ("nq", False), ("trig", False)])
def test_dump_to_a_format_without_graphs_refuses_named_graphs(fmt: str, refused: bool) -> None:
    import io

    from patchsync import MemoryTarget
    from patchsync.apply.dump import write_dump
    from patchsync.apply.target import Checkpoint

    target = MemoryTarget()
    target.begin()
    target.add([("<http://e/s>", "<http://e/p>", "<http://e/o>", "<http://e/g>")])
    target.commit("log", Checkpoint(offset=0, frame=0, row=0), [])
    out = io.BytesIO()
    if refused:
        with pytest.raises(FormatError, match="named graph <http://e/g>; dump it as nq or trig"):
            write_dump(target, fmt, out)
    else:
        assert write_dump(target, fmt, out) == 1
