"""The ``patchsync`` command line (see :mod:`patchsync.cli.main`)."""

from patchsync.cli.main import main

__all__ = ["main"]
