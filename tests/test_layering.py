"""The package's layering, pinned (docs/architecture.md, "Layers").

Every ``import`` inside ``patchsync`` is read from the source (also those inside functions,
which still tie two modules together), and checked against the layer table: a module imports
only its own package's modules and layers below its own. The codec in particular imports
nothing above the unit layer, so it stays pure (bytes in, events out). No module may take
part in an import cycle, and none may grow past 600 lines.

A compiled extension is a module too: its ``.pyx`` and the ``.pxi`` files it includes
are read for ``import``, ``from ... import``, ``cimport`` and ``from ... cimport``, so the
compiled code of a layer is held to the same table as its Python code.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "patchsync"

#: Layer of each top-level part of the package; a part imports only parts of lower layers.
LAYERS: dict[str, int] = {
    "_proto": 0,
    "errors": 0,
    "_lazy": 1,
    "options": 1,
    "events": 2,
    "units": 4,
    "formats": 3,
    "chains": 4,
    "terms": 3,
    "codec": 5,
    "logs": 6,
    "remote": 7,
    "nats": 8,
    "sources": 9,
    "apply": 10,
    "capture": 10,
    "conformance": 10,
    "plugins": 10,
    "tail": 11,
    "spark": 11,
    "serve": 11,
    "ingest": 11,
    "cli": 12,
    "__main__": 13,
}

MAX_LINES = 600
MAX_ROOT_MODULES = 8


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the package: its ``.py`` files and the ``.pyx`` of its compiled extensions."""
    paths = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")])
    return {_module_name(p): p for p in paths if "_proto" not in p.parts}


def _cython_statements(path: Path) -> list[ast.stmt]:
    """The import statements of a Cython file and of the ``.pxi`` files it includes, as Python's
    ``ast`` (``cimport`` read as ``import``: either ties the extension to that module).

    Cython is not Python, but it is made of Python's tokens: a logical line that starts with
    ``import``, ``from`` or ``cimport`` is an import (``cdef extern from`` starts with ``cdef``;
    docstrings and C code are string tokens), and ``include "x.pxi"`` inlines that file.
    """
    statements: list[ast.stmt] = []
    line: list[str] = []
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT)
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type in skipped:
            continue
        if token.type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
            line.append(token.string)
            continue
        words, line = line, []
        if words[:1] == ["include"]:
            statements += _cython_statements(path.parent / ast.literal_eval(words[1]))
        elif words[:1] in (["import"], ["cimport"], ["from"]):
            text = " ".join("import" if w == "cimport" else w for w in words)
            statements += ast.parse(text, str(path)).body
    return statements


def _included(pyx: Path) -> set[Path]:
    """The ``.pxi`` files ``pyx`` includes."""
    found: set[Path] = set()
    for line in pyx.read_text().splitlines():
        words = line.split()
        if words[:1] == ["include"]:
            found.add(pyx.parent / ast.literal_eval(words[1]))
    return found


def _imports(name: str, path: Path) -> set[str]:
    """The patchsync modules ``name`` imports (``from X import y`` counts ``X.y`` if it is a module)."""
    modules = _modules()
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    tree = ast.Module(_cython_statements(path), []) if path.suffix == ".pyx" else ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
        found.update(t for t in targets if t == "patchsync" or t.startswith("patchsync."))
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    return {name: _imports(name, path) for name, path in _modules().items()}


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_part_has_a_layer() -> None:
    parts = {_part(m) for m in _modules()} - {None}
    assert parts <= set(LAYERS), f"give these a layer: {sorted(parts - set(LAYERS))}"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that go up or sideways."""
    wrong: list[str] = []
    for module, deps in graph.items():
        part = _part(module)
        if part is None:  # the curated API in patchsync/__init__.py may name any layer but cli
            wrong += [f"patchsync -> {d}" for d in deps if _part(d) in ("cli", "__main__")]
            continue
        for dep in deps:
            dep_part = _part(dep)
            if dep_part == part:
                continue
            if dep_part is None:
                # only the command line reads the root package (for __version__)
                if part not in ("cli", "__main__"):
                    wrong.append(f"{module} -> patchsync")
            elif LAYERS[dep_part] >= LAYERS[part]:
                wrong.append(f"{module} -> {dep}")
    return wrong


def test_imports_go_down_the_layers() -> None:
    wrong = _upward(_graph())
    assert not wrong, "imports that go up or sideways:\n" + "\n".join(sorted(wrong))


def test_a_compiled_extension_is_held_to_the_layers(tmp_path: Path) -> None:
    # An extension of the codec that cimports from the SQL layer inside a .pxi it includes,
    # and imports from it in a parenthesized, indented statement: both are upward imports.
    codec = tmp_path / "patchsync" / "codec"
    codec.mkdir(parents=True)
    (codec / "_core.pyx").write_text(
        '# cython: language_level=3\n"""from patchsync.cli import main (a docstring, not an import)"""\n'
        'cdef extern from "Python.h":\n    int Py_IsNone(object o)\n'
        'include "_core_sql.pxi"\n'
    )
    (codec / "_core_sql.pxi").write_text(
        "from patchsync.apply.targets.sql._native cimport term_hash\n"
        "def f():\n    from patchsync.apply.targets.sql.schema import (\n        term_hash_pure,\n    )\n"
    )
    deps = _imports("patchsync.codec._core", codec / "_core.pyx")
    assert deps == {"patchsync.apply.targets.sql._native", "patchsync.apply.targets.sql.schema"}
    assert sorted(_upward({"patchsync.codec._core": deps})) == [f"patchsync.codec._core -> {d}" for d in sorted(deps)]


def test_every_pxi_belongs_to_an_extension() -> None:
    # A .pxi is read as part of the .pyx that includes it; one included by none is not checked.
    included = {p for pyx in PACKAGE.rglob("*.pyx") for p in _included(pyx)}
    assert set(PACKAGE.rglob("*.pxi")) == included
    assert all(p.is_file() for p in included)


def test_compiled_code_imports_no_private_names() -> None:
    # What the compiled core shares with the pure code is public, so a rename on one side
    # cannot leave the other reading a stale private name.
    wrong = [
        f"{name}: from {node.module} import {alias.name}"
        for name, path in _modules().items()
        if path.suffix == ".pyx"
        for node in _cython_statements(path)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("patchsync")
        for alias in node.names
        if alias.name.startswith("_") and f"{node.module}.{alias.name}" not in _modules()
    ]
    assert not wrong, wrong


def test_the_codec_imports_only_the_layers_below_it() -> None:
    # _lazy: the one rule for choosing a compiled extension (PATCHSYNC_PURE, not built).
    allowed = {"_proto", "errors", "_lazy", "options", "events", "units", "terms", "codec"}
    graph = _graph()
    codec = {m: d for m, d in graph.items() if _part(m) == "codec"}
    assert codec, "no codec modules found"
    wrong = [f"{m} -> {d}" for m, deps in codec.items() for d in deps if _part(d) not in allowed]
    assert not wrong, wrong


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles() -> None:
    assert not _cycles(_graph()), f"import cycles: {_cycles(_graph())}"


def test_the_cycle_check_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _sources() -> dict[str, Path]:
    """Every source file of the package by its path: ``.py``, ``.pyx`` and ``.pxi``."""
    paths = [*_modules().values(), *PACKAGE.rglob("*.pxi")]
    return {str(p.relative_to(PACKAGE.parent)): p for p in sorted(paths)}


@pytest.mark.parametrize("name", sorted(_sources()))
def test_no_module_over_600_lines(name: str) -> None:
    lines = len(_sources()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by what it holds"


MAX_PRIVATE_READS = 10


def _private_reads() -> list[str]:
    """Reads of another object's private attributes (``x._y``; not ``self``/``cls``, dunders,
    or namedtuple's public ``_replace``)."""
    found = []
    for name, path in _modules().items():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)):
                continue
            attr, value = node.attr, node.value
            if not attr.startswith("_") or attr.startswith("__") or attr == "_replace":
                continue
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_few_reads_of_private_attributes() -> None:
    # Each left is a library without a public way (rdflib's namespace removal, its canonical
    # blank node mapping, its Turtle parser's prefixes); the count may only go down.
    found = _private_reads()
    assert len(found) <= MAX_PRIVATE_READS, "\n".join(found)


def test_a_small_package_root() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_relative_imports_resolve_like_absolute_ones() -> None:
    # _imports must see ``from . import x`` too: check it on a module that uses the form.
    assert _imports("patchsync.cli", PACKAGE / "cli" / "__init__.py") >= {"patchsync.cli.main"}
