from . import rdf_pb2 as _rdf_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PatchStatementType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PATCH_STATEMENT_TYPE_UNSPECIFIED: _ClassVar[PatchStatementType]
    PATCH_STATEMENT_TYPE_TRIPLES: _ClassVar[PatchStatementType]
    PATCH_STATEMENT_TYPE_QUADS: _ClassVar[PatchStatementType]

class PatchStreamType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PATCH_STREAM_TYPE_UNSPECIFIED: _ClassVar[PatchStreamType]
    PATCH_STREAM_TYPE_FRAME: _ClassVar[PatchStreamType]
    PATCH_STREAM_TYPE_FLAT: _ClassVar[PatchStreamType]
    PATCH_STREAM_TYPE_PUNCTUATED: _ClassVar[PatchStreamType]
PATCH_STATEMENT_TYPE_UNSPECIFIED: PatchStatementType
PATCH_STATEMENT_TYPE_TRIPLES: PatchStatementType
PATCH_STATEMENT_TYPE_QUADS: PatchStatementType
PATCH_STREAM_TYPE_UNSPECIFIED: PatchStreamType
PATCH_STREAM_TYPE_FRAME: PatchStreamType
PATCH_STREAM_TYPE_FLAT: PatchStreamType
PATCH_STREAM_TYPE_PUNCTUATED: PatchStreamType

class RdfPatchTransactionStart(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RdfPatchTransactionCommit(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RdfPatchTransactionAbort(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RdfPatchNamespace(_message.Message):
    __slots__ = ("name", "value", "g_iri", "g_bnode", "g_default_graph", "g_literal")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    G_IRI_FIELD_NUMBER: _ClassVar[int]
    G_BNODE_FIELD_NUMBER: _ClassVar[int]
    G_DEFAULT_GRAPH_FIELD_NUMBER: _ClassVar[int]
    G_LITERAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _rdf_pb2.RdfIri
    g_iri: _rdf_pb2.RdfIri
    g_bnode: str
    g_default_graph: _rdf_pb2.RdfDefaultGraph
    g_literal: _rdf_pb2.RdfLiteral
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_rdf_pb2.RdfIri, _Mapping]] = ..., g_iri: _Optional[_Union[_rdf_pb2.RdfIri, _Mapping]] = ..., g_bnode: _Optional[str] = ..., g_default_graph: _Optional[_Union[_rdf_pb2.RdfDefaultGraph, _Mapping]] = ..., g_literal: _Optional[_Union[_rdf_pb2.RdfLiteral, _Mapping]] = ...) -> None: ...

class RdfPatchHeader(_message.Message):
    __slots__ = ("key", "h_iri", "h_bnode", "h_literal", "h_triple_term")
    KEY_FIELD_NUMBER: _ClassVar[int]
    H_IRI_FIELD_NUMBER: _ClassVar[int]
    H_BNODE_FIELD_NUMBER: _ClassVar[int]
    H_LITERAL_FIELD_NUMBER: _ClassVar[int]
    H_TRIPLE_TERM_FIELD_NUMBER: _ClassVar[int]
    key: str
    h_iri: _rdf_pb2.RdfIri
    h_bnode: str
    h_literal: _rdf_pb2.RdfLiteral
    h_triple_term: _rdf_pb2.RdfTriple
    def __init__(self, key: _Optional[str] = ..., h_iri: _Optional[_Union[_rdf_pb2.RdfIri, _Mapping]] = ..., h_bnode: _Optional[str] = ..., h_literal: _Optional[_Union[_rdf_pb2.RdfLiteral, _Mapping]] = ..., h_triple_term: _Optional[_Union[_rdf_pb2.RdfTriple, _Mapping]] = ...) -> None: ...

class RdfPatchPunctuation(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RdfPatchOptions(_message.Message):
    __slots__ = ("statement_type", "stream_type", "generalized_statements", "rdf_star", "max_name_table_size", "max_prefix_table_size", "max_datatype_table_size", "version")
    STATEMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    STREAM_TYPE_FIELD_NUMBER: _ClassVar[int]
    GENERALIZED_STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    RDF_STAR_FIELD_NUMBER: _ClassVar[int]
    MAX_NAME_TABLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_PREFIX_TABLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_DATATYPE_TABLE_SIZE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    statement_type: PatchStatementType
    stream_type: PatchStreamType
    generalized_statements: bool
    rdf_star: bool
    max_name_table_size: int
    max_prefix_table_size: int
    max_datatype_table_size: int
    version: int
    def __init__(self, statement_type: _Optional[_Union[PatchStatementType, str]] = ..., stream_type: _Optional[_Union[PatchStreamType, str]] = ..., generalized_statements: _Optional[bool] = ..., rdf_star: _Optional[bool] = ..., max_name_table_size: _Optional[int] = ..., max_prefix_table_size: _Optional[int] = ..., max_datatype_table_size: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class RdfPatchRow(_message.Message):
    __slots__ = ("options", "statement_add", "statement_delete", "namespace_add", "namespace_delete", "transaction_start", "transaction_commit", "transaction_abort", "name", "prefix", "datatype", "header", "punctuation")
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    STATEMENT_ADD_FIELD_NUMBER: _ClassVar[int]
    STATEMENT_DELETE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_ADD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_DELETE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_START_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_COMMIT_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_ABORT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    PUNCTUATION_FIELD_NUMBER: _ClassVar[int]
    options: RdfPatchOptions
    statement_add: _rdf_pb2.RdfQuad
    statement_delete: _rdf_pb2.RdfQuad
    namespace_add: RdfPatchNamespace
    namespace_delete: RdfPatchNamespace
    transaction_start: RdfPatchTransactionStart
    transaction_commit: RdfPatchTransactionCommit
    transaction_abort: RdfPatchTransactionAbort
    name: _rdf_pb2.RdfNameEntry
    prefix: _rdf_pb2.RdfPrefixEntry
    datatype: _rdf_pb2.RdfDatatypeEntry
    header: RdfPatchHeader
    punctuation: RdfPatchPunctuation
    def __init__(self, options: _Optional[_Union[RdfPatchOptions, _Mapping]] = ..., statement_add: _Optional[_Union[_rdf_pb2.RdfQuad, _Mapping]] = ..., statement_delete: _Optional[_Union[_rdf_pb2.RdfQuad, _Mapping]] = ..., namespace_add: _Optional[_Union[RdfPatchNamespace, _Mapping]] = ..., namespace_delete: _Optional[_Union[RdfPatchNamespace, _Mapping]] = ..., transaction_start: _Optional[_Union[RdfPatchTransactionStart, _Mapping]] = ..., transaction_commit: _Optional[_Union[RdfPatchTransactionCommit, _Mapping]] = ..., transaction_abort: _Optional[_Union[RdfPatchTransactionAbort, _Mapping]] = ..., name: _Optional[_Union[_rdf_pb2.RdfNameEntry, _Mapping]] = ..., prefix: _Optional[_Union[_rdf_pb2.RdfPrefixEntry, _Mapping]] = ..., datatype: _Optional[_Union[_rdf_pb2.RdfDatatypeEntry, _Mapping]] = ..., header: _Optional[_Union[RdfPatchHeader, _Mapping]] = ..., punctuation: _Optional[_Union[RdfPatchPunctuation, _Mapping]] = ...) -> None: ...

class RdfPatchFrame(_message.Message):
    __slots__ = ("rows",)
    ROWS_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedCompositeFieldContainer[RdfPatchRow]
    def __init__(self, rows: _Optional[_Iterable[_Union[RdfPatchRow, _Mapping]]] = ...) -> None: ...
