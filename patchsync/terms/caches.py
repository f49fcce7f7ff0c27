"""Bounds and shared tables of the term caches, read by the pure code and the compiled codec core.

The compiled codec core (``patchsync/codec/_native.pyx``) builds and caches terms as the pure
codec does, and must keep the same bounds and read the same N-Triples suffix tables, or the two
paths would drop their caches at different points or format literals differently. Each value
is defined once here and both paths import it by its public name.

Why in ``terms/``: the lowest layer that uses any of these is the term layer itself
(``terms/ntriples.py`` fills the suffix tables), and the codec sits above it, so only a module
at the term layer (or below) can be imported by both; everything here bounds a cache of terms
or term text, which is this layer's subject. The module holds values only, no logic, so it
adds no dependency to the term layer.
"""

from __future__ import annotations

__all__ = [
    "DATATYPE_SUFFIX",
    "DECODER_CACHE_LIMIT",
    "ENCODER_CACHE_CHARS",
    "ENCODER_CACHE_LIMIT",
    "ENCODER_ENTRY_CHARS",
    "LANG_SUFFIX",
    "NEW_CACHE_CHARS",
]

#: Entries a decoder's term cache (one per kind, language tag or datatype) may hold before it
#: is cleared.
DECODER_CACHE_LIMIT = 1 << 16
#: What a decoder's new per-tag or per-datatype cache (an empty dict) costs besides its key,
#: in characters' worth, counted against the decoder's text budget.
NEW_CACHE_CHARS = 256

#: Entries an encoder's caches (IRI splits, unpacked terms) may hold before they are cleared.
ENCODER_CACHE_LIMIT = 1 << 16
#: Characters of term text the encoder's caches (IRI splits, unpacked terms, the identity
#: cache) may keep alive together before all of them are dropped at once. The count limit
#: alone bounds entries, not bytes: 65,536 literals or IRIs of kilobytes each would stay for
#: the whole stream (GBs for a producer of long texts). Typical terms reach the count limit first.
ENCODER_CACHE_CHARS = 1 << 23
#: What an encoder's cache entry costs besides its text (dict slot, tuple), in characters' worth.
ENCODER_ENTRY_CHARS = 16

#: N-Triples literal suffixes already checked and escaped: language tag -> ``"@" + tag``,
#: datatype IRI -> ``"^^<...>"``. Filled and bounded by ``terms/ntriples.py``; the compiled
#: core only reads them (a hit spares it a call into the adapter). Few distinct tags and
#: datatypes occur, and checking or escaping them once per literal would dominate the cost of
#: building N-Triples literal strings. The tables are cleared, never rebound, so every reader
#: holds the live table.
LANG_SUFFIX: dict[str, str] = {}
DATATYPE_SUFFIX: dict[str, str] = {}
