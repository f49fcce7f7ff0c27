"""Ingest RDF Messages: each message of a message log becomes one patch of a destination.

``ingest_messages(DEST, SOURCES, mode=..., state=...)`` appends to a ``.jellyp`` or ``.rdfp``
log, or to any source kind with a ``writer`` role (``nats://HOST:PORT/STREAM``), resolved by
the source registry; see docs/design.md §8. Modules: :mod:`.run` (the ingest: destinations,
``--state`` targets, resuming), :mod:`.patches` (what it decides with: the messages read and
validated, their patch ids, the dataset a mode changes, a message's patch), :mod:`.modes`
(the modes by name), :mod:`.terms` (N-Triples terms into a target's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from patchsync._lazy import lazy_attributes
from patchsync.ingest.modes import ADD, MODES, REPLACE, REPLACE_GRAPH

if TYPE_CHECKING:
    from patchsync.ingest.run import IngestResult, ingest_messages

# The ingest loads on first use: the command line reads the modes for ``--help`` only.
_LAZY = {"IngestResult": "patchsync.ingest.run", "ingest_messages": "patchsync.ingest.run"}

__getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = ["ADD", "MODES", "REPLACE", "REPLACE_GRAPH", "IngestResult", "ingest_messages"]
