"""The package as users install it: a wheel built from the tracked files, with and without a compiler.

Issue #13: the compiled extensions (the codec core; the SQL target's speed-ups, an extension
of their own) are built by ``pip install .`` when a C compiler is present, and an install
without one still works on the pure-Python code. The wheels are built here from a copy of the
files git tracks (so nothing built in place in the checkout leaks in), installed into a
directory of their own and imported from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files"),
    pytest.mark.slow,
]


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


def _build_wheel(tmp_path: Path, env: dict[str, str], edit: Callable[[Path], None] | None = None) -> Path:
    src = _tracked_copy(tmp_path / "src")
    if edit is not None:
        edit(src)
    out = tmp_path / "dist"
    # What is checked is which extensions build and load, not how fast they run: compiling
    # the generated C without optimisation takes a fraction of the time.
    env = {**env, "CFLAGS": f"{env.get('CFLAGS', '')} -O0".strip()}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        env=env,
    )
    (wheel,) = out.glob("patchsync-*.whl")
    return wheel


def _installed_backend(tmp_path: Path, wheel: Path) -> str:
    """Which code the installed wheel picks for the codec and for the SQL target ("native" or
    "pure" each), imported from the install directory (not the checkout), after a frame is
    decoded and the SQL target's term hash and loops have run on it."""
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = (
        "import hashlib, patchsync, patchsync.codec.backend as b\n"
        "from patchsync import Add, PatchEncoder\n"
        "from patchsync.apply.targets.sql import schema, speedups, term_keys\n"
        "from patchsync.codec.patch_decoder import PatchDecoder\n"
        "from patchsync.terms.ntriples import NTriplesTerms\n"
        f"assert patchsync.__file__.startswith({str(target)!r}), patchsync.__file__\n"
        "quad = ('<http://e/s>', '<http://e/p>', '\"o\"@en', None)\n"
        "enc = PatchEncoder(adapter=NTriplesTerms())\n"
        "enc.tx_start(); enc.add(*quad[:3]); enc.tx_commit(); enc.end_patch(); enc.finish()\n"
        "d = PatchDecoder(NTriplesTerms())\n"
        "d.feed(enc.take()); d.close()\n"
        "(event,) = [e for e in d if isinstance(e, Add)]\n"
        "keys, n = term_keys.store_keys([tuple(event)[:4]], {}, 1, [])\n"
        "assert (keys, n) == ([(1, 2, 3, 4)], 5), (keys, n)\n"
        "digest = hashlib.blake2b(quad[2].encode(), digest_size=8).digest()\n"
        "assert schema.term_hash(quad[2]) == int.from_bytes(digest, 'big', signed=True)\n"
        "print(*('native' if m is not None else 'pure' for m in (b.native(), speedups.native())))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PATCHSYNC_PURE"}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_wheel_carries_the_compiled_core_and_no_build_intermediates(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path, dict(os.environ))
    names = zipfile.ZipFile(wheel).namelist()
    for extension in ("patchsync/codec/_native.", "patchsync/apply/targets/sql/_native."):
        assert any(n.startswith(extension) and n.endswith(".so") for n in names), names
    assert not [n for n in names if n.endswith(".c")], "Cython's generated C is a build intermediate"
    for needed in (
        "patchsync/py.typed",
        "patchsync/codec/_native.pyi",
        "patchsync/apply/targets/sql/_native.pyi",
        "patchsync/apply/targets/sql/_native.pyx",
        "patchsync/apply/targets/sql/_native_keys.pxi",
        "patchsync/_proto/patch_pb2.py",
    ):
        assert needed in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "patchsync = " in text and "patchsync-rdf-thrift" in text
    assert _installed_backend(tmp_path, wheel) == "native native"


def test_wheel_without_a_compiler_installs_the_pure_codec(tmp_path: Path) -> None:
    # A compiler that always fails stands for a machine without one: setup.py must report
    # it and build the wheel anyway, which then runs on the pure-Python codec.
    env = dict(os.environ, CC="false", LDSHARED="false")
    wheel = _build_wheel(tmp_path, env)
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")], names
    assert _installed_backend(tmp_path, wheel) == "pure pure"


def test_one_extension_failing_to_build_leaves_the_other(tmp_path: Path) -> None:
    # C the compiler refuses, in the codec core only: setup.py must report it, build the SQL
    # target's extension anyway, and the install then runs a pure codec beside compiled SQL code.
    def break_the_codec_core(src: Path) -> None:
        pyx = src / "patchsync" / "codec" / "_native.pyx"
        pyx.write_text(pyx.read_text() + '\ncdef extern from *:\n    """\n    #error no codec core\n    """\n')

    wheel = _build_wheel(tmp_path, dict(os.environ), break_the_codec_core)
    names = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert len(names) == 1 and names[0].startswith("patchsync/apply/targets/sql/_native."), names
    assert _installed_backend(tmp_path, wheel) == "pure native"
