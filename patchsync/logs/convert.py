"""Whole-log operations on patch logs held in memory: convert and summarize.

The command line's ``convert``, ``inspect`` and ``reverse`` are thin over these. A conversion
reads the whole input first: it validates everything before a byte is written, and
Jelly-Patch needs its stream options (which features the patches use) before the first row.
A summary (``inspect``) streams its input instead.
Terms travel as N-Triples strings, so every term is written exactly as it was read (no
rdflib normalization). Reversing a log is in :mod:`patchsync.capture.reverse_log`.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Any, cast

from patchsync import formats
from patchsync.codec.frame_stats import FrameCounter
from patchsync.errors import EncodeError
from patchsync.events import ROW_CODES, Add, Delete, Event, Options, PatchEnd
from patchsync.logs.patch_logs import iter_stream_events, write_events
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms import BNODE, LITERAL, TRIPLE
from patchsync.terms.ntriples import NTriplesTerms


def stream_events(data: bytes, fmt: str, source: str) -> Iterator[Event]:
    """The events of a whole log in ``data``, terms as N-Triples strings."""
    return iter_stream_events(io.BytesIO(data), fmt, adapter=NTriplesTerms(), source=source)


@dataclass(frozen=True, slots=True)
class Features:
    """What a log holds that its writer's options must declare."""

    #: The log's own options (Jelly-Patch); ``None`` for RDF Patch text.
    options: PatchOptions | None
    quads: bool = False
    rdf_star: bool = False
    generalized: bool = False


#: The features :class:`FeatureScan` tracks, as messages name them.
FEATURE_NAMES = {
    "quads": "a named graph",
    "rdf_star": "RDF-star (a quoted triple)",
    "generalized": "a generalized statement",
}


class FeatureScan:
    """Which features a run of events uses, and where each was first used.

    Fed events (terms as N-Triples strings) with :meth:`see`; :meth:`options` then gives
    writer options that declare every feature seen, and :attr:`first` says, per feature
    (``quads``, ``rdf_star``, ``generalized``), the source and event that first used it.
    """

    def __init__(self) -> None:
        self._adapter = NTriplesTerms()
        self.first: dict[str, tuple[str, Event]] = {}

    @property
    def quads(self) -> bool:
        return "quads" in self.first

    @property
    def rdf_star(self) -> bool:
        return "rdf_star" in self.first

    @property
    def generalized(self) -> bool:
        return "generalized" in self.first

    def see(self, event: Event, source: str = "<stream>") -> None:
        """Note the features ``event`` uses (only statements use any)."""
        kind = type(event)
        if kind is not Add and kind is not Delete:
            return
        assert isinstance(event, (Add, Delete))
        used: list[str] = []
        if event.g:
            used.append("quads")
            kind_g = self._adapter.unpack(event.g)[0]
            if kind_g == LITERAL:
                used.append("generalized")
            elif kind_g == TRIPLE:
                used.append("triple_graph")
        for position, term in (("s", event.s), ("p", event.p), ("o", event.o)):
            u = self._adapter.unpack(term)
            if u[0] == TRIPLE:
                used.append("rdf_star")
                if position == "p":
                    used.append("generalized")
            elif (u[0] == LITERAL and position != "o") or (u[0] == BNODE and position == "p"):
                used.append("generalized")
        for feature in used:
            self.first.setdefault(feature, (source, event))

    def options(self, base: PatchOptions | None = None) -> PatchOptions:
        """``base`` (default: the writer defaults) with every feature seen declared."""
        base = base or PatchOptions()
        return replace(
            base,
            statement_type=StatementType.QUADS if self.quads else base.statement_type,
            rdf_star=base.rdf_star or self.rdf_star,
            generalized_statements=base.generalized_statements or self.generalized,
        )

    def where(self, feature: str) -> str:
        """Where ``feature`` was first used: source, byte, and frame and row (or line, for text)."""
        source, event = self.first[feature]
        offset, frame, row = event[-3:]
        text = formats.by_suffix(source) == formats.by_name("rdfp")
        return f"{source}, byte {offset}, " + (f"line {row}" if text else f"frame {frame}, row {row}")

    def missing(self, options: PatchOptions) -> str | None:
        """The first feature seen that ``options`` does not declare, or ``None``."""
        declared = {
            "quads": options.statement_type is StatementType.QUADS,
            "rdf_star": options.rdf_star,
            "generalized": options.generalized_statements,
        }
        return next((feature for feature in self.first if not declared.get(feature, True)), None)

    def require(self, options: PatchOptions, dest: object, verb: str) -> None:
        """Refuse, naming where it was first used, a feature seen that the options of the
        existing log ``dest`` do not declare (``verb``: what was not done, "appended")."""
        missing = self.missing(options)
        if missing is not None:
            raise EncodeError(
                f"{self.where(missing)}: uses {FEATURE_NAMES[missing]}, which the options of {dest} do not declare; "
                f"write to a new log instead; nothing was {verb}"
            )


def scan_features(data: bytes, fmt: str, source: str, out_fmt: str | None = None) -> Features:
    """One pass over a whole log: its options (Jelly-Patch) or the features it uses (text).

    Decoding the whole input also validates it, so a conversion fails before writing; a
    text log whose graph name is a quoted triple, which Jelly-Patch cannot hold, is refused
    naming where when ``out_fmt`` is ``jellyp``.
    """
    scan = FeatureScan()
    for event in stream_events(data, fmt, source):
        if type(event) is Options:
            return Features(event.options)
        scan.see(event, source)
    if out_fmt == "jellyp" and "triple_graph" in scan.first:
        # RdfQuad's graph oneof holds an IRI, a blank node, the default graph or a literal,
        # never a quoted triple (https://w3id.org/jelly/dev/specification/serialization/,
        # "RDF statements and graphs"; rdf.proto, message RdfQuad).
        raise EncodeError(
            f"{scan.where('triple_graph')}: a quoted triple names a graph, which Jelly-Patch cannot hold; "
            "nothing was written"
        )
    return Features(None, scan.quads, scan.rdf_star, scan.generalized)


def convert_log(
    data: bytes,
    in_fmt: str,
    out: IO[bytes],
    out_fmt: str,
    *,
    source: str,
    stream_type: StreamType | None = None,
    statement_type: StatementType | None = None,
    frame_rows: int | None = None,
) -> None:
    """Write the log in ``data`` to ``out`` in ``out_fmt``.

    The output keeps the input's Jelly options where it has them; otherwise PUNCTUATED /
    QUADS with RDF-star or generalized statements declared only when the input uses them.
    ``stream_type`` and ``statement_type`` override; FLAT merges all patches into one.
    """
    found = scan_features(data, in_fmt, source, out_fmt)
    base = found.options or PatchOptions(rdf_star=found.rdf_star, generalized_statements=found.generalized)
    options = PatchOptions(
        stream_type=stream_type or base.stream_type,
        statement_type=statement_type or base.statement_type,
        generalized_statements=base.generalized_statements,
        rdf_star=base.rdf_star,
        max_name_table_size=base.max_name_table_size,
        max_prefix_table_size=base.max_prefix_table_size,
        max_datatype_table_size=base.max_datatype_table_size,
    )
    write_events(
        stream_events(data, in_fmt, source),
        out,
        out_fmt,
        options=options,
        adapter=NTriplesTerms(),
        max_frame_rows=frame_rows,
    )


class _Tap:
    """A binary stream read through, counting its bytes and handing them to a frame counter."""

    def __init__(self, stream: IO[bytes], counter: FrameCounter | None) -> None:
        self.stream = stream
        self.counter = counter
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n)
        self.size += len(data)
        if self.counter is not None and data:
            self.counter.feed(data)
        return data


def summarize_log(data: bytes | IO[bytes], fmt: str, source: str) -> dict[str, Any]:
    """A JSON-ready summary: patches, rows by code and, for Jelly-Patch, options, frames, lookups.

    ``data`` is the log's bytes or a binary stream of it, read once, a piece at a time: a
    log of any size is summarized in the memory of a few of its frames.
    """
    counter = FrameCounter(source) if fmt == "jellyp" else None
    tap = _Tap(io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data, counter)
    rows: Counter[str] = Counter()
    patches = 0
    options: PatchOptions | None = None
    # Decoded first, counted after: the decoder's error for a bad log comes before the counter's.
    events = iter_stream_events(cast(IO[bytes], tap), fmt, adapter=NTriplesTerms(), source=source)
    for event in events:
        if type(event) is PatchEnd:
            patches += 1
        elif type(event) is Options:
            options = event.options
        else:
            rows[ROW_CODES[type(event)]] += 1
    summary: dict[str, Any] = {"file": source, "format": fmt, "bytes": tap.size, "patches": patches}
    if counter is not None:
        stats = counter.finish()
        summary["frames"] = stats.frames
        if options is not None:
            summary["options"] = {
                "stream_type": options.stream_type.name,
                "statement_type": options.statement_type.name,
                "generalized_statements": options.generalized_statements,
                "rdf_star": options.rdf_star,
                "max_name_table_size": options.max_name_table_size,
                "max_prefix_table_size": options.max_prefix_table_size,
                "max_datatype_table_size": options.max_datatype_table_size,
                "version": options.version,
            }
        summary["lookups"] = stats.lookups
        rows.update(stats.rows)
    summary["rows"] = dict(sorted(rows.items()))
    return summary


def reversal_options(found: PatchOptions | None) -> PatchOptions:
    """The options of a reversed log: the input's, except that FLAT becomes PUNCTUATED.

    A FLAT stream is one patch; its inverse is several (last patch first), which FLAT
    cannot separate.
    """
    if found is None:
        return PatchOptions()
    if found.stream_type is not StreamType.FLAT:
        return found
    fields = {name: getattr(found, name) for name in PatchOptions.__slots__}
    return PatchOptions(**{**fields, "stream_type": StreamType.PUNCTUATED})
