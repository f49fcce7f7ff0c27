"""A large ``.jellyp`` log written streaming to disk, for the memory bound of decoding.

Unlike :mod:`bench.workload` (rdflib terms, events built in memory), this generator makes
N-Triples strings and writes each patch's frames as soon as the encoder finishes them, so a
log of any size costs the generating process no memory. The data is built to fill what a
decoder keeps between frames: every subject is new (the name lookup churns and IRI caches
keep filling), literals are distinct (literal caches keep filling), about 1% are long texts
with newlines and quotes (cached terms of kilobytes), 20% of statements are deletes of
recent adds, and every ``bulk_every``-th patch is a bulk patch of 1 KB texts whose frames
reach the encoder's 1 MiB frame limit, the log's largest frames.
"""

from __future__ import annotations

import os
import random
from collections import deque
from typing import IO, Any

from patchsync.codec.framing import read_varint
from patchsync.codec.patch_encoder import DEFAULT_FRAME_BYTES, PatchEncoder
from patchsync.options import PatchOptions
from patchsync.terms.ntriples import NTriplesTerms, format_literal

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
_NAMESPACES = [f"{EX}ns{i}/{kind}/" for i, kind in enumerate(["item", "person", "place", "doc"] * 3)]
_PREDICATES = [f"<{EX}vocab/p{i}>" for i in range(40)]
_GRAPHS = [""] * 25 + [f"<{EX}graph/{i}>" for i in range(25)]
_LANGS = ["en", "fr", "de", "es", "it", "ja", "zh", "ru", "ar", "pt-BR", "nl", "sv"]
_WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "ünïcode",
    "東京",
    "Москва",
]


_POOL = " ".join(random.Random(0).choice(_WORDS) for _ in range(4096))


def _text(rng: random.Random, n: int, chars: int) -> str:
    start = rng.randrange(len(_POOL) - chars)
    return f'Text {n}: "{_POOL[start : start + chars]}"\nsecond line {n}'


def write_churn_log(
    out: IO[bytes],
    target_bytes: int,
    seed: int,
    *,
    patch_rows: int = 1000,
    bulk_every: int = 20,
    append: bool = False,
    first_entity: int = 0,
    max_frame_bytes: int = DEFAULT_FRAME_BYTES,
) -> dict[str, Any]:
    """Write a PUNCTUATED QUADS log of about ``target_bytes`` to ``out``; returns row counts.

    ``append`` writes a segment that continues another one (the encoder's append mode, so
    the concatenation decodes); ``first_entity`` keeps its subjects apart from the other's.
    """
    rng = random.Random(seed)
    encoder: PatchEncoder[str] = PatchEncoder(
        PatchOptions(), NTriplesTerms(), append=append, max_frame_bytes=max_frame_bytes
    )
    written = 0
    rows = 0
    n = first_entity  # entity counter: every subject is new
    recent: deque[tuple[str, str, str, str]] = deque(maxlen=200)
    patch = 0
    while written < target_bytes:
        encoder.header("id", f"<urn:patch:{seed}:{patch}>")
        encoder.tx_start()
        rows += 3  # H, TX, TC
        bulk = bulk_every and patch % bulk_every == bulk_every - 1
        for _ in range(1024 if bulk else patch_rows):
            n += 1
            if bulk:
                s = f"<{_NAMESPACES[n % 12]}{n}>"
                encoder.add(s, _PREDICATES[0], format_literal(_text(rng, n, 900)), "")
                rows += 1
                continue
            if recent and rng.random() < 0.2:
                encoder.delete(*recent.popleft())
                rows += 1
                continue
            s = f"<{_NAMESPACES[n % 12]}{n}>" if rng.random() < 0.9 else f"_:b{n}"
            r = rng.random()
            if r < 0.3:
                o = f"<{_NAMESPACES[(n * 7) % 12]}{n - rng.randrange(1, 1000)}>"
            elif r < 0.55:
                o = f'"name {n} {rng.choice(_WORDS)}"'
            elif r < 0.7:
                o = format_literal(f"label {n}", rng.choice(_LANGS))
            elif r < 0.85:
                o = f'"{rng.randrange(10**9)}"^^<{XSD}integer>'
            elif r < 0.88:
                o = format_literal(_text(rng, n, rng.randrange(200, 3000)))
            else:
                o = f"_:o{n}"
            quad = (s, _PREDICATES[n % 40], o, _GRAPHS[n % 50])
            encoder.add(*quad)
            recent.append(quad)
            rows += 1
        encoder.tx_commit()
        encoder.end_patch()
        data = encoder.take()
        out.write(data)
        written += len(data)
        patch += 1
    encoder.finish()
    out.write(encoder.take())
    return {"rows": rows, "patches": patch}


def _segment(job: tuple[str, int, int, int]) -> dict[str, Any]:
    path, target_bytes, seed, index = job
    with open(path, "wb") as f:
        return write_churn_log(f, target_bytes, seed + index, append=index > 0, first_entity=index * 10**9)


def write_churn_log_file(path: str, target_bytes: int, seed: int, *, procs: int = 2) -> dict[str, Any]:
    """Write a log of about ``target_bytes`` to ``path`` as ``procs`` segments made in parallel."""
    import multiprocessing
    import shutil

    parts = [f"{path}.part{i}" for i in range(procs)]
    jobs = [(part, target_bytes // procs, seed, i) for i, part in enumerate(parts)]
    with multiprocessing.Pool(procs) as pool:
        stats = pool.map(_segment, jobs)
    with open(path, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 20)
            os.unlink(part)
    return {"rows": sum(s["rows"] for s in stats), "patches": sum(s["patches"] for s in stats)}


def frame_sizes(path: str | Any) -> list[int]:
    """The payload size of every delimited frame of a file (read by seeking over the payloads)."""
    sizes: list[int] = []
    with open(path, "rb") as f:
        while head := f.read(10):
            found = read_varint(head, 0, len(head))
            if found is None:
                raise ValueError(f"{path}: truncated frame length at offset {f.tell() - len(head)}")
            size, used = found
            sizes.append(size)
            f.seek(size - (len(head) - used), 1)
    return sizes
