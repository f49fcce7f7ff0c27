"""Coverage-guided fuzzing of the decoders (issue #8, item 1).

* :mod:`.targets` holds the fuzz targets: plain functions from bytes to ``None`` that raise
  :class:`~tests.fuzz.targets.InvariantBroken` (or let any non-``PatchsyncError`` exception
  escape) when an input breaks the contract "decode, or raise the project's error type".
* :mod:`.corpus` builds each target's seed corpus at run time from the conformance suites.
* :mod:`.run` is the process entry point that hands a target to atheris/libFuzzer, or
  replays saved inputs without atheris (``--plain``) to reproduce a crash.

``scripts/fuzz.py`` drives long local runs; ``tests/test_fuzz_smoke.py`` is the CI smoke run.
"""
