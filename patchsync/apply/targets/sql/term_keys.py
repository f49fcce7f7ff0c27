"""The term dictionary's loops over quads: quads to (s, p, o, g) term-id keys.

Every quad applied to a SQL target goes through one of these, so they run in C
when the SQL speed-ups are built (``_native_keys.pxi`` beside this module) and as the Python
functions here otherwise; these are the reference, and tests/test_native_keys.py holds
both to the same results. A quad is a 4-tuple of N-Triples texts whose graph is ``None``
or ``""`` for the default graph, stored as ``""``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from patchsync.apply.target import Quad
from patchsync.apply.targets.sql import speedups


def split_keys_pure(quads: Sequence[Quad], ids: dict[str, int]) -> tuple[list[Any], list[int], dict[str, None]]:
    """(keys, misses, unknown): each quad's cached ids (a None in the tuple for a term not
    in ``ids``), the positions of the keys with a None, and the terms not in ``ids`` in the
    order met (a dict used as an ordered set)."""
    get = ids.get
    keys: list[Any] = []
    misses: list[int] = []
    unknown: dict[str, None] = {}
    for s, p, o, g in quads:
        terms = (s, p, o, g or "")
        key = tuple(map(get, terms))
        if None in key:
            misses.append(len(keys))
            for term, term_id in zip(terms, key, strict=True):
                if term_id is None:
                    unknown[term] = None
        keys.append(key)
    return keys, misses, unknown


def fill_keys_pure(quads: Sequence[Quad], keys: list[Any], misses: list[int], ids: dict[str, int]) -> None:
    """Set ``keys[i]`` for each ``i`` in ``misses`` from ``ids`` again: None if a term is still missing."""
    get = ids.get
    for i in misses:
        s, p, o, g = quads[i]
        key = (get(s), get(p), get(o), get(g or ""))
        keys[i] = None if None in key else key


def store_keys_pure(quads: Sequence[Quad], ids: dict[str, int], next_id: int, new: list[str]) -> tuple[list[Any], int]:
    """(keys, next id): each quad's ids, a term not in ``ids`` getting ``next_id`` and the
    ids after it in the order met (added to ``ids``, appended to ``new``)."""
    get = ids.get
    keys: list[Any] = []
    for s, p, o, g in quads:
        key = []
        for term in (s, p, o, g or ""):
            term_id = get(term)
            if term_id is None:
                ids[term] = term_id = next_id
                next_id += 1
                new.append(term)
            key.append(term_id)
        keys.append(tuple(key))
    return keys, next_id


def split_new_pure(keys: list[Any], first_new: int) -> tuple[list[int], list[Any]]:
    """(old, new): the positions of the keys whose four ids are all below ``first_new``, and
    the other keys, in order (a key with an id handed out from ``first_new`` on is new)."""
    old: list[int] = []
    new: list[Any] = []
    for i, key in enumerate(keys):
        if max(key) < first_new:
            old.append(i)
        else:
            new.append(key)
    return old, new


SplitKeys = Callable[[Sequence[Quad], dict[str, int]], tuple[list[Any], list[int], dict[str, None]]]
FillKeys = Callable[[Sequence[Quad], list[Any], list[int], dict[str, int]], None]
StoreKeys = Callable[[Sequence[Quad], dict[str, int], int, list[str]], tuple[list[Any], int]]
SplitNew = Callable[[list[Any], int], tuple[list[int], list[Any]]]

_core = speedups.native()
#: The functions the dictionary uses: compiled when the speed-ups are built and not disabled.
split_keys: SplitKeys = split_keys_pure if _core is None else cast("SplitKeys", _core.split_keys)
fill_keys: FillKeys = fill_keys_pure if _core is None else cast("FillKeys", _core.fill_keys)
store_keys: StoreKeys = store_keys_pure if _core is None else cast("StoreKeys", _core.store_keys)
split_new: SplitNew = split_new_pure if _core is None else cast("SplitNew", _core.split_new)

__all__ = [
    "fill_keys",
    "fill_keys_pure",
    "split_keys",
    "split_keys_pure",
    "split_new",
    "split_new_pure",
    "store_keys",
    "store_keys_pure",
]
