"""The package's layering, pinned (docs/architecture.md, "Layers").

Every ``import`` inside ``patchsync`` is read from the source (also those inside functions,
which still tie two modules together), and checked against the layer table: a module imports
only its own package's modules and layers below its own. The codec in particular imports
nothing above the term layer, so it stays pure (bytes in, events out). No module may take
part in an import cycle, and none may grow past 600 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "patchsync"

#: Layer of each top-level part of the package; a part imports only parts of lower layers.
LAYERS: dict[str, int] = {
    "_proto": 0,
    "errors": 0,
    "_lazy": 0,
    "options": 1,
    "events": 2,
    "units": 3,
    "formats": 3,
    "terms": 4,
    "codec": 5,
    "logs": 6,
    "streams": 6,
    "sources": 7,
    "apply": 8,
    "capture": 8,
    "conformance": 8,
    "plugins": 8,
    "tail": 9,
    "spark": 9,
    "cli": 10,
    "__main__": 11,
}

MAX_LINES = 600
MAX_ROOT_MODULES = 8


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "_proto" not in p.parts}


def _imports(name: str, path: Path) -> set[str]:
    """The patchsync modules ``name`` imports (``from X import y`` counts ``X.y`` if it is a module)."""
    modules = _modules()
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def test_imports_go_down_the_layers() -> None:
    wrong: list[str] = []
    for module, deps in _graph().items():
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
    assert not wrong, "imports that go up or sideways:\n" + "\n".join(sorted(wrong))


def test_the_codec_imports_only_the_layers_below_it() -> None:
    allowed = {"_proto", "errors", "options", "events", "units", "terms", "codec"}
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


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_over_600_lines(name: str) -> None:
    lines = len(_modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name} has {lines} lines; split it by what it holds"


MAX_PRIVATE_READS = 10


def _private_reads() -> list[str]:
    """Reads of another object's private attributes (``x._y``; not ``self``/``cls``, dunders,
    or namedtuple's public ``_replace``)."""
    found = []
    for name, path in _modules().items():
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
