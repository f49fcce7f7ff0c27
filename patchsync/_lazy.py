"""What is imported on first use: lazy package attributes and the optional compiled extensions.

``patchsync``, ``patchsync.apply`` and ``patchsync.tail`` export names whose modules are
costly to import (rdflib, SQLAlchemy, the applier); commands that need none of them start
faster when those load on first use (pinned by ``tests/test_cli_startup.py``).

The compiled extensions (the codec core, ``codec/_native.pyx``; the SQL target's speed-ups,
``apply/targets/sql/_native.pyx``) are built only where a C compiler was present, and the
environment variable ``PATCHSYNC_PURE`` (any value but ``""`` and ``"0"``) turns all of them
off at once. Each layer's loader (``codec/backend.py``, ``apply/targets/sql/speedups.py``)
asks :func:`compiled` here, so that rule is written once.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from types import ModuleType


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], object]:
    """A module-level ``__getattr__`` for ``package`` resolving ``name`` from ``modules[name]``."""

    def __getattr__(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


def pure_forced() -> bool:
    """Whether ``PATCHSYNC_PURE`` asks for the pure-Python code instead of every compiled extension."""
    return os.environ.get("PATCHSYNC_PURE", "") not in ("", "0")


def compiled(module: str) -> ModuleType | None:
    """The compiled extension ``module``, or ``None`` when it is not built or not wanted."""
    if pure_forced():
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
