"""Turtle and TriG through the one reader and writer of RDF files (``read_rdf_quads``, ``convert``).

docs/design.md §1, "blank node labels": labels are system identifiers, and the format registry
says TriG and Turtle keep them (``Format.keeps_labels``). So the same data read as N-Quads
and as TriG (written by ``convert``) must give the same N-Triples strings, labels and
lexical forms included; this is what lets a TriG file be a ``--base`` like an N-Quads one.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from patchsync.logs.rdf_files import convert_rdf, read_rdf_bytes, read_rdf_quads

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
#: Blank nodes in every position, escapes, a lexical form rdflib would normalize, a language tag.
QUADS = [
    ("_:s1", f"<{EX}p>", f'"01"^^<{XSD}integer>', None),
    ("_:s1", f"<{EX}p>", "_:o1", f"<{EX}g>"),
    (f"<{EX}s>", f"<{EX}p>", '"tab\\t\\"q\\"\\nü\\\\"', "_:g9"),
    (f"<{EX}s>", f"<{EX}p>", '"chat"@fr-BE', "_:g9"),
    ("_:o1", f"<{EX}p>", f"<{EX}o>", None),
]


def nquads(quads: list[tuple[str, str, str, str | None]]) -> str:
    return "".join(f"{s} {p} {o} {g} .\n" if g else f"{s} {p} {o} .\n" for s, p, o, g in quads)


NQ = nquads(QUADS)


def test_trig_and_turtle_keep_labels_and_lexical_forms(tmp_path: Path) -> None:
    assert sorted(read_rdf_bytes(NQ.encode(), "nq").quads) == sorted(QUADS)
    for fmt, quads in (("trig", QUADS), ("ttl", [q for q in QUADS if q[3] is None])):
        out = io.BytesIO()
        convert_rdf(nquads(quads).encode(), "nq", out, fmt)
        path = tmp_path / f"data.{fmt}"
        path.write_bytes(out.getvalue())
        assert sorted(read_rdf_quads(path).quads) == sorted(quads), fmt


def test_only_the_declared_prefixes_are_read() -> None:
    text = f"@prefix ex: <{EX}> .\nex:a ex:b [ ex:c _:z ] .\n"
    content = read_rdf_bytes(text.encode(), "ttl", source="a.ttl")
    assert content.namespaces == [("ex", EX)]
    # A blank node without a label gets anon<n> by document order, as the file target reads it.
    assert sorted(content.quads) == [
        (f"<{EX}a>", f"<{EX}b>", "_:anon1", None),
        ("_:anon1", f"<{EX}c>", "_:z", None),
    ]


def test_cli_convert_trig_round_trip_keeps_labels(tmp_path: Path) -> None:
    (tmp_path / "a.nq").write_text(NQ)
    for src, dst in (("a.nq", "b.trig"), ("b.trig", "c.nq")):
        done = subprocess.run(
            [sys.executable, "-m", "patchsync", "convert", src, dst], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "c.nq").read_text().splitlines()) == sorted(NQ.splitlines())
