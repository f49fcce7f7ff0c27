"""The one place that chooses between the compiled codec core and the pure-Python codec.

The compiled core (``patchsync/codec/_native.pyx``, built by ``pip install`` when a C
compiler is present) decodes Jelly-Patch and Jelly-RDF frames straight from the wire. The pure-Python
codec is the reference and the fallback: it is used when the extension was not built (an
install without a compiler) or when the environment variable ``PATCHSYNC_PURE`` is set to
a value other than ``""`` or ``"0"``. Both produce the same events and the same errors
(tests/test_native_differential.py). The rule is the one every compiled extension follows
(``patchsync/_lazy.py``).
"""

from __future__ import annotations

from types import ModuleType

from patchsync._lazy import compiled, pure_forced

__all__ = ["native", "pure_forced"]


def native() -> ModuleType | None:
    """The compiled codec core, or ``None`` when it is not built or not wanted."""
    return compiled("patchsync.codec._native")
