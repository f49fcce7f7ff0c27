"""``sparql+http(s)://`` targets: any SPARQL 1.1 store (docs/sparql-stores.md).

:mod:`.config` reads the URL, :mod:`.client` speaks HTTP, :mod:`.text` and :mod:`.state` are
the sans-I/O text of terms, data and state graphs, :mod:`.target` drives them.
"""

from __future__ import annotations

from .target import SparqlTarget

__all__ = ["SparqlTarget"]
