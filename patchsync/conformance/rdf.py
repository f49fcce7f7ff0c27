"""Runners for the upstream Jelly-RDF conformance suite (``jellyt:TestRdfFromJelly`` and
``jellyt:TestRdfToJelly``), plugged into :data:`patchsync.conformance.runner.RUNNERS`.

Pass criteria (the suite's ``vocabulary.ttl``, vendored as
``tests/data/upstream/jelly-rdf/vocabulary.ttl``):

* From Jelly, positive: the stream decodes, and frame *i* is equal under ordered RDF
  dataset isomorphism to the *i*-th ``mf:result`` file: the same statements in the same
  order, with one blank node bijection per frame (frames are RDF Messages, and blank node
  labels are scoped to their message). Negative: decoding raises ``DecodeError``.
* To Jelly, positive: the encoder, given the options of the first ``mf:action`` file,
  writes one frame per input file; the output decodes with exactly the requested options
  and each frame is ordered-isomorphic to its input (and to the same frame of the expected
  ``mf:result`` stream). Negative: the options are refused or encoding raises
  ``EncodeError``.

Inputs and expected outputs are read with :func:`patchsync.codec.nquads.read_statements`,
since rdflib cannot read generalized or RDF-star N-Triples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError as ProtobufDecodeError

from patchsync._proto import rdf_pb2
from patchsync.codec.framing import Framer
from patchsync.codec.nquads import read_statements
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.conformance.runner import CaseFailed, TestCase
from patchsync.errors import DecodeError, EncodeError, UsageError
from patchsync.events import FrameEnd, PhysicalType, RdfOptions, Statement, StreamOptions
from patchsync.terms import BNODE, DEFAULT_GRAPH, LITERAL, TRIPLE, XSD_STRING
from patchsync.terms.ntriples import NTriplesTerms

__all__ = ["ordered_isomorphism_error", "run_rdf_from_jelly", "run_rdf_to_jelly"]

_ADAPTER = NTriplesTerms()
_DEFAULT = _ADAPTER.default_graph()

Quad = tuple[str, str, str, str | None]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CaseFailed(f"cannot read {path}: {exc}") from None


def _statements(path: Path) -> list[Quad]:
    try:
        text = _read(path).decode("utf-8")
        return read_statements(text, _ADAPTER, source=path.name)
    except (UnicodeDecodeError, DecodeError) as exc:
        raise CaseFailed(f"cannot read {path.name}: {exc}") from None


def decode_frames(data: bytes, source: str) -> tuple[RdfOptions | None, list[list[Quad]]]:
    """Options and the statements of each frame (default graph normalised to ``None``)."""
    decoder: RdfDecoder[str] = RdfDecoder(_ADAPTER, source=source)
    decoder.feed(data)
    decoder.close()
    options: RdfOptions | None = None
    frames: list[list[Quad]] = []
    current: list[Quad] = []
    for event in decoder:
        if type(event) is Statement:
            g = event.g
            current.append((event.s, event.p, event.o, None if g == _DEFAULT else g))
        elif type(event) is FrameEnd:
            frames.append(current)
            current = []
        elif type(event) is StreamOptions:
            options = event.options
    return options, frames


def _term_error(a: str | None, e: str | None, a2e: dict[str, str], e2a: dict[str, str]) -> bool:
    """Whether terms differ under the bijection being built (True = mismatch)."""
    if a is None or e is None:
        return a is not e
    if a == e and not a.startswith(("_", "<<", "<_", '"')):
        return False
    ua: Any = _ADAPTER.unpack(a)
    ue: Any = _ADAPTER.unpack(e)
    if ua[0] != ue[0]:
        return True
    if ua[0] == BNODE:
        mapped = a2e.setdefault(a, e)
        back = e2a.setdefault(e, a)
        return mapped != e or back != a
    if ua[0] == TRIPLE:
        return any(_term_error(x, y, a2e, e2a) for x, y in zip(ua[1:], ue[1:], strict=True))
    if ua[0] == DEFAULT_GRAPH:
        return False
    if ua[0] == LITERAL:
        # RDF 1.1: "x" and "x"^^xsd:string are the same literal.
        return (ua[1], ua[2], ua[3] or XSD_STRING) != (ue[1], ue[2], ue[3] or XSD_STRING)
    return a != e


def ordered_isomorphism_error(actual: list[Quad], expected: list[Quad]) -> str | None:
    """Why two statement lists are not ordered-isomorphic, or ``None`` if they are."""
    if len(actual) != len(expected):
        return f"{len(actual)} statements, expected {len(expected)}"
    a2e: dict[str, str] = {}
    e2a: dict[str, str] = {}
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        if any(_term_error(x, y, a2e, e2a) for x, y in zip(got, want, strict=True)):
            return f"statement {index}: got {' '.join(t for t in got if t)}, expected {' '.join(t for t in want if t)}"
    return None


def _compare_frames(actual: list[list[Quad]], expected: list[list[Quad]], names: list[str]) -> None:
    if len(actual) != len(expected):
        raise CaseFailed(f"{len(actual)} frames, expected {len(expected)}")
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        problem = ordered_isomorphism_error(got, want)
        if problem is not None:
            raise CaseFailed(f"frame {index} ({names[index]}): {problem}")


def run_rdf_from_jelly(case: TestCase) -> str:
    """``jellyt:TestRdfFromJelly``: decode ``mf:action``, compare frames with ``mf:result``."""
    if case.action_is_list or len(case.action) != 1:
        raise CaseFailed("mf:action of a from-Jelly case must be a single .jelly file")
    source = case.action[0]
    data = _read(source)
    if not case.positive:
        try:
            _, frames = decode_frames(data, source.name)
        except DecodeError as exc:
            return str(exc)
        raise CaseFailed(f"expected a DecodeError, but the stream decoded into {len(frames)} frames")
    if case.result is None:
        raise CaseFailed("a positive from-Jelly case needs mf:result")
    expected = [_statements(path) for path in case.result]
    try:
        options, frames = decode_frames(data, source.name)
    except DecodeError as exc:
        raise CaseFailed(f"decoding failed: {exc}") from None
    if options is None:
        raise CaseFailed("the stream holds no options row")
    _compare_frames(frames, expected, [p.name for p in case.result])
    return ""


def _requested_options(path: Path) -> RdfOptions:
    """The options row of an options file, read raw: the encoder must judge them itself."""
    framer = Framer(source=path.name)
    framer.feed(_read(path))
    framer.close()
    try:
        frame = framer.next_frame()
        if frame is None:
            raise CaseFailed(f"the options file {path.name} is empty")
        rows = rdf_pb2.RdfStreamFrame.FromString(frame[1]).rows
    except (DecodeError, ProtobufDecodeError) as exc:
        raise CaseFailed(f"the options file {path.name} does not decode: {exc}") from None
    if not rows or rows[0].WhichOneof("row") != "options":
        raise CaseFailed(f"the options file {path.name} does not start with an options row")
    msg = rows[0].options
    physical = msg.physical_type
    if physical not in (1, 2, 3):
        raise UsageError(f"physical_type {physical} is not TRIPLES, QUADS or GRAPHS")
    return RdfOptions(
        physical_type=PhysicalType(physical),
        logical_type=msg.logical_type,
        generalized_statements=msg.generalized_statements,
        rdf_star=msg.rdf_star,
        max_name_table_size=msg.max_name_table_size,
        max_prefix_table_size=msg.max_prefix_table_size,
        max_datatype_table_size=msg.max_datatype_table_size,
        stream_name=msg.stream_name,
        version=msg.version,
    )


def run_rdf_to_jelly(case: TestCase) -> str:
    """``jellyt:TestRdfToJelly``: encode the inputs with the requested options, decode back."""
    if not case.action_is_list or len(case.action) < 2:
        raise CaseFailed("mf:action of a to-Jelly case must be a list: an options file, then RDF inputs")
    inputs = [_statements(path) for path in case.action[1:]]
    try:
        options = _requested_options(case.action[0])
        encoder: RdfEncoder[str] = RdfEncoder(options, _ADAPTER)
        for statements in inputs:
            for s, p, o, g in statements:
                encoder.statement(s, p, o, g)
            encoder.end_frame()
        encoder.finish()
    except (EncodeError, UsageError) as exc:
        if case.positive:
            raise CaseFailed(f"encoding failed: {exc}") from None
        return str(exc)
    if not case.positive:
        raise CaseFailed("expected the options or the inputs to be refused, but they were encoded")
    data = encoder.take()
    names = [p.name for p in case.action[1:]]
    try:
        decoded_options, frames = decode_frames(data, "<encoder output>")
    except DecodeError as exc:
        raise CaseFailed(f"the encoder's output does not decode: {exc}") from None
    if decoded_options != options:
        raise CaseFailed(f"the encoder wrote options {decoded_options}, requested {options}")
    _compare_frames(frames, inputs, names)
    if case.result:
        try:
            _, reference = decode_frames(_read(case.result[0]), case.result[0].name)
        except DecodeError as exc:
            raise CaseFailed(f"the expected output {case.result[0].name} does not decode: {exc}") from None
        _compare_frames(frames, reference, [f"{case.result[0].name} frame {i}" for i in range(len(reference))])
    return ""
