"""One-call entry points: apply a file, a byte stream or events to a target; open targets by name.

``open_target`` lives in :mod:`patchsync.apply.registry` and is re-exported here.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from patchsync.apply.applier import DEFAULT_BATCH_ROWS, Applier, ApplyResult
from patchsync.apply.registry import open_target
from patchsync.apply.target import Target
from patchsync.errors import UsageError, param
from patchsync.events import Event
from patchsync.logs.files import LogFile, file_errors
from patchsync.logs.fingerprint import FINGERPRINT_BYTES as FINGERPRINT_BYTES
from patchsync.logs.fingerprint import fingerprint as fingerprint
from patchsync.logs.patch_logs import format_of, iter_stream_events
from patchsync.options import Limits


def apply_events(
    events: Iterable[Event],
    target: Target,
    *,
    source: str = "<events>",
    fingerprint: str | None = None,
    chain: str = "strict",
    reset: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Callable[[ApplyResult, int], None] | None = None,
    graph: str | None = None,
) -> ApplyResult:
    """Apply decoded events (built with ``target.adapter``) to ``target``; returns the counts.

    The complete units are applied, each atomically with the checkpoint of ``source``;
    re-running with the same source applies nothing twice. ``graph`` (an IRI) receives the
    statements and namespaces that name no graph (those of a TRIPLES stream, or triple rows
    of RDF Patch text) instead of the default graph (docs/design.md §5).
    """
    if graph is not None:
        events = _into_graph(events, _graph_term(target, graph))
    applier = Applier(
        target,
        source=source,
        fingerprint=fingerprint,
        chain=chain,
        reset=reset,
        batch_rows=batch_rows,
        progress=progress,
    )
    return applier.apply(events)


def apply_stream(
    stream: IO[bytes],
    target: Target,
    fmt: str,
    *,
    source: str = "<stream>",
    chain: str = "strict",
    reset: bool = False,
    limits: Limits | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Callable[[ApplyResult, int], None] | None = None,
    graph: str | None = None,
) -> ApplyResult:
    """Decode a ``jellyp`` or ``rdfp`` byte stream and apply it to ``target`` (see :func:`apply_events`)."""
    if fmt not in ("jellyp", "rdfp"):
        raise UsageError(f"unknown patch format {fmt!r} (expected jellyp or rdfp)")
    head = stream.read(FINGERPRINT_BYTES)
    whole: Any = _Prepended(head, stream)
    events = iter_stream_events(whole, fmt, adapter=target.adapter, source=source, limits=limits)
    return apply_events(
        events,
        target,
        source=source,
        fingerprint=fingerprint(head, fmt),
        chain=chain,
        reset=reset,
        batch_rows=batch_rows,
        progress=progress,
        graph=graph,
    )


def apply_file(
    path: str | os.PathLike[str],
    target: Target,
    *,
    fmt: str | None = None,
    source: str | None = None,
    chain: str = "strict",
    reset: bool = False,
    limits: Limits | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Callable[[ApplyResult, int], None] | None = None,
    graph: str | None = None,
    snapshot_dir: str | os.PathLike[str] | None = None,
) -> ApplyResult:
    """Apply a ``.jellyp`` or ``.rdfp`` log file to ``target`` (see :func:`apply_events`).

    The source name defaults to the file's absolute path, so re-running on the same file
    resumes at its checkpoint. With ``snapshot_dir``, a ``.jellyp`` log's decoder state is
    kept there after the apply and the next apply of the log decodes only the bytes after
    it (:mod:`patchsync.apply.resume`).
    """
    fmt = format_of(path, fmt)
    name = source or log_source(path)
    if snapshot_dir is not None and fmt == "jellyp":
        from patchsync.apply.resume import LogReader

        with LogFile(path) as f:
            with file_errors(path, "read"):  # the reader's own reads of the log (pread)
                reader = LogReader(f, target, source=name, limits=limits, snapshot_dir=snapshot_dir, reset=reset)
            result = apply_events(
                reader.events(),
                target,
                source=name,
                fingerprint=reader.fingerprint,
                chain=chain,
                reset=reset,
                batch_rows=batch_rows,
                progress=progress,
                graph=graph,
            )
            with file_errors(path, "read"):
                reader.save()
            return result
    with LogFile(path) as f:
        return apply_stream(
            f,
            target,
            fmt,
            source=name,
            chain=chain,
            reset=reset,
            limits=limits,
            batch_rows=batch_rows,
            progress=progress,
            graph=graph,
        )


def log_source(path: str | os.PathLike[str]) -> str:
    """The name :func:`apply_file` gives a log file's checkpoint: its absolute path."""
    return str(Path(path).resolve())


def _graph_term(target: Target, graph: str) -> Any:
    if not graph or any(c in graph for c in ' <>"{}|\\^`') or ":" not in graph:
        raise UsageError(f"{param('graph', graph)} is not an absolute IRI").naming(("graph", graph))
    return target.adapter.iri(graph)


def _into_graph(events: Iterable[Event], graph: Any) -> Iterator[Event]:
    """Events that name no graph (``g`` is None), moved into ``graph``."""
    for event in events:
        if getattr(event, "g", 0) is None:  # Add, Delete, PrefixAdd, PrefixDelete of triples
            event = event._replace(g=graph)  # type: ignore[call-arg]
        yield event


class _Prepended(io.RawIOBase):
    """A stream that first returns ``head`` and then the rest of ``rest``."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        return self._rest.read(size)


__all__ = [
    "FINGERPRINT_BYTES",
    "apply_events",
    "apply_file",
    "apply_stream",
    "fingerprint",
    "log_source",
    "open_target",
]
