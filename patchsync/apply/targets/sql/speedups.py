"""The one place that chooses between the SQL target's compiled speed-ups and its Python code.

The speed-ups (``_native.pyx`` beside this module: the term dictionary's hash and its loops
over quads) are an extension of their own, optional like the codec core: without a compiler,
or with ``PATCHSYNC_PURE`` set to a value other than ``""`` or ``"0"``, ``schema.py`` and
``term_keys.py`` use their Python functions, the reference. The rule is the one every compiled
extension follows (``patchsync/_lazy.py``).
"""

from __future__ import annotations

from types import ModuleType

from patchsync._lazy import compiled

__all__ = ["native"]


def native() -> ModuleType | None:
    """The SQL target's compiled speed-ups, or ``None`` when they are not built or not wanted."""
    return compiled("patchsync.apply.targets.sql._native")
