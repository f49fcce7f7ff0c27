"""Generated patch logs for the differential property of the unit reader, and its checks.

Every consumer of a log must see the units ``apply`` sees (docs/design.md §2): the state that
applying a log leaves is also the state that applying its compaction leaves, the state the
rdflib ``patchsync-jellyp`` parser builds, the state ``spark-replay`` computes, and applying
the log's reverse after it gives back the state before it. A log that ends inside a unit
makes each of them fail with the same decode error (after applying the complete units, for
the ones that apply as they read).

:func:`unit_logs` draws the logs: implicit units before ``TX``, ``TX … TC``, ``TX … TA``,
rows after ``TC``, empty patches, header-only patches, prefix rows, blank nodes, named
graphs, RDF-star, patches with and without chain headers, small frames, and sometimes a torn
tail (the bytes cut anywhere). :func:`check` runs every single-process consumer on one log;
:func:`spark_quads` is the Spark side (the caller owns the session). The tests run it at a
quick size (``tests/test_units_differential.py``); the ``units`` fuzz target runs it for as
long as asked (``scripts/fuzz.py units --seconds 600``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from patchsync.apply import MemoryTarget, apply_file
from patchsync.capture.reverse_log import reverse_log
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import DecodeError, UsageError
from patchsync.events import Add, Delete, Event, Header, PatchEnd, PrefixAdd, PrefixDelete, TxAbort, TxCommit, TxStart
from patchsync.logs.compact import compact_logs
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms, format_term

NT = NTriplesTerms()
Quad = tuple[str, str, str, str | None]

_SUBJECTS = ["<http://e/s0>", "<http://e/s1>", "_:b0", "_:b1"]
_PREDICATES = ["<http://e/p0>", "<http://e/p1>"]
_OBJECTS = ["<http://e/s0>", "_:b1", '"v"', '"v"@en', '"w"']
_GRAPHS: list[str | None] = [None, "<http://e/g0>", "<http://e/g1>"]
_QUOTED = '<< <http://e/s0> <http://e/p0> "v" >>'
_NAMES = ["ex", "ey"]
_NAMESPACES = ["<http://e/ns0/>", "<http://e/ns1/>"]

PLAIN_QUADS: list[Quad] = [(s, p, o, g) for s in _SUBJECTS for p in _PREDICATES for o in _OBJECTS for g in _GRAPHS]
STAR_QUADS: list[Quad] = PLAIN_QUADS + [(_QUOTED, p, o, g) for p in _PREDICATES for o in _OBJECTS[2:] for g in _GRAPHS]


@dataclass(frozen=True)
class GeneratedLog:
    """One generated log: its events, its ``.jellyp`` bytes, and what it holds."""

    events: list[Event]
    data: bytes
    #: The bytes are cut short of the encoded log (possibly at a point that still decodes).
    torn: bool
    #: Every committed row is a real change (an add of an absent quad, a delete of a present
    #: one, a prefix bound or unbound): only then does the reverse undo the log exactly.
    real: bool
    #: Some row holds an RDF-star quoted triple (rdflib cannot hold one).
    star: bool


class _Model:
    """The state committed so far, to draw real changes against."""

    def __init__(self) -> None:
        self.quads: set[Quad] = set()
        self.prefixes: dict[str, str] = {}

    def copy(self) -> _Model:
        other = _Model()
        other.quads, other.prefixes = set(self.quads), dict(self.prefixes)
        return other


def _row(draw: Any, model: _Model, *, real: bool, quads: list[Quad]) -> Event:
    """One change or prefix row, applied to ``model``."""
    op = draw(st.sampled_from(["A", "A", "A", "D", "D", "P"]))
    if op == "P":
        name = draw(st.sampled_from(_NAMES))
        bound = model.prefixes.get(name)
        if bound is not None if real else draw(st.booleans()):
            model.prefixes.pop(name, None)
            return PrefixDelete(name, bound if real else draw(st.sampled_from([None, *_NAMESPACES])))
        iri = draw(st.sampled_from(_NAMESPACES))
        model.prefixes[name] = iri
        return PrefixAdd(name, iri)
    if real:
        absent = [q for q in quads if q not in model.quads]
        op = "D" if not absent or (op == "D" and model.quads) else "A"
        quad = draw(st.sampled_from(sorted(model.quads, key=str) if op == "D" else absent))
    else:
        quad = draw(st.sampled_from(quads))
    (model.quads.add if op == "A" else model.quads.discard)(quad)
    return (Add if op == "A" else Delete)(*quad)


@st.composite
def unit_logs(draw: Any, *, max_patches: int = 5, max_rows: int = 4) -> GeneratedLog:
    """A log of up to ``max_patches`` patches (see the module docstring)."""
    real = draw(st.booleans())
    star = draw(st.booleans())
    quads = STAR_QUADS if star else PLAIN_QUADS
    model = _Model()
    events: list[Event] = []
    head: str | None = None
    for number in range(draw(st.integers(0, max_patches))):
        if draw(st.integers(0, 5)):  # most patches carry chain headers
            events.append(Header("id", f"<urn:p:{number}>"))
            if head is not None:
                events.append(Header("prev", f"<{head}>"))
            head = f"urn:p:{number}"
        if draw(st.integers(0, 4)) == 0:
            events.append(Header("note", '"n"'))
        for block in draw(st.lists(st.sampled_from(["implicit", "commit", "abort"]), max_size=4)):
            if block == "implicit":  # rows outside a transaction (before a TX, after a TC, alone)
                for _ in range(draw(st.integers(1, max_rows))):
                    events.append(_row(draw, model, real=real, quads=quads))
                continue
            tentative = model.copy()
            events.append(TxStart())
            for _ in range(draw(st.integers(0, max_rows))):
                events.append(_row(draw, tentative, real=real, quads=quads))
            if block == "commit":
                events.append(TxCommit())
                model = tentative
            else:
                events.append(TxAbort())
        events.append(PatchEnd())
    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.QUADS, rdf_star=star)
    encoder: PatchEncoder[str] = PatchEncoder(options, NT, max_frame_rows=draw(st.integers(1, 6)))
    for event in events:
        encoder.send(event)
    encoder.finish()
    data = encoder.take()
    torn = draw(st.integers(0, 3)) == 0
    if torn:
        data = data[: draw(st.integers(1, len(data) - 1))]
    return GeneratedLog(events, data, torn, real, star)


State = tuple[frozenset[tuple[str, str, str, str]], dict[tuple[str, str], str]]


def _state(target: MemoryTarget) -> State:
    return frozenset(target.quads()), dict(target.namespaces())


def _failure(error: DecodeError | None) -> tuple[int | None, str] | None:
    """What identifies a decode error across consumers: the byte and the rule."""
    return None if error is None else (error.offset, error.rule)


def _applied(path: Path, target: MemoryTarget) -> DecodeError | None:
    try:
        apply_file(path, target)
    except DecodeError as exc:
        return exc
    return None


def check(log: GeneratedLog, workdir: Path) -> State:
    """Every single-process consumer agrees with ``apply`` on ``log``; returns apply's state.

    Raises ``AssertionError`` naming the consumer that disagrees.
    """
    path = workdir / "log.jellyp"
    path.write_bytes(log.data)
    reference = MemoryTarget()
    failed = _applied(path, reference)
    state = _state(reference)
    assert not (failed is not None and not log.torn), f"apply refused a whole log: {failed}"

    # compact: the net patch applies to the same state; a torn log fails the same way.
    net = workdir / "net.jellyp"
    try:
        compact_logs([path], net)
        compacted: DecodeError | None = None
    except DecodeError as exc:
        compacted = exc
    assert _failure(compacted) == _failure(failed), f"compact: {compacted} but apply: {failed}"
    if compacted is None:
        target = MemoryTarget()
        apply_file(net, target)
        assert _state(target) == state, "apply(compact(log)) differs from apply(log)"

    # The rdflib parser applies the same complete units (rdflib holds no quoted triple).
    if not log.star:
        parsed, error = rdflib_quads(path)
        assert _failure(error) == _failure(failed), f"rdflib parser: {error} but apply: {failed}"
        assert parsed == state[0], "the rdflib parser's dataset differs from apply(log)"

    # reverse: decoded whole first, so a torn log fails before anything is written; the
    # reverse of real changes, applied after the log (strict chain), restores the empty state.
    out = io.BytesIO()
    try:
        reverse_log(log.data, "jellyp", out, "jellyp", source=str(path))
        reversed_error: DecodeError | None = None
    except DecodeError as exc:
        reversed_error = exc
    except UsageError:
        # A log of arbitrary rows may remove a prefix it never bound: that has no inverse.
        assert not log.real, "reverse refused a log of real changes"
        return state
    assert _failure(reversed_error) == _failure(failed), f"reverse: {reversed_error} but apply: {failed}"
    if failed is None and log.real:
        undo = workdir / "undo.jellyp"
        undo.write_bytes(out.getvalue())
        apply_file(undo, reference)
        assert _state(reference) == (frozenset(), {}), "apply(reverse(log)) after apply(log) left a state"
    return state


def rdflib_quads(path: Path) -> tuple[frozenset[tuple[str, str, str, str]], DecodeError | None]:
    """The dataset the rdflib ``patchsync-jellyp`` parser builds, as N-Triples quads."""
    from rdflib import Dataset
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    from patchsync.terms.rdflib_adapter import RdflibTerms

    rd = RdflibTerms()
    ds = Dataset()
    error: DecodeError | None = None
    try:
        ds.parse(str(path), format="patchsync-jellyp")
    except DecodeError as exc:
        error = exc
    quads = set()
    for s, p, o, g in ds.quads((None, None, None, None)):
        graph = getattr(g, "identifier", g)
        name = "" if graph == DATASET_DEFAULT_GRAPH_ID else format_term(rd, graph)
        quads.add((format_term(rd, s), format_term(rd, p), format_term(rd, o), name))
    return frozenset(quads), error


def spark_quads(spark: Any, path: Path) -> tuple[frozenset[tuple[str, str, str, str]], DecodeError | None]:
    """The state ``spark-replay`` computes for one log (or the decode error it fails with)."""
    import patchsync.spark as ps

    try:
        return frozenset(ps.iter_quads(ps.replay(spark, [path]))), None
    except DecodeError as exc:
        return frozenset(), exc


__all__ = ["NT", "GeneratedLog", "check", "rdflib_quads", "spark_quads", "unit_logs"]
