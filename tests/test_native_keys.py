"""The compiled loops of the SQL term dictionary against the Python ones (issue #14).

``patchsync/apply/targets/sql/term_keys.py`` holds the reference loops that turn quads
into term-id keys; ``patchsync/apply/targets/sql/_native_keys.pxi`` holds their compiled
copies (the SQL target's own extension), which the dictionary uses when it is built. A copy that differed would store a quad under
the wrong ids or store a term twice, so both are run here on the same random batches and
must agree on every output and on what they do to the cache.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply.targets.sql import _native, term_keys
from patchsync.codec import backend

TERMS = [f"<http://example.org/t{i}>" for i in range(40)] + ['"x"', '"é"@fr', "_:b1", "<< <a> <b> <c> >>"]
GRAPHS: list[Any] = [None, "", "<http://example.org/g1>", "<http://example.org/g2>"]


def _batch(rng: random.Random, size: int) -> list[tuple[Any, Any, Any, Any]]:
    # Few terms, so a term recurs within a quad and across quads (first-seen order matters).
    return [(rng.choice(TERMS), rng.choice(TERMS), rng.choice(TERMS), rng.choice(GRAPHS)) for _ in range(size)]


def _cache(rng: random.Random) -> dict[str, int]:
    known = rng.sample([*TERMS, ""], rng.randrange(len(TERMS) + 2))
    return {t: rng.randrange(1, 1 << 40) for t in known}


@pytest.mark.parametrize("seed", range(60))
def test_split_and_fill_agree(seed: int) -> None:
    rng = random.Random(seed)
    quads = _batch(rng, rng.randrange(0, 60))
    ids = _cache(rng)
    native = _native.split_keys(quads, dict(ids))
    pure = term_keys.split_keys_pure(quads, dict(ids))
    assert native == pure
    # Key order of the unknown terms is the order they were met (the lookups follow it).
    assert list(native[2]) == list(pure[2])
    # The misses filled from a cache that now has some of the unknown terms.
    later = {**ids, **{t: i for i, t in enumerate(pure[2]) if rng.random() < 0.7}}
    keys_native, keys_pure = list(native[0]), list(pure[0])
    _native.fill_keys(quads, keys_native, native[1], later)
    term_keys.fill_keys_pure(quads, keys_pure, pure[1], later)
    assert keys_native == keys_pure
    assert all(k is None or None not in k for i, k in enumerate(keys_pure) if i in pure[1])


@pytest.mark.parametrize("seed", range(60))
def test_store_agrees(seed: int) -> None:
    rng = random.Random(seed)
    quads = _batch(rng, rng.randrange(0, 60))
    ids = _cache(rng)
    first = rng.choice([1, 1000, (1 << 40) + 7])
    ids_native, ids_pure = dict(ids), dict(ids)
    new_native: list[str] = []
    new_pure: list[str] = []
    got_native = _native.store_keys(quads, ids_native, first, new_native)
    got_pure = term_keys.store_keys_pure(quads, ids_pure, first, new_pure)
    assert got_native == got_pure
    assert new_native == new_pure and ids_native == ids_pure
    # Every new term got the next id in the order met, and every key is complete.
    assert [ids_pure[t] for t in new_pure] == list(range(first, got_pure[1]))
    assert all(None not in key for key in got_pure[0])


@pytest.mark.parametrize("seed", range(40))
def test_split_new_agrees(seed: int) -> None:
    rng = random.Random(seed)
    first = rng.choice([1, 30, (1 << 40) + 7])
    # Ids on both sides of the first new one, and on it (the first new id is new).
    near = [1, first - 1, first, first + 1, (1 << 41)]
    keys = [tuple(rng.choice(near) for _ in range(4)) for _ in range(rng.randrange(0, 60))]
    native = _native.split_new(keys, first)
    assert native == term_keys.split_new_pure(keys, first)
    old, new = native
    assert [keys[i] for i in old] == [k for k in keys if all(x < first for x in k)]
    assert new == [k for k in keys if any(x >= first for x in k)]


def test_a_graph_of_none_and_the_empty_graph_are_one_term() -> None:
    # Both spell the default graph, stored as "" (schema.py): one term, one id.
    quads = [("<s>", "<p>", "<o>", None), ("<s>", "<p>", "<o>", "")]
    for store in (_native.store_keys, term_keys.store_keys_pure):
        new: list[str] = []
        keys, next_id = store(quads, {}, 1, new)
        assert new == ["<s>", "<p>", "<o>", ""] and keys == [(1, 2, 3, 4), (1, 2, 3, 4)] and next_id == 5


def test_the_dictionary_uses_the_compiled_loops_unless_told_not_to() -> None:
    expected = (
        (term_keys.split_keys_pure, term_keys.store_keys_pure, term_keys.split_new_pure)
        if backend.pure_forced()
        else (
            _native.split_keys,
            _native.store_keys,
            _native.split_new,
        )
    )
    assert (term_keys.split_keys, term_keys.store_keys, term_keys.split_new) == expected


@pytest.mark.parametrize(
    ("env", "code", "codec"),
    [
        ({"PATCHSYNC_PURE": "1"}, "", "None"),
        # An install where this extension failed to build: simulated by blocking it. The
        # codec core, built on its own, is still used.
        (
            {"PATCHSYNC_PURE": ""},
            "import sys; sys.modules['patchsync.apply.targets.sql._native'] = None; ",
            "patchsync.codec._native",
        ),
    ],
    ids=["PATCHSYNC_PURE", "not-built"],
)
def test_the_python_loops_and_hash_are_the_fallback(env: dict[str, str], code: str, codec: str) -> None:
    root = Path(__file__).resolve().parents[1]
    script = (
        "from patchsync.apply.targets.sql import schema, term_keys as k; "
        "from patchsync.codec import backend; "
        "print(k.split_keys is k.split_keys_pure, k.fill_keys is k.fill_keys_pure, "
        "k.store_keys is k.store_keys_pure, schema.term_hash is schema.term_hash_pure, "
        "getattr(backend.native(), '__name__', None))"
    )

    def chosen(prefix: str, extra: dict[str, str]) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-c", prefix + script],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root), **extra},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert chosen(code, env) == ["True"] * 4 + [codec]
    # ...while by default both compiled extensions are chosen.
    assert chosen("", {"PATCHSYNC_PURE": ""}) == ["False"] * 4 + ["patchsync.codec._native"]
