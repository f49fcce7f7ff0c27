from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RDF_IRI(_message.Message):
    __slots__ = ("iri",)
    IRI_FIELD_NUMBER: _ClassVar[int]
    iri: str
    def __init__(self, iri: _Optional[str] = ...) -> None: ...

class RDF_PrefixName(_message.Message):
    __slots__ = ("prefix", "localName")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LOCALNAME_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    localName: str
    def __init__(self, prefix: _Optional[str] = ..., localName: _Optional[str] = ...) -> None: ...

class RDF_BNode(_message.Message):
    __slots__ = ("label",)
    LABEL_FIELD_NUMBER: _ClassVar[int]
    label: str
    def __init__(self, label: _Optional[str] = ...) -> None: ...

class RDF_Literal(_message.Message):
    __slots__ = ("lex", "simple", "langtag", "datatype", "dtPrefix")
    LEX_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_FIELD_NUMBER: _ClassVar[int]
    LANGTAG_FIELD_NUMBER: _ClassVar[int]
    DATATYPE_FIELD_NUMBER: _ClassVar[int]
    DTPREFIX_FIELD_NUMBER: _ClassVar[int]
    lex: str
    simple: bool
    langtag: str
    datatype: str
    dtPrefix: RDF_PrefixName
    def __init__(self, lex: _Optional[str] = ..., simple: _Optional[bool] = ..., langtag: _Optional[str] = ..., datatype: _Optional[str] = ..., dtPrefix: _Optional[_Union[RDF_PrefixName, _Mapping]] = ...) -> None: ...

class RDF_Decimal(_message.Message):
    __slots__ = ("value", "scale")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SCALE_FIELD_NUMBER: _ClassVar[int]
    value: int
    scale: int
    def __init__(self, value: _Optional[int] = ..., scale: _Optional[int] = ...) -> None: ...

class RDF_Var(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RDF_ANY(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RDF_UNDEF(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RDF_REPEAT(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RDF_Term(_message.Message):
    __slots__ = ("iri", "bnode", "literal", "prefixName", "variable", "tripleTerm", "any", "undefined", "repeat", "valInteger", "valDouble", "valDecimal")
    IRI_FIELD_NUMBER: _ClassVar[int]
    BNODE_FIELD_NUMBER: _ClassVar[int]
    LITERAL_FIELD_NUMBER: _ClassVar[int]
    PREFIXNAME_FIELD_NUMBER: _ClassVar[int]
    VARIABLE_FIELD_NUMBER: _ClassVar[int]
    TRIPLETERM_FIELD_NUMBER: _ClassVar[int]
    ANY_FIELD_NUMBER: _ClassVar[int]
    UNDEFINED_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    VALINTEGER_FIELD_NUMBER: _ClassVar[int]
    VALDOUBLE_FIELD_NUMBER: _ClassVar[int]
    VALDECIMAL_FIELD_NUMBER: _ClassVar[int]
    iri: RDF_IRI
    bnode: RDF_BNode
    literal: RDF_Literal
    prefixName: RDF_PrefixName
    variable: RDF_Var
    tripleTerm: RDF_Triple
    any: RDF_ANY
    undefined: RDF_UNDEF
    repeat: RDF_REPEAT
    valInteger: int
    valDouble: float
    valDecimal: RDF_Decimal
    def __init__(self, iri: _Optional[_Union[RDF_IRI, _Mapping]] = ..., bnode: _Optional[_Union[RDF_BNode, _Mapping]] = ..., literal: _Optional[_Union[RDF_Literal, _Mapping]] = ..., prefixName: _Optional[_Union[RDF_PrefixName, _Mapping]] = ..., variable: _Optional[_Union[RDF_Var, _Mapping]] = ..., tripleTerm: _Optional[_Union[RDF_Triple, _Mapping]] = ..., any: _Optional[_Union[RDF_ANY, _Mapping]] = ..., undefined: _Optional[_Union[RDF_UNDEF, _Mapping]] = ..., repeat: _Optional[_Union[RDF_REPEAT, _Mapping]] = ..., valInteger: _Optional[int] = ..., valDouble: _Optional[float] = ..., valDecimal: _Optional[_Union[RDF_Decimal, _Mapping]] = ...) -> None: ...

class RDF_Triple(_message.Message):
    __slots__ = ("S", "P", "O")
    S_FIELD_NUMBER: _ClassVar[int]
    P_FIELD_NUMBER: _ClassVar[int]
    O_FIELD_NUMBER: _ClassVar[int]
    S: RDF_Term
    P: RDF_Term
    O: RDF_Term
    def __init__(self, S: _Optional[_Union[RDF_Term, _Mapping]] = ..., P: _Optional[_Union[RDF_Term, _Mapping]] = ..., O: _Optional[_Union[RDF_Term, _Mapping]] = ...) -> None: ...

class RDF_Quad(_message.Message):
    __slots__ = ("S", "P", "O", "G")
    S_FIELD_NUMBER: _ClassVar[int]
    P_FIELD_NUMBER: _ClassVar[int]
    O_FIELD_NUMBER: _ClassVar[int]
    G_FIELD_NUMBER: _ClassVar[int]
    S: RDF_Term
    P: RDF_Term
    O: RDF_Term
    G: RDF_Term
    def __init__(self, S: _Optional[_Union[RDF_Term, _Mapping]] = ..., P: _Optional[_Union[RDF_Term, _Mapping]] = ..., O: _Optional[_Union[RDF_Term, _Mapping]] = ..., G: _Optional[_Union[RDF_Term, _Mapping]] = ...) -> None: ...

class RDF_PrefixDecl(_message.Message):
    __slots__ = ("prefix", "uri")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    uri: str
    def __init__(self, prefix: _Optional[str] = ..., uri: _Optional[str] = ...) -> None: ...

class RDF_StreamRow(_message.Message):
    __slots__ = ("prefixDecl", "triple", "quad", "base")
    PREFIXDECL_FIELD_NUMBER: _ClassVar[int]
    TRIPLE_FIELD_NUMBER: _ClassVar[int]
    QUAD_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    prefixDecl: RDF_PrefixDecl
    triple: RDF_Triple
    quad: RDF_Quad
    base: RDF_IRI
    def __init__(self, prefixDecl: _Optional[_Union[RDF_PrefixDecl, _Mapping]] = ..., triple: _Optional[_Union[RDF_Triple, _Mapping]] = ..., quad: _Optional[_Union[RDF_Quad, _Mapping]] = ..., base: _Optional[_Union[RDF_IRI, _Mapping]] = ...) -> None: ...

class RDF_Stream(_message.Message):
    __slots__ = ("row",)
    ROW_FIELD_NUMBER: _ClassVar[int]
    row: _containers.RepeatedCompositeFieldContainer[RDF_StreamRow]
    def __init__(self, row: _Optional[_Iterable[_Union[RDF_StreamRow, _Mapping]]] = ...) -> None: ...

class RDF_VarTuple(_message.Message):
    __slots__ = ("vars",)
    VARS_FIELD_NUMBER: _ClassVar[int]
    vars: _containers.RepeatedCompositeFieldContainer[RDF_Var]
    def __init__(self, vars: _Optional[_Iterable[_Union[RDF_Var, _Mapping]]] = ...) -> None: ...

class RDF_DataTuple(_message.Message):
    __slots__ = ("row",)
    ROW_FIELD_NUMBER: _ClassVar[int]
    row: _containers.RepeatedCompositeFieldContainer[RDF_Term]
    def __init__(self, row: _Optional[_Iterable[_Union[RDF_Term, _Mapping]]] = ...) -> None: ...

class RDF_Graph(_message.Message):
    __slots__ = ("triple",)
    TRIPLE_FIELD_NUMBER: _ClassVar[int]
    triple: _containers.RepeatedCompositeFieldContainer[RDF_Triple]
    def __init__(self, triple: _Optional[_Iterable[_Union[RDF_Triple, _Mapping]]] = ...) -> None: ...
