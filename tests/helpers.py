"""Shared test helpers: encode/decode pipes, event comparison, log files, names on shared servers,
spoilt index files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.events import Event, Options, PatchEnd, strip_position
from patchsync.logs.patch_logs import format_of, write_events
from patchsync.options import PatchOptions

# Upstream test data, vendored so that a clone alone passes its tests (see its README).
UPSTREAM = Path(__file__).resolve().parent / "data" / "upstream"
RDF_SUITE = UPSTREAM / "jelly-rdf"
JVM_PATCHES = UPSTREAM / "jelly-jvm-patch"


def encode(events: Iterable[Event], options: PatchOptions, adapter: Any = None, **kwargs: Any) -> bytes:
    encoder = PatchEncoder(options, adapter, **kwargs)
    for event in events:
        encoder.send(event)
    encoder.finish()
    return encoder.take()


def decode(data: bytes, adapter: Any = None, **kwargs: Any) -> list[Event]:
    decoder = PatchDecoder(adapter, **kwargs)
    decoder.feed(data)
    decoder.close()
    return list(decoder)


def content(events: Iterable[Event]) -> list[Event]:
    """Events without options and positions."""
    return [strip_position(e) for e in events if type(e) is not Options]


def patches(events: Iterable[Event]) -> list[list[Event]]:
    """Content events split at patch ends (the trailing empty group dropped)."""
    out: list[list[Event]] = [[]]
    for e in content(events):
        if type(e) is PatchEnd:
            out.append([])
        else:
            out[-1].append(e)
    if not out[-1]:
        out.pop()
    return out


def write_log(
    path: Path,
    events: Iterable[Event],
    *,
    options: PatchOptions | None = None,
    adapter: Any = None,
    max_frame_rows: int | None = None,
) -> Path:
    """Write ``events`` to a new log file, Jelly-Patch or RDF Patch text by its suffix; returns ``path``."""
    with open(path, "wb") as f:
        write_events(events, f, format_of(path), options=options, adapter=adapter, max_frame_rows=max_frame_rows)
    return path


def flatten(groups: Sequence[Sequence[Event]]) -> list[Event]:
    return [e for g in groups for e in g]


def in_default_graph(groups: Sequence[Sequence[Event]], default: Any = None) -> list[list[Event]]:
    """Triples as quads in the default graph, as a QUADS stream carries them."""
    if default is None:
        from patchsync.terms.rdflib_adapter import RdflibTerms

        default = RdflibTerms().default_graph()
    return [[e._replace(g=default) if getattr(e, "g", 0) is None else e for e in group] for group in groups]


def worker_tag() -> str:
    """This pytest process in names of things it creates on shared servers: ``gw0_4711``.

    The xdist worker name reads well in a server's listing; the process id keeps two runs
    on one machine (two checkouts, two developers) apart.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{worker}_{os.getpid()}" if worker else str(os.getpid())


def spoil_index(index: Path, how: str) -> bool:
    """Break the SQLite index file ``index`` the ways any index can be broken: ``deleted``,
    ``truncated``, ``garbage`` written over its start, or a ``format`` it was not written in.
    Whether ``how`` is one of those (the caller breaks it its own ways otherwise)."""
    import sqlite3

    if how == "deleted":
        index.unlink()
    elif how == "truncated":
        with open(index, "r+b") as f:
            f.truncate(os.path.getsize(index) // 3)
    elif how == "garbage":
        with open(index, "r+b") as f:
            f.write(b"not an index" * 100)
    elif how == "format":
        with sqlite3.connect(index) as db:
            db.execute("UPDATE meta SET value = 'patchsync-version-index 0' WHERE key = 'format'")
    else:
        return False
    return True
