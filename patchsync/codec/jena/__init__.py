"""Apache Jena's RDF Binary formats: RDF Thrift (``.rt``) and RDF Protobuf (``.rpb``).

Sans-I/O like the Jelly codecs: a decoder is fed bytes and hands out
:class:`~patchsync.events.Statement` / :class:`~patchsync.events.Namespace` events, an
encoder takes statements and namespaces and returns bytes. <https://jena.apache.org/documentation/io/rdf-binary.html>
is the format description; :mod:`.terms` holds the semantics both formats share,
:mod:`.thrift` and :mod:`.protobuf` the two wire encodings.

The codecs below are looked up by format name or alias (:data:`FORMATS`). File suffixes
are not the codec's business: the one format registry, :mod:`patchsync.formats`, maps them
to these names.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from patchsync.errors import FormatError
from patchsync.events import Namespace, RdfEvent, Statement
from patchsync.options import Limits
from patchsync.terms import TermAdapter

if TYPE_CHECKING:
    from patchsync.codec.jena.protobuf import RdfProtobufDecoder, RdfProtobufEncoder
    from patchsync.codec.jena.stream import BinaryDecoder, BinaryEncoder
    from patchsync.codec.jena.thrift import RdfThriftDecoder, RdfThriftEncoder

# The codec modules load on first use: the registry below is read by every command that
# handles RDF files (format names, suffixes), and the two wire codecs cost more to import
# than such a command's whole start-up budget (tests/test_cli_startup.py pins it).
# (Written out rather than with patchsync._lazy: the codec imports only the layers below it.)
_LAZY = {
    "BinaryDecoder": "stream",
    "BinaryEncoder": "stream",
    "RdfProtobufDecoder": "protobuf",
    "RdfProtobufEncoder": "protobuf",
    "RdfThriftDecoder": "thrift",
    "RdfThriftEncoder": "thrift",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "FORMATS",
    "BinaryDecoder",
    "BinaryEncoder",
    "BinaryFormat",
    "RdfProtobufDecoder",
    "RdfProtobufEncoder",
    "RdfThriftDecoder",
    "RdfThriftEncoder",
    "decode_bytes",
    "encode_statements",
    "lookup",
    "read_dataset",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BinaryFormat:
    """One RDF Binary format: its names, suffix and codec classes (imported on first use)."""

    #: The name in :mod:`patchsync.formats`, which holds the format's suffixes.
    name: str
    alias: str
    #: The prefix of the format's two classes (``<codec>Decoder``, ``<codec>Encoder``),
    #: loaded through the package's lazy attributes above.
    codec: str
    #: Whether Jena's writer of this format uses prefixed names (Thrift yes, Protobuf no).
    jena_prefixed_names: bool

    @property
    def decoder(self) -> type[BinaryDecoder[Any]]:
        """The format's decoder class."""
        return cast("type[BinaryDecoder[Any]]", __getattr__(f"{self.codec}Decoder"))

    @property
    def encoder(self) -> type[BinaryEncoder[Any]]:
        """The format's encoder class."""
        return cast("type[BinaryEncoder[Any]]", __getattr__(f"{self.codec}Encoder"))


_THRIFT = BinaryFormat("rdf-thrift", "rt", "RdfThrift", True)
_PROTOBUF = BinaryFormat("rdf-protobuf", "rpb", "RdfProtobuf", False)

#: Formats by name and by alias.
FORMATS: dict[str, BinaryFormat] = {f.name: f for f in (_THRIFT, _PROTOBUF)} | {
    f.alias: f for f in (_THRIFT, _PROTOBUF)
}


def lookup(name: str) -> BinaryFormat:
    """The format called ``name`` (``rdf-thrift``/``rt``, ``rdf-protobuf``/``rpb``)."""
    found = FORMATS.get(name)
    if found is None:
        raise FormatError(f"unknown RDF Binary format {name!r} (known: {', '.join(sorted(FORMATS))})")
    return found


def decode_bytes(
    name: str,
    data: bytes,
    adapter: TermAdapter[T] | None = None,
    *,
    source: str = "<stream>",
    limits: Limits | None = None,
) -> Iterator[RdfEvent]:
    """Every event of a complete stream held in memory (raises ``DecodeError`` on bad input)."""
    decoder = lookup(name).decoder(adapter, source=source, limits=limits)
    decoder.feed(data)
    decoder.close()
    yield from decoder


def read_dataset(
    name: str,
    data: bytes,
    adapter: TermAdapter[T] | None = None,
    *,
    source: str = "<stream>",
    limits: Limits | None = None,
) -> tuple[list[tuple[T, T, T, T | None]], list[tuple[str, T]]]:
    """A whole stream as ``(statements, namespaces)``; a statement's ``g`` is ``None`` for
    the default graph (a triple row, a quad without G, or a quad in Jena's default graph).
    """
    decoder = lookup(name).decoder(adapter, source=source, limits=limits)
    decoder.feed(data)
    decoder.close()
    default = decoder.terms.default_graph
    statements: list[tuple[T, T, T, T | None]] = []
    namespaces: list[tuple[str, T]] = []
    for event in decoder:
        if isinstance(event, Statement):
            g = event.g
            statements.append((event.s, event.p, event.o, None if g is None or g == default else g))
        elif isinstance(event, Namespace):
            namespaces.append((event.name, event.iri))
    return statements, namespaces


def encode_statements(
    name: str,
    statements: Iterable[tuple[T, T, T, T | None]],
    adapter: TermAdapter[T] | None = None,
    *,
    namespaces: Iterable[tuple[str, T]] = (),
    **options: Any,
) -> bytes:
    """A whole stream: prefix rows for ``namespaces``, then ``statements`` ``(s, p, o, g)``.

    ``options`` go to the encoder (``prefixed_names``, ``values``, ``repeat``).
    """
    from patchsync.codec.jena.stream import encode_all

    encoder = lookup(name).encoder(adapter, **options)
    return encode_all(encoder, statements, namespaces)
