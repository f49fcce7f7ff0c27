"""Helpers for the applier tests: logs as text, targets by name, state comparison."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from patchsync.apply import MemoryTarget, apply_events, apply_stream
from patchsync.apply.applier import ApplyResult
from patchsync.codec.rdfp import read_rdfp
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import encode

State = tuple[frozenset[tuple[str, str, str, str]], dict[tuple[str, str], str]]

EX = "http://example.org/"


def state(target: Any) -> State:
    """What a target holds, comparable across targets."""
    return frozenset(target.quads()), dict(target.namespaces())


def rdfp_to_jellyp(text: str, stream_type: StreamType = StreamType.PUNCTUATED) -> bytes:
    events = read_rdfp(text, NTriplesTerms())
    options = PatchOptions(stream_type=stream_type, statement_type=StatementType.QUADS, rdf_star=True)
    return encode(events, options, NTriplesTerms())


def apply_text(text: str, target: Any, *, fmt: str = "rdfp", source: str = "log", **kwargs: Any) -> ApplyResult:
    """Apply an RDF Patch text (converted to Jelly-Patch when ``fmt`` is ``jellyp``)."""
    data = text.encode() if fmt == "rdfp" else rdfp_to_jellyp(text)
    return apply_stream(io.BytesIO(data), target, fmt, source=source, **kwargs)


def reference(text: str, **kwargs: Any) -> State:
    """The state the reference target reaches on a log (units that fail to decode excluded)."""
    target = MemoryTarget()
    with contextlib.suppress(Exception):
        apply_text(text, target, **kwargs)
    return state(target)


def iri(name: str) -> str:
    return f"<{EX}{name}>"


__all__ = ["EX", "State", "apply_events", "apply_text", "iri", "reference", "state"]


class RecordingCursor:
    """A driver cursor that lists the statements it runs, each as its first word, with
    " RETURNING" added when it returns rows (PostgreSQL has no trace hook)."""

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        self.seen: list[str] = []

    def execute(self, sql: Any, *args: Any) -> Any:
        text = str(sql)
        self.seen.append(text.split(" ", 1)[0] + (" RETURNING" if "RETURNING" in text else ""))
        return self.cursor.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cursor, name)
