"""The fuzz targets: one function per decoder, from arbitrary bytes to ``None``.

The contract under test (issue #8): every input either decodes or raises the project's
error type. A target lets any other exception escape (libFuzzer then records a crash) and
raises :class:`InvariantBroken` when a cross-check fails:

* ``patch`` (Jelly-Patch ``PatchDecoder``), ``rdf`` (Jelly-RDF ``RdfDecoder``) and ``rdfp``
  (RDF Patch text reader): the first two input bytes choose a split point, the rest is the
  stream. It is decoded with the N-Triples adapter fed whole and fed in two pieces (so the
  ``NEED_DATA`` paths run at a fuzzer-chosen point): both must hand out the same events and
  the same error. The rdflib adapter must also end in events or a ``PatchsyncError``, with
  the same kinds of event when both adapters succeed. A failed decoder must raise the same
  error again. Text that reads back is written with the RDF Patch writer and must read
  back to the same events.
* ``native``: the same input decoded by the compiled core and by the pure-Python reference
  decoders (``PurePatchDecoder``, ``PureRdfDecoder``; both formats on every input), whole and split at the fuzzer's point, with the
  N-Triples and the rdflib adapter: the events must be equal, and so must the error (its
  type, rule, offset, frame and row) when there is one (issue #13).
* ``units``: the input draws a generated log (hypothesis's ``fuzz_one_input``), on which
  apply, compact, the rdflib parser and reverse must agree (the differential property of
  ``tests/test_units_differential.py``, at any size).
* ``apply``: the first byte picks the format (even: ``.jellyp``, odd: ``.rdfp``), the rest
  is applied to a :class:`~patchsync.apply.targets.memory.MemoryTarget`; only ``PatchsyncError``
  may escape, and applying the same bytes again (resuming at the checkpoint) must change
  nothing.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

from patchsync.apply.api import apply_stream
from patchsync.apply.targets.memory import MemoryTarget
from patchsync.codec.driver import END
from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
from patchsync.codec.rdf_decoder import PureRdfDecoder, RdfDecoder
from patchsync.codec.rdfp import RdfPatchTextReader, read_rdfp, write_rdfp
from patchsync.errors import DecodeError, PatchsyncError
from patchsync.events import Event, Options, strip_position
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms
from patchsync.terms.rdflib_fast import FastRdflibTerms
from tests.workloads.unit_logs import GeneratedLog, check, unit_logs

NT = NTriplesTerms()
RDFLIB = RdflibTerms()
# The compiled core builds this adapter's IRIs itself (FastRdflibTerms.native_iri_type).
FAST_RDFLIB = FastRdflibTerms()


class InvariantBroken(AssertionError):
    """A cross-check of a fuzz target failed (the input is a finding, like a crash)."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise InvariantBroken(message)


def _split(data: bytes) -> tuple[bytes, int]:
    """The stream and the split point encoded by a decoder target's input."""
    payload = data[2:]
    point = int.from_bytes(data[:2], "little") % (len(payload) + 1) if len(data) >= 2 else 0
    return payload, point


Decoder = Any  # PatchDecoder | RdfDecoder | RdfPatchTextReader, all with feed/close/iteration


def drain(decoder: Decoder, chunks: Iterable[bytes]) -> tuple[list[Any], str | None]:
    """Feed ``chunks``, then close; every event handed out and the error text (or ``None``).

    Only ``PatchsyncError`` is caught: anything else is the finding.
    """
    events: list[Any] = []
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            events.extend(decoder)
        decoder.close()
        events.extend(decoder)
        _check(decoder.next_event() is END, "a closed, drained decoder did not answer END")
    except DecodeError as exc:
        # A decoder that failed stays failed, with the same error (h11 style).
        try:
            decoder.next_event()
        except DecodeError as again:
            _check(str(again) == str(exc), f"a failed decoder raised a different error: {again} vs {exc}")
        else:
            raise InvariantBroken(f"a failed decoder answered an event after {exc}") from None
        return events, str(exc)
    except PatchsyncError as exc:
        return events, f"{type(exc).__name__}: {exc}"
    return events, None


def _decoder_target(make: Callable[[Any], Decoder], data: bytes) -> tuple[list[Any], str | None]:
    payload, point = _split(data)
    whole = drain(make(NT), [payload])
    split = drain(make(NT), [payload[:point], payload[point:]])
    _check(whole == split, f"split at {point} changed the result: {split!r} vs {whole!r}")
    events, error = drain(make(RDFLIB), [payload])
    if error is None and whole[1] is None:
        kinds = [type(e).__name__ for e in events]
        _check(kinds == [type(e).__name__ for e in whole[0]], "rdflib and N-Triples adapters disagree")
    return whole


def fuzz_patch(data: bytes) -> None:
    """Jelly-Patch decoder (``PatchDecoder``), rdflib and N-Triples adapters, whole and split."""
    _decoder_target(lambda adapter: PatchDecoder(adapter, source="fuzz.jellyp"), data)


def fuzz_rdf(data: bytes) -> None:
    """Jelly-RDF decoder (``RdfDecoder``), rdflib and N-Triples adapters, whole and split."""
    _decoder_target(lambda adapter: RdfDecoder(adapter, source="fuzz.jelly"), data)


def outcome(decoder: Decoder, chunks: Iterable[bytes]) -> tuple[list[Any], tuple[object, ...] | None]:
    """Events handed out and the error's identity (type, rule, source, offset, frame, row)."""
    events: list[Any] = []
    try:
        for chunk in chunks:
            decoder.feed(chunk)
            events.extend(decoder)
        decoder.close()
        events.extend(decoder)
    except DecodeError as exc:
        return events, ("DecodeError", exc.rule, exc.source, exc.offset, exc.frame, exc.row)
    except PatchsyncError as exc:
        return events, (type(exc).__name__, str(exc))
    return events, None


def native_decoder(adapter: Any, *, rdf: bool = False) -> Any:
    """A decoder on the compiled core, whatever ``PATCHSYNC_PURE`` says (ImportError if unbuilt)."""
    from patchsync.codec import _native

    decoder = RdfDecoder(adapter, source="fuzz.jelly") if rdf else PatchDecoder(adapter, source="fuzz.jellyp")
    decoder._native = _native
    return decoder


def pure_decoder(adapter: Any, *, rdf: bool = False) -> Any:
    """The pure-Python reference decoder."""
    return PureRdfDecoder(adapter, source="fuzz.jelly") if rdf else PurePatchDecoder(adapter, source="fuzz.jellyp")


def compare_native(payload: bytes, point: int, *, rdf: bool = False) -> tuple[list[Any], tuple[object, ...] | None]:
    """Pure and native decoders on ``payload``, whole and split at ``point``: one outcome.

    ``rdf`` picks the Jelly-RDF decoders instead of the Jelly-Patch ones.
    """
    splits = ([payload], [payload[:point], payload[point:]])
    for adapter in (NT, RDFLIB, FAST_RDFLIB):
        for chunks in splits:
            pure = outcome(pure_decoder(adapter, rdf=rdf), chunks)
            native = outcome(native_decoder(adapter, rdf=rdf), chunks)
            _check(native == pure, f"native and pure decoders disagree (split {len(chunks[0])}):\n{native!r}\n{pure!r}")
    return pure


def fuzz_native(data: bytes) -> None:
    """The compiled core against the pure-Python decoders, Jelly-Patch and Jelly-RDF (differential)."""
    payload, point = _split(data)
    compare_native(payload, point)
    compare_native(payload, point, rdf=True)


def _content(events: Iterable[Event]) -> list[Event]:
    return [strip_position(e) for e in events if type(e) is not Options]


def fuzz_rdfp(data: bytes) -> None:
    """RDF Patch text reader, whole and split; what it reads must write and read back the same."""
    events, error = _decoder_target(lambda adapter: RdfPatchTextReader(adapter, source="fuzz.rdfp"), data)
    if error is not None:
        return
    text = write_rdfp(events, NT)
    try:
        again = read_rdfp(text, NT, source="rewritten.rdfp")
    except PatchsyncError as exc:
        raise InvariantBroken(f"written text does not read back: {exc}\n{text}") from None
    _check(_content(again) == _content(events), f"text round trip changed the events:\n{text}")


def fuzz_apply(data: bytes) -> None:
    """Decode and apply into ``MemoryTarget``; a second apply resumes and changes nothing."""
    fmt = "rdfp" if data[:1] and data[0] & 1 else "jellyp"
    payload = data[1:]
    target = MemoryTarget()
    with contextlib.suppress(PatchsyncError):
        apply_stream(io.BytesIO(payload), target, fmt, source="fuzz")
    state = (set(target.data), dict(target.prefixes))
    with contextlib.suppress(PatchsyncError):
        apply_stream(io.BytesIO(payload), target, fmt, source="fuzz")
    _check((target.data, target.prefixes) == state, "applying the same log again changed the target")


@settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(log=unit_logs(max_patches=8, max_rows=6))
def _units_property(log: GeneratedLog) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        check(log, Path(workdir))


def fuzz_units(data: bytes) -> None:
    """The unit reader's differential property (``tests/workloads/unit_logs.py``): the input
    is the choices that draw one log, larger than the test suite's; apply, compact, the rdflib
    parser and reverse must agree on it."""
    _units_property.hypothesis.fuzz_one_input(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "patch": fuzz_patch,
    "rdf": fuzz_rdf,
    "rdfp": fuzz_rdfp,
    "apply": fuzz_apply,
    "native": fuzz_native,
    "units": fuzz_units,
}


class _SlowTeardown:
    """Held by a module of its own, so the interpreter's teardown stops in it for a while.

    It stands in for a loaded machine, where the teardown after a crash can take seconds.
    Only a module that nothing else holds is let go while modules are torn down (this one's
    globals stay alive: atheris holds the target function).
    """

    def __del__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        sleep(3)


def fuzz_selftest(data: bytes) -> None:
    """A planted bug, so a test can prove that a crash is found, saved and reproduced."""
    if b"\xde\xad" in data:
        if os.environ.get("PATCHSYNC_FUZZ_SELFTEST") == "slow-exit":
            holder = types.ModuleType("_patchsync_fuzz_slow_teardown")
            holder.held = _SlowTeardown()  # type: ignore[attr-defined]
            sys.modules[holder.__name__] = holder
        raise ValueError("planted crash")


if os.environ.get("PATCHSYNC_FUZZ_SELFTEST") in ("1", "slow-exit"):
    TARGETS["selftest"] = fuzz_selftest

__all__ = ["TARGETS", "InvariantBroken", "compare_native", "drain", "native_decoder", "outcome", "pure_decoder"]
