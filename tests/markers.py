"""Which kind of test each test is, decided from what it uses (tests/README.md has the table).

``conftest.py`` calls :func:`kinds` for every collected test and adds the markers it
returns, so a new test is marked without anyone remembering to: a test asking for a
PostgreSQL, NATS, Spark or SPARQL store fixture needs that service (``integration``); a test whose code,
or a helper from ``tests/`` it calls, starts a child process is end to end (``e2e``);
everything else runs inside the pytest process alone (``unit``). Markers written on a test
by hand (``postgres``, ``serial``, ``slow``) are kept and count the same.
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

#: Fixtures that connect to a service, by the marker they give.
SERVICE_FIXTURES: dict[str, frozenset[str]] = {
    "postgres": frozenset({"pg_database", "pg_url"}),
    "nats": frozenset({"nats_server", "nats_stream", "nats_server_binary"}),
    "spark": frozenset({"spark"}),
    "sparql": frozenset({"oxigraph_server", "oxigraph_binary", "virtuoso_server", "virtuoso_binary", "sparql_server"}),
}

#: ``os`` functions that start a process (``subprocess`` and ``multiprocessing`` count whole).
_OS_SPAWNS = frozenset({"system", "popen", "posix_spawn", "posix_spawnp", "fork", "execv", "execvp"})
_PROCESS_MODULES = frozenset({"subprocess", "multiprocessing"})


def kinds(item: pytest.Item) -> set[str]:
    """The markers ``item`` gets: services it uses, ``integration``, ``e2e``, or ``unit``."""
    marked = {m.name for m in item.iter_markers()}
    fixtures = set(getattr(item, "fixturenames", ()))
    found = {name for name, needs in SERVICE_FIXTURES.items() if fixtures & needs or name in marked}
    if found:
        found.add("integration")
    if "e2e" in marked or _starts_a_process(item):
        found.add("e2e")
    if not found:
        found.add("unit")
    return found


def _starts_a_process(item: pytest.Item) -> bool:
    func = getattr(item, "obj", None)
    if func is None:
        return False
    roots: list[Any] = [_unwrap(func)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        roots += [d.func for d in defs if _ours(d.func)]
    seen: set[int] = set()
    return any(_spawns(root, seen) for root in roots)


def _unwrap(func: Any) -> Any:
    func = getattr(func, "__func__", func)
    inner = getattr(getattr(func, "hypothesis", None), "inner_test", None)
    return inspect.unwrap(inner or func)


def _ours(obj: Any) -> bool:
    """Whether ``obj`` is defined in ``tests/`` (only our own helpers are looked into)."""
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None) or ""
    return module == "tests" or module.startswith("tests.")


def _spawns(obj: Any, seen: set[int]) -> bool:
    """Whether ``obj`` (a function or class of ours) reaches a process-starting call."""
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, type):
        methods = [v for klass in obj.__mro__ if _ours(klass) for v in vars(klass).values()]
        return any(_spawns(_unwrap(v), seen) for v in methods if callable(v) and _ours(_unwrap(v)))
    func = _unwrap(obj)
    code = getattr(func, "__code__", None)
    if code is None:
        return False
    scope: dict[str, Any] = dict(getattr(func, "__globals__", {}))
    for cell_name, cell in zip(code.co_freevars, func.__closure__ or (), strict=False):
        try:
            scope[cell_name] = cell.cell_contents
        except ValueError:  # an empty cell: the closure variable is not bound yet
            continue
    for codeobj in _codes(code):
        attrs = set(codeobj.co_names)
        for name in (*codeobj.co_names, *codeobj.co_freevars):
            if _is_spawn(scope.get(name), attrs):
                return True
            value = scope.get(name)
            if isinstance(value, types.ModuleType) and _ours(value):
                # ``helpers.run_cli(...)``: the module's functions named in this code
                if any(_spawns(getattr(value, a), seen) for a in attrs if _ours(getattr(value, a, None))):
                    return True
            elif _ours(value) and (inspect.isfunction(value) or isinstance(value, type)) and _spawns(value, seen):
                return True
    return False


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """A code object and the ones nested in it (lambdas, inner functions, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _is_spawn(value: Any, attrs: set[str]) -> bool:
    if isinstance(value, types.ModuleType):
        if value.__name__ in _PROCESS_MODULES:
            return True
        return value is os and bool(attrs & _OS_SPAWNS)
    module = getattr(value, "__module__", None) or ""
    if module.split(".")[0] in _PROCESS_MODULES:
        return True
    return value in _os_spawn_functions()


def _os_spawn_functions() -> list[Callable[..., Any]]:
    return [getattr(os, name) for name in sorted(_OS_SPAWNS) if hasattr(os, name)]
