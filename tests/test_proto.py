"""The generated protobuf code is reproducible and the schemas are wire-identical to the spec."""

from __future__ import annotations

import filecmp
import importlib.util
import sys
from pathlib import Path

import pytest

from patchsync._proto import patch_pb2, rdf_pb2

ROOT = Path(__file__).resolve().parents[1]


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_proto"] = module
    spec.loader.exec_module(module)
    module.generate(tmp_path)
    committed = ROOT / "patchsync" / "_proto"
    for produced in sorted(tmp_path.iterdir()):
        assert filecmp.cmp(produced, committed / produced.name, shallow=False), (
            f"{produced.name} is stale: run python scripts/gen_proto.py"
        )


# Field numbers from the Jelly-Patch spec, "Patch rows" and "Patch stream options".
PATCH_ROW_FIELDS = {
    "options": 1,
    "statement_add": 2,
    "statement_delete": 3,
    "namespace_add": 4,
    "namespace_delete": 5,
    "transaction_start": 6,
    "transaction_commit": 7,
    "transaction_abort": 8,
    "name": 11,
    "prefix": 12,
    "datatype": 13,
    "header": 14,
    "punctuation": 15,
}
PATCH_OPTION_FIELDS = {
    "statement_type": 1,
    "stream_type": 2,
    "generalized_statements": 3,
    "rdf_star": 4,
    "max_name_table_size": 9,
    "max_prefix_table_size": 10,
    "max_datatype_table_size": 11,
    "version": 15,
}


def fields(message: type) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_patch_schema_field_numbers() -> None:
    assert fields(patch_pb2.RdfPatchRow) == PATCH_ROW_FIELDS
    assert fields(patch_pb2.RdfPatchOptions) == PATCH_OPTION_FIELDS
    assert fields(patch_pb2.RdfPatchNamespace) == {
        "name": 1,
        "value": 2,
        "g_iri": 3,
        "g_bnode": 4,
        "g_default_graph": 5,
        "g_literal": 6,
    }
    assert fields(patch_pb2.RdfPatchHeader) == {"key": 1, "h_iri": 2, "h_bnode": 3, "h_literal": 4, "h_triple_term": 5}
    assert patch_pb2.RdfPatchFrame.DESCRIPTOR.full_name == "eu.ostrzyciel.jelly.core.proto.v1.patch.RdfPatchFrame"
    assert dict(patch_pb2.PatchStreamType.items()) == {
        "PATCH_STREAM_TYPE_UNSPECIFIED": 0,
        "PATCH_STREAM_TYPE_FRAME": 1,
        "PATCH_STREAM_TYPE_FLAT": 2,
        "PATCH_STREAM_TYPE_PUNCTUATED": 3,
    }


def test_rdf_schema_field_numbers() -> None:
    quad = fields(rdf_pb2.RdfQuad)
    assert quad["s_iri"] == 1 and quad["o_triple_term"] == 12
    assert quad["g_iri"] == 13 and quad["g_default_graph"] == 15 and quad["g_literal"] == 16
    assert fields(rdf_pb2.RdfIri) == {"prefix_id": 1, "name_id": 2}
    assert fields(rdf_pb2.RdfLiteral) == {"lex": 1, "langtag": 2, "datatype": 3}
    assert fields(rdf_pb2.RdfStreamRow)["namespace"] == 6
    assert fields(rdf_pb2.RdfStreamOptions)["logical_type"] == 14
    assert rdf_pb2.RdfStreamFrame.DESCRIPTOR.full_name == "eu.ostrzyciel.jelly.core.proto.v1.RdfStreamFrame"


# Field numbers of Apache Jena's binary-rdf.proto as printed in specs/rdf-binary-jena.txt
# ("Protobuf encoding of RDF Terms"); proto/jena_rdf.proto must match them exactly.
JENA_FIELDS = {
    "RDF_IRI": {"iri": 1},
    "RDF_PrefixName": {"prefix": 1, "localName": 2},
    "RDF_BNode": {"label": 1},
    "RDF_Literal": {"lex": 1, "simple": 9, "langtag": 2, "datatype": 3, "dtPrefix": 4},
    "RDF_Decimal": {"value": 1, "scale": 2},
    "RDF_Var": {"name": 1},
    "RDF_ANY": {},
    "RDF_UNDEF": {},
    "RDF_REPEAT": {},
    "RDF_Term": {
        "iri": 1,
        "bnode": 2,
        "literal": 3,
        "prefixName": 4,
        "variable": 5,
        "tripleTerm": 6,
        "any": 7,
        "undefined": 8,
        "repeat": 9,
        "valInteger": 20,
        "valDouble": 21,
        "valDecimal": 22,
    },
    "RDF_Triple": {"S": 1, "P": 2, "O": 3},
    "RDF_Quad": {"S": 1, "P": 2, "O": 3, "G": 4},
    "RDF_PrefixDecl": {"prefix": 1, "uri": 2},
    "RDF_StreamRow": {"prefixDecl": 1, "triple": 2, "quad": 3, "base": 4},
    "RDF_Stream": {"row": 1},
    "RDF_VarTuple": {"vars": 1},
    "RDF_DataTuple": {"row": 1},
    "RDF_Graph": {"triple": 1},
}


def test_jena_schema_field_numbers() -> None:
    from google.protobuf.descriptor import FieldDescriptor

    from patchsync._proto import jena_rdf_pb2

    messages = jena_rdf_pb2.DESCRIPTOR.message_types_by_name
    assert set(messages) == set(JENA_FIELDS)
    for name, expected in JENA_FIELDS.items():
        assert fields(getattr(jena_rdf_pb2, name)) == expected, name
    # The spec's scalar types fix the wire encoding: zigzag for sint, fixed64 for double.
    term = messages["RDF_Term"].fields_by_name
    assert term["valInteger"].type == FieldDescriptor.TYPE_SINT64
    assert term["valDouble"].type == FieldDescriptor.TYPE_DOUBLE
    decimal = messages["RDF_Decimal"].fields_by_name
    assert decimal["value"].type == FieldDescriptor.TYPE_SINT64 and decimal["scale"].type == FieldDescriptor.TYPE_SINT32
    # Oneofs as in the spec; the package keeps these messages apart from Jelly's.
    assert [f.name for f in messages["RDF_Literal"].oneofs_by_name["literalKind"].fields] == [
        "simple",
        "langtag",
        "datatype",
        "dtPrefix",
    ]
    assert len(messages["RDF_Term"].oneofs_by_name["term"].fields) == 12
    assert jena_rdf_pb2.RDF_StreamRow.DESCRIPTOR.full_name == "patchsync.jena_rdf.RDF_StreamRow"
