# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The SQL target's compiled speed-ups: the term dictionary's hash and its loops over quads.

An extension of its own, built beside the code it speeds up (``setup.py``), so the codec's
extension holds codec code only and each is held to its layer's imports
(tests/test_layering.py). Optional like the codec's: without a compiler, or with
``PATCHSYNC_PURE=1``, ``schema.py`` and ``term_keys.py`` use their Python functions, which
are the reference (tests/test_native_hash.py, tests/test_native_keys.py); the choice is made
in ``speedups.py``.
"""

# BLAKE2b-64 of a term's text: schema.term_hash.
include "_native_hash.pxi"
# Quads to term-id keys: term_keys.split_keys, fill_keys, store_keys, split_new.
include "_native_keys.pxi"
