"""Seed corpora for the fuzz targets, read from the conformance suites at run time.

The upstream Jelly-RDF conformance files and the Jena-written patches are vendored in
``tests/data/upstream`` (see its README); the repository's own Jelly-Patch conformance suite
is in ``conformance/patch``.

Seeds are shaped for their target (see :mod:`.targets`): the decoder targets read a
two-byte split point before the stream, the apply target a one-byte format selector.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "data" / "upstream"
PATCH_SUITE = REPO / "conformance" / "patch"
RDF_SUITE = UPSTREAM / "jelly-rdf"
JVM_PATCHES = UPSTREAM / "jelly-jvm-patch"


def _files(root: Path, *patterns: str) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(p for p in root.glob(pattern) if p.is_file())
    return sorted(found)


def split_seed(data: bytes) -> bytes:
    """A decoder-target seed: the stream, split in its middle (little-endian u16 prefix)."""
    return (len(data) // 2 & 0xFFFF).to_bytes(2, "little") + data


def _as_patch_rows(quads: bytes) -> bytes:
    """N-Triples / N-Quads lines as RDF Patch ``A`` rows (rich term syntax for the text reader)."""
    rows = [b"A " + line.strip() for line in quads.splitlines() if line.strip() and not line.startswith(b"#")]
    return b"\n".join(rows) + b"\n" if rows else b""


def raw_sources(target: str) -> Iterator[bytes]:
    """The conformance files a target starts from, before shaping."""
    if target == "patch":
        for path in _files(PATCH_SUITE, "**/*.jellyp"):
            yield path.read_bytes()
    elif target == "native":  # the differential target runs both binary formats
        yield from raw_sources("patch")
        yield from raw_sources("rdf")
    elif target == "rdf":
        for path in _files(RDF_SUITE, "**/*.jelly"):
            yield path.read_bytes()
    elif target == "rdfp":
        for path in _files(PATCH_SUITE, "**/*.rdfp") + _files(JVM_PATCHES, "*.rdfp") + _files(RDF_SUITE, "*.rdfp"):
            yield path.read_bytes()
        for path in _files(RDF_SUITE, "**/*.nq", "**/*.nt"):
            rows = _as_patch_rows(path.read_bytes())
            if rows:
                yield rows
    elif target == "apply":
        for data in raw_sources("patch"):
            yield b"\x00" + data
        for data in raw_sources("rdfp"):
            yield b"\x01" + data
    elif target == "units":
        # Hypothesis choice sequences: any bytes draw a log; a few lengths start the corpus.
        rng = random.Random(45)
        for size in (16, 64, 256, 1024, 4096):
            for _ in range(4):
                yield rng.randbytes(size)
    elif target == "selftest":
        yield b"\xde\xac seed"
    else:
        raise KeyError(target)


def seeds(target: str) -> list[bytes]:
    """The shaped, de-duplicated seed inputs of ``target`` (empty if the suites are missing)."""
    shaped = (data if target in ("apply", "units") else split_seed(data) for data in raw_sources(target))
    return sorted(set(shaped))
