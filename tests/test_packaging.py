"""The package as users install it: a wheel built from the tracked files, with and without a compiler.

Issue #13: the compiled core is built by ``pip install .`` when a C compiler is present, and
an install without one still works on the pure-Python codec. Both wheels are built here from
a copy of the files git tracks (so nothing built in place in the checkout leaks in), installed
into a directory of their own and imported from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")


def _tracked_copy(dest: Path) -> Path:
    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    )
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _build_wheel(tmp_path: Path, env: dict[str, str]) -> Path:
    src = _tracked_copy(tmp_path / "src")
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        env=env,
    )
    (wheel,) = out.glob("patchsync-*.whl")
    return wheel


def _installed_backend(tmp_path: Path, wheel: Path) -> str:
    """Which codec the installed wheel picks, imported from the install directory (not the checkout)."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import patchsync, patchsync.codec.backend as b\n"
        "from patchsync.codec.patch_decoder import PatchDecoder\n"
        f"assert patchsync.__file__.startswith({str(target)!r}), patchsync.__file__\n"
        "d = PatchDecoder()\n"
        "print('native' if b.native() is not None else 'pure')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PATCHSYNC_PURE"}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, env=env, cwd=tmp_path
    )
    return done.stdout.strip()


def test_wheel_carries_the_compiled_core_and_no_build_intermediates(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path, dict(os.environ))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("patchsync/codec/_native.") and n.endswith(".so") for n in names), names
    assert not [n for n in names if n.endswith(".c")], "Cython's generated C is a build intermediate"
    for needed in ("patchsync/py.typed", "patchsync/codec/_native.pyi", "patchsync/_proto/patch_pb2.py"):
        assert needed in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "patchsync = " in text and "patchsync-rdf-thrift" in text
    assert _installed_backend(tmp_path, wheel) == "native"


def test_wheel_without_a_compiler_installs_the_pure_codec(tmp_path: Path) -> None:
    # A compiler that always fails stands for a machine without one: setup.py must report
    # it and build the wheel anyway, which then runs on the pure-Python codec.
    env = dict(os.environ, CC="false", LDSHARED="false")
    wheel = _build_wheel(tmp_path, env)
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")], names
    assert _installed_backend(tmp_path, wheel) == "pure"
