"""The target registry: schemes to lazily loaded target classes, one error for unknown ones."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import patchsync
from patchsync.apply import CAN_DUMP, MemoryTarget, capabilities_of, register_target, target_schemes
from patchsync.apply.api import open_target
from patchsync.apply.dump import write_dump
from patchsync.apply.registry import _TARGETS
from patchsync.apply.target import CAPABILITIES
from patchsync.apply.targets.sql import SqlTarget
from patchsync.errors import UsageError


def test_the_public_open_target_is_the_registry_one() -> None:
    assert patchsync.open_target is open_target
    from patchsync.apply import registry

    assert registry.open_target is open_target


def test_builtin_schemes_are_registered() -> None:
    assert {"sqlite", "postgresql", "postgresql+psycopg", "file", "oxigraph", "memory"} <= set(target_schemes())


@pytest.mark.parametrize("spec", ["state.db", "mysql://u@h/db", "nats://h/subject", "", "ftp:x"])
def test_an_unknown_scheme_fails_listing_the_known_ones(spec: str) -> None:
    with pytest.raises(UsageError, match="unknown target") as err:
        open_target(spec)
    for scheme in ("sqlite:", "postgresql+psycopg:", "file:", "oxigraph:", "memory:"):
        assert scheme in str(err.value)
    assert "\n" not in str(err.value)


def test_memory_opens_a_fresh_target_and_takes_no_path() -> None:
    first, second = open_target("memory:"), open_target("memory:")
    assert isinstance(first, MemoryTarget) and first is not second
    with pytest.raises(UsageError, match="takes no path"):
        open_target("memory:x")


def test_sqlite_urls_get_the_whole_url(tmp_path: Path) -> None:
    target = open_target(f"sqlite:///{tmp_path / 's.db'}")
    try:
        assert isinstance(target, SqlTarget)
        assert CAN_DUMP in capabilities_of(target)
    finally:
        target.close()
    assert (tmp_path / "s.db").exists()


def test_a_sqlite_url_sqlalchemy_cannot_parse_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="cannot open target"):
        open_target("sqlite:relative.db")


def test_file_targets_get_the_path_after_the_scheme(tmp_path: Path) -> None:
    target = open_target(f"file:{tmp_path / 'out.nq'}")
    assert getattr(target, "path", None) == tmp_path / "out.nq"
    target.close()


@pytest.mark.parametrize(
    ("spec", "form"), [("oxigraph:", "oxigraph:DIR"), ("file:", "file:PATH.trig"), ("OXIGRAPH:", "oxigraph:DIR")]
)
@pytest.mark.parametrize("existing", [False, True])
def test_a_local_target_without_a_path_is_one_line(spec: str, form: str, existing: bool) -> None:
    with pytest.raises(UsageError, match=f"target '{spec}' names no path: write {form}"):
        open_target(spec, existing=existing)


def test_third_party_schemes_load_lazily(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ps_probe_target.py").write_text(
        "from patchsync.apply.targets.memory import MemoryTarget\n"
        "class ProbeTarget(MemoryTarget):\n"
        "    def __init__(self, rest, **options):\n"
        "        super().__init__()\n"
        "        self.rest, self.options = rest, options\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(_TARGETS, "probe", _TARGETS["memory"])  # restored after the test
    register_target("probe", "ps_probe_target:ProbeTarget")
    assert "ps_probe_target" not in sys.modules
    target = open_target("probe:a/b", x=1)
    assert "ps_probe_target" in sys.modules
    assert (type(target).__name__, getattr(target, "rest", None), getattr(target, "options", None)) == (
        "ProbeTarget",
        "a/b",
        {"x": 1},
    )
    monkeypatch.delitem(sys.modules, "ps_probe_target")


@pytest.mark.parametrize(("scheme", "loader"), [("x", "no_colon"), ("", "m:C"), ("a:b", "m:C"), ("x", "m:")])
def test_register_target_rejects_malformed_entries(scheme: str, loader: str) -> None:
    with pytest.raises(UsageError, match="register_target"):
        register_target(scheme, loader)


def test_the_registry_imports_no_backend() -> None:
    code = (
        "import sys, patchsync.apply.registry\n"
        "print(sorted(m for m in ('sqlalchemy', 'pyoxigraph', 'psycopg', 'rdflib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


_METHODS = {
    CAN_DUMP: ("quads", "namespaces", "sources"),
    "contains": ("contains",),
    "history": ("history",),
    "write_each": ("add_each", "delete_each"),
    "bulk_load": ("defer_indexes",),
    "write_later": ("add_each_later",),
}


@pytest.mark.parametrize("kind", ["memory", "sqlite", "file", "oxigraph"])
def test_declared_capabilities_are_backed_by_methods(kind: str, tmp_path: Path) -> None:
    if kind == "oxigraph":
        pytest.importorskip("pyoxigraph")
    spec = {
        "memory": "memory:",
        "sqlite": f"sqlite:///{tmp_path / 's.db'}",
        "file": f"file:{tmp_path / 'f.nq'}",
        "oxigraph": f"oxigraph:{tmp_path / 'ox'}",
    }[kind]
    target = open_target(spec)
    try:
        declared = capabilities_of(target)
        assert CAN_DUMP in declared
        assert declared <= CAPABILITIES
        for capability in declared:
            for method in _METHODS.get(capability, (capability,)):
                assert callable(getattr(target, method, None)), (kind, capability, method)
    finally:
        target.close()


def test_a_target_without_the_dump_capability_cannot_be_dumped() -> None:
    class Opaque(MemoryTarget):
        capabilities = frozenset()

    with pytest.raises(UsageError, match="Opaque targets cannot be dumped"):
        write_dump(Opaque(), "nq", io.BytesIO())
