"""Lazy package attributes, so importing a package does not import every module it exports.

``patchsync``, ``patchsync.apply`` and ``patchsync.tail`` export names whose modules are
costly to import (rdflib, SQLAlchemy, the applier); commands that need none of them start
faster when those load on first use (pinned by ``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], object]:
    """A module-level ``__getattr__`` for ``package`` resolving ``name`` from ``modules[name]``."""

    def __getattr__(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
