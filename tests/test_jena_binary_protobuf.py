"""RDF Protobuf: the hand-written reader and writer against the generated protobuf classes.

The reader parses the wire format itself; here the same bytes go through
``jena_rdf_pb2.RDF_StreamRow`` and a small independent converter, and both must give the
same statements. The writer's rows must be byte-identical to what the generated classes
serialize for the same messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal.decoder import _DecodeVarint  # type: ignore[attr-defined]

from patchsync._proto import jena_rdf_pb2 as pb
from patchsync.codec.jena import decode_bytes, encode_statements
from patchsync.codec.jena.terms import XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER, decimal_lex, java_double
from patchsync.codec.nquads import read_statements
from patchsync.events import Statement
from patchsync.terms.ntriples import NTriplesTerms

ROOT = Path(__file__).resolve().parent
JENA = ROOT / "data" / "upstream" / "jena" / "written"
JELLY_RDF = ROOT / "data" / "upstream" / "jelly-rdf"
DEFAULT_GRAPHS = {"<urn:x-arq:DefaultGraph>", "<urn:x-arq:DefaultGraphNode>"}


def generated_rows(data: bytes) -> list[Any]:
    rows = []
    pos = 0
    while pos < len(data):
        size, pos = _DecodeVarint(data, pos)
        rows.append(pb.RDF_StreamRow.FromString(data[pos : pos + size]))
        pos += size
    return rows


class Reference:
    """RDF_StreamRow messages to N-Triples strings, through the generated classes."""

    def __init__(self) -> None:
        self.adapter = NTriplesTerms()
        self.prefixes: dict[str, str] = {}

    def term(self, t: Any) -> str:
        a = self.adapter
        kind = t.WhichOneof("term")
        if kind == "iri":
            return a.iri(t.iri.iri)
        if kind == "bnode":
            return a.bnode(t.bnode.label)
        if kind == "prefixName":
            return a.iri(self.prefixes[t.prefixName.prefix] + t.prefixName.localName)
        if kind == "literal":
            lit = t.literal
            which = lit.WhichOneof("literalKind")
            if which == "langtag":
                return a.literal(lit.lex, lit.langtag)
            if which == "datatype":
                return a.literal(lit.lex, None, lit.datatype)
            if which == "dtPrefix":
                return a.literal(lit.lex, None, self.prefixes[lit.dtPrefix.prefix] + lit.dtPrefix.localName)
            return a.literal(lit.lex)
        if kind == "tripleTerm":
            tt = t.tripleTerm
            return a.triple(self.term(tt.S), self.term(tt.P), self.term(tt.O))
        if kind == "valInteger":
            return a.literal(str(t.valInteger), None, XSD_INTEGER)
        if kind == "valDouble":
            return a.literal(java_double(t.valDouble), None, XSD_DOUBLE)
        if kind == "valDecimal":
            return a.literal(decimal_lex(t.valDecimal.value, t.valDecimal.scale), None, XSD_DECIMAL)
        raise AssertionError(f"unexpected term {kind}")

    def statements(self, data: bytes) -> list[tuple[str, str, str, str | None]]:
        out = []
        for row in generated_rows(data):
            kind = row.WhichOneof("row")
            if kind == "prefixDecl":
                self.prefixes[row.prefixDecl.prefix] = row.prefixDecl.uri
            elif kind == "triple":
                t = row.triple
                out.append((self.term(t.S), self.term(t.P), self.term(t.O), None))
            elif kind == "quad":
                q = row.quad
                g = self.term(q.G) if q.HasField("G") else None
                out.append((self.term(q.S), self.term(q.P), self.term(q.O), None if g in DEFAULT_GRAPHS else g))
        return out


def ours(data: bytes) -> list[tuple[str, str, str, str | None]]:
    adapter = NTriplesTerms()
    default = adapter.default_graph()
    return [
        (e.s, e.p, e.o, None if e.g is None or e.g == default else e.g)
        for e in decode_bytes("rpb", data, adapter)
        if isinstance(e, Statement)
    ]


@pytest.mark.parametrize("path", sorted(JENA.glob("*.rpb")), ids=lambda p: p.name)
def test_jena_files_read_alike(path: Path) -> None:
    data = path.read_bytes()
    reference = Reference().statements(data)
    assert reference and ours(data) == reference


def test_our_files_read_alike_and_serialize_identically() -> None:
    adapter = NTriplesTerms()
    files = sorted(p for p in JELLY_RDF.rglob("*") if p.suffix in (".nq", ".nt"))
    for path in files:
        quads = read_statements(path.read_text(encoding="utf-8"), adapter)
        for values in (False, True):
            data = encode_statements("rpb", quads, adapter, namespaces=[("ex", "<http://example.org/>")], values=values)
            assert ours(data) == Reference().statements(data) == quads, path
            # Byte-identical: parsing and re-serializing each row with the generated code.
            assert (
                b"".join(_delimited(row.SerializeToString(deterministic=True)) for row in generated_rows(data)) == data
            )


def _delimited(body: bytes) -> bytes:
    from patchsync.codec.framing import encode_varint

    return encode_varint(len(body)) + body


def test_negative_zero_and_extreme_values_match_the_generated_encoding() -> None:
    adapter = NTriplesTerms()
    xsd = "http://www.w3.org/2001/XMLSchema#"
    objects = [
        f'"-9223372036854775808"^^<{xsd}integer>',
        f'"9223372036854775807"^^<{xsd}integer>',
        f'"0"^^<{xsd}integer>',
        f'"-0.0"^^<{xsd}double>',
        f'"0.0"^^<{xsd}double>',
        f'"-92233720368547758.08"^^<{xsd}decimal>',
        f'"0.0"^^<{xsd}decimal>',
    ]
    quads = [("<http://s>", "<http://p>", o, None) for o in objects]
    data = encode_statements("rpb", quads, adapter, values=True)
    rows = generated_rows(data)
    assert [r.triple.O.WhichOneof("term") for r in rows] == [
        "valInteger",
        "valInteger",
        "valInteger",
        "valDouble",
        "valDouble",
        "valDecimal",
        "valDecimal",
    ]
    assert ours(data) == Reference().statements(data) == quads
