"""The compiled codec core: a Cython extension, optional so that an install without a C
compiler (or without Cython) still works on the pure-Python codec (patchsync/codec/backend.py).

Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that reports a failed build instead of failing the install."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers: the pure codec remains
            print(f"patchsync: compiled codec core not built ({exc}); using the pure-Python codec")

    def build_extension(self, ext: object) -> None:
        try:
            super().build_extension(ext)  # type: ignore[arg-type]
        except Exception as exc:
            print(f"patchsync: compiled codec core not built ({exc}); using the pure-Python codec")


def extensions() -> list[object]:
    try:
        from Cython.Build import cythonize
    except ImportError:  # building from a checkout without Cython: pure Python only
        return []
    from setuptools import Extension

    modules = [Extension("patchsync.codec._native", ["patchsync/codec/_native.pyx"], optional=True)]
    # The generated C goes to build/, not beside the .pyx: inside the package directory
    # setuptools would ship it in the wheel as package data (1.5 MB nobody needs).
    return list(cythonize(modules, compiler_directives={"language_level": "3"}, quiet=True, build_dir="build/cython"))


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
