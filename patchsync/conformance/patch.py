"""Conformance runners for the Jelly-Patch suite: patch from Jelly and patch to Jelly.

The pass criteria are described in :mod:`patchsync.conformance.runner`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import read_rdfp, write_rdfp
from patchsync.conformance.runner import CaseFailed, TestCase
from patchsync.errors import DecodeError, EncodeError
from patchsync.events import Event, Options, PrefixDelete, TxAbort, TxCommit, TxStart, strip_position
from patchsync.options import PatchOptions, StreamType
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import ENDS_PATCH, UnitReader

_ADAPTER = NTriplesTerms()
_DEFAULT_GRAPH = _ADAPTER.default_graph()


def _content(event: Event) -> Event:
    """An event as compared across formats: no position, no default-graph term, no PD IRI."""
    event = strip_position(event)
    if isinstance(event, PrefixDelete) and event.iri is not None:
        event = event._replace(iri=None)
    g = getattr(event, "g", None)
    if g is not None and g == _DEFAULT_GRAPH:
        event = event._replace(g=None)  # type: ignore[call-arg]
    return event


def _split(events: Iterable[Event]) -> tuple[list[Options], list[list[Event]], list[Event]]:
    """Options events, complete patches, and content after the last patch end."""
    options: list[Options] = []
    patches: list[list[Event]] = []
    current: list[Event] = []
    reader = UnitReader(_ADAPTER)  # patch boundaries as every consumer reads them
    for event in events:
        mark = reader.read(event)
        if isinstance(event, Options):
            options.append(event)
        elif mark in ENDS_PATCH:
            patches.append(current)
            current = []
        else:
            current.append(_content(event))
    return options, patches, current


def _decode_jelly(data: bytes, source: str) -> list[Event]:
    decoder: PatchDecoder[str] = PatchDecoder(_ADAPTER, source=source)
    decoder.feed(data)
    decoder.close()
    return list(decoder)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CaseFailed(f"cannot read {path}: {exc}") from None


def _read_patch_text(path: Path, what: str) -> list[Event]:
    """The content rows of an RDF Patch text file that holds one patch."""
    try:
        events = read_rdfp(_read_bytes(path), _ADAPTER, source=str(path))
    except DecodeError as exc:
        raise CaseFailed(f"{what} {path.name} is not valid RDF Patch text: {exc}") from None
    _, patches, rest = _split(events)
    if rest:
        patches.append(rest)
    non_empty = [p for p in patches if p]
    if len(non_empty) > 1:
        raise CaseFailed(f"{what} {path.name} holds {len(non_empty)} patches (one file per patch)")
    return non_empty[0] if non_empty else []


_CONTROL_ROWS: dict[type, str] = {TxStart: "TX .", TxCommit: "TC .", TxAbort: "TA ."}


def _show(event: Event) -> str:
    """An event as an RDF Patch text row, for messages."""
    control = _CONTROL_ROWS.get(type(event))
    if control is not None:
        return control
    try:
        return write_rdfp([event], _ADAPTER, segments=False).strip()
    except Exception:
        return repr(event)


def _compare(actual: list[list[Event]], expected: list[list[Event]], files: Sequence[str]) -> None:
    if len(actual) != len(expected):
        raise CaseFailed(f"decoded {len(actual)} patches, expected {len(expected)}")
    for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
        where = f"patch {index} ({files[index]})" if index < len(files) else f"patch {index}"
        for row, (g, w) in enumerate(zip(got, want, strict=False)):
            if g != w:
                raise CaseFailed(f"{where}, row {row}: got {_show(g)}, expected {_show(w)}")
        if len(got) != len(want):
            extra = got[len(want)] if len(got) > len(want) else want[len(got)]
            side = "an extra row" if len(got) > len(want) else "a missing row"
            raise CaseFailed(
                f"{where}: {len(got)} rows decoded, {len(want)} expected; first difference is {side}: {_show(extra)}"
            )


# -- Jelly-Patch: from Jelly ---------------------------------------------------------------------


def run_patch_from_jelly(case: TestCase) -> str:
    """``jellyt:TestPatchFromJelly``: decode ``mf:action`` and compare with ``mf:result``."""
    if case.action_is_list or len(case.action) != 1:
        raise CaseFailed("mf:action of a from-Jelly case must be a single .jellyp file")
    source = case.action[0]
    data = _read_bytes(source)
    if not case.positive:
        try:
            events = _decode_jelly(data, source.name)
        except DecodeError as exc:
            return str(exc)
        _, patches, _ = _split(events)
        raise CaseFailed(f"expected a DecodeError, but the stream decoded into {len(patches)} patches")
    if case.result is None:
        raise CaseFailed("a positive from-Jelly case needs mf:result")
    expected = [_read_patch_text(path, "expected output") for path in case.result]
    try:
        events = _decode_jelly(data, source.name)
    except DecodeError as exc:
        raise CaseFailed(f"decoding failed: {exc}") from None
    options, patches, rest = _split(events)
    if not options:
        raise CaseFailed("the decoder reported no options")
    if rest:
        raise CaseFailed(f"{len(rest)} rows after the last patch end")
    _compare(patches, expected, [p.name for p in case.result])
    return ""


# -- Jelly-Patch: to Jelly -----------------------------------------------------------------------


def _requested_options(path: Path) -> PatchOptions:
    try:
        events = _decode_jelly(_read_bytes(path), path.name)
    except DecodeError as exc:
        raise CaseFailed(f"the options file {path.name} does not decode: {exc}") from None
    options, _, _ = _split(events)
    if not options:
        raise CaseFailed(f"the options file {path.name} holds no options row")
    return options[0].options


def run_patch_to_jelly(case: TestCase) -> str:
    """``jellyt:TestPatchToJelly``: encode the inputs with the requested options, decode back."""
    if not case.action_is_list or len(case.action) < 2:
        raise CaseFailed("mf:action of a to-Jelly case must be a list: an options file, then RDF Patch inputs")
    options = _requested_options(case.action[0])
    inputs = [_read_patch_text(path, "input") for path in case.action[1:]]
    encoder: PatchEncoder[str] = PatchEncoder(options, _ADAPTER)
    try:
        for patch in inputs:
            for event in patch:
                encoder.send(event)
            encoder.end_patch()
        encoder.finish()
    except EncodeError as exc:
        if case.positive:
            raise CaseFailed(f"encoding failed: {exc}") from None
        return str(exc)
    if not case.positive:
        raise CaseFailed("expected an EncodeError, but the inputs were encoded")
    data = encoder.take()
    try:
        events = _decode_jelly(data, "<encoder output>")
    except DecodeError as exc:
        raise CaseFailed(f"the encoder's output does not decode: {exc}") from None
    decoded_options, patches, rest = _split(events)
    if not decoded_options:
        raise CaseFailed("the encoder's output holds no options row")
    if decoded_options[0].options != options:
        raise CaseFailed(f"the encoder wrote options {decoded_options[0].options}, requested {options}")
    if rest:
        raise CaseFailed(f"{len(rest)} rows after the last patch end in the encoder's output")
    names = [p.name for p in case.action[1:]]
    if options.stream_type is StreamType.FLAT:
        expected = [[event for patch in inputs for event in patch]]
        names = ["+".join(names)]
    else:
        expected = inputs
    _compare(patches, expected, names)
    return ""
