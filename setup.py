"""The compiled extensions, one per layer that has one, each optional: an install without a C
compiler (or without Cython) still works on the pure-Python code they speed up.

- ``patchsync.codec._native``: the codec core (``patchsync/codec/backend.py`` chooses it);
- ``patchsync.apply.targets.sql._native``: the SQL target's term dictionary hash and loops
  (``patchsync/apply/targets/sql/speedups.py`` chooses it).

A failed build of either leaves that layer on its Python code and does not stop the other.
Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_ext import build_ext

#: Extension module -> its Cython source (the .pxi files it includes sit beside it).
EXTENSIONS = {
    "patchsync.codec._native": "patchsync/codec/_native.pyx",
    "patchsync.apply.targets.sql._native": "patchsync/apply/targets/sql/_native.pyx",
}


class OptionalBuildExt(build_ext):
    """``build_ext`` that reports a failed build instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers: the pure-Python code remains
            print(f"patchsync: compiled extensions not built ({exc}); using the pure-Python code")

    def build_extension(self, ext: object) -> None:
        try:
            super().build_extension(ext)  # type: ignore[arg-type]
        except Exception as exc:
            name = getattr(ext, "name", ext)
            print(f"patchsync: compiled extension {name} not built ({exc}); using the pure-Python code")


def extensions() -> list[object]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # building from a checkout without Cython: pure Python only
        return []
    from setuptools import Extension

    modules = [Extension(name, [source], optional=True) for name, source in EXTENSIONS.items()]
    # The generated C goes to build/, not beside the .pyx: inside the package directory
    # setuptools would ship it in the wheel as package data (1.5 MB nobody needs).
    return list(cythonize(modules, compiler_directives={"language_level": "3"}, quiet=True, build_dir="build/cython"))


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
