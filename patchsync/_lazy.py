"""What is imported on first use: lazy package attributes, registered loaders, optional
dependencies and the optional compiled extensions.

``patchsync``, ``patchsync.apply`` and ``patchsync.tail`` export names whose modules are
costly to import (rdflib, SQLAlchemy, the applier); commands that need none of them start
faster when those load on first use (pinned by ``tests/test_cli_startup.py``).

A registry's ``"module:attr"`` loader (targets, source kinds) is imported by :func:`load`;
there and in :func:`optional_dependency` blocks, an import that fails for want of an
optional dependency becomes the one line naming the extra that installs it
(:func:`patchsync.errors.missing_extra`, which the command line also applies to any import
that fails so).

The compiled extensions (the codec core, ``codec/_native.pyx``; the SQL target's speed-ups,
``apply/targets/sql/_native.pyx``) are built only where a C compiler was present, and the
environment variable ``PATCHSYNC_PURE`` (any value but ``""`` and ``"0"``) turns all of them
off at once. Each layer's loader (``codec/backend.py``, ``apply/targets/sql/speedups.py``)
asks :func:`compiled` here, so that rule is written once.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from importlib.util import find_spec
from types import ModuleType
from typing import Any

from patchsync.errors import missing_extra


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], object]:
    """A module-level ``__getattr__`` for ``package`` resolving ``name`` from ``modules[name]``."""

    def __getattr__(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


@contextmanager
def optional_dependency(what: str) -> Iterator[None]:
    """Run the block; an import in it that fails for want of an optional dependency raises the
    :class:`~patchsync.errors.UsageError` saying that ``what`` needs it and which extra installs it."""
    try:
        yield
    except ImportError as exc:
        error = missing_extra(exc, what)
        if error is None:
            raise
        raise error from exc


def require(modules: Iterable[str], what: str) -> None:
    """Check that the optional ``modules`` ``what`` needs are installed, without importing
    them (an import may have side effects the caller must set up first: gRPC's core reads
    its logging settings once, when it is imported)."""
    for module in modules:
        try:
            found = sys.modules[module] is not None if module in sys.modules else find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            error = missing_extra(ImportError(name=module), what)
            raise error if error is not None else ImportError(f"No module named {module!r}", name=module)


def load(loader: str, what: str) -> Any:
    """The attribute a ``"module:attr"`` loader names, its module imported on first use (a
    missing optional dependency: see :func:`optional_dependency`; ``what`` is who needs it)."""
    module_name, _, attr = loader.partition(":")
    with optional_dependency(what):
        module = importlib.import_module(module_name)
    return getattr(module, attr)


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
