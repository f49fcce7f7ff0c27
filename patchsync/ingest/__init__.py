"""Ingest RDF Messages: each message of a message log becomes one patch of a destination.

``ingest_messages(DEST, SOURCES, mode=..., state=...)`` appends to a ``.jellyp`` or ``.rdfp``
log, or to any source kind with a ``writer`` role (``nats://HOST:PORT/STREAM``), resolved by
the source registry; see :mod:`patchsync.ingest.run` and docs/design.md §8.
"""

from __future__ import annotations

from patchsync.ingest.run import IngestResult, ingest_messages
from patchsync.logs.ingest import ADD, MODES, REPLACE, REPLACE_GRAPH

__all__ = ["ADD", "MODES", "REPLACE", "REPLACE_GRAPH", "IngestResult", "ingest_messages"]
