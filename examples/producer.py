"""A producer that keeps appending patches to a growing Jelly-Patch log.

Run it next to the tail daemon, from the repository root::

    python examples/producer.py logs/ --rate 50 --count 2000 &
    patchsync tail logs/ --target sqlite:///replica.db

``LOG`` is a ``.jellyp`` file, or a directory (created if needed) into which the producer writes numbered
segments (``00000001.jellyp``, ...), starting a new one every ``--rotate`` patches. It writes
``--count`` patches after those the log holds already: a second run continues the chain where
the first ended (in a directory, from a new segment after the newest), and prints the id of
the last patch written on standard output. Each
patch is a chained transaction (``H id``, ``H prev``) that adds a few triples about one
resource and deletes some added earlier, so replaying the log exercises both operations.
Patches are written with :class:`patchsync.logs.patch_logs.LogAppender`, which writes every frame
with a single ``write`` (a reader never sees half of a frame it can mistake for a whole
one). A producer with nothing left to write (``--count`` reached) opens no segment, so a
log a replica has caught up with stays as it is. ``--seed`` makes the log reproducible. With ``--stamp`` each patch carries the wall
clock time of its write in a ``ts`` header (used by the latency benchmark).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from patchsync.events import Add, Delete, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.append import log_head
from patchsync.logs.patch_logs import LogAppender
from patchsync.options import PatchOptions, StatementType, StreamType
from patchsync.terms.ntriples import NTriplesTerms

EX = "http://example.org/"
OPTIONS = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES)


def patch_events(n: int, seed: int = 1, *, rows: int = 5, stamp: bool = False) -> list[Any]:
    """The events of patch number ``n`` (1-based): headers, one transaction, patch end.

    The same ``(n, seed)`` always gives the same patch, so a restarted producer continues
    the same log.
    """
    rng = random.Random(seed * 1_000_003 + n)
    events: list[Any] = [Header("id", f"<urn:patch:{n}>")]
    if n > 1:
        events.append(Header("prev", f"<urn:patch:{n - 1}>"))
    if stamp:
        events.append(Header("ts", f'"{time.time():.6f}"'))
    events.append(TxStart())
    for i in range(rows):
        events.append(Add(f"<{EX}item/{n}>", f"<{EX}p{i}>", f'"value {n}.{i}"', None))
    if n > 3 and rng.random() < 0.5:
        old = rng.randrange(1, n - 1)
        events.append(Delete(f"<{EX}item/{old}>", f"<{EX}p{rng.randrange(rows)}>", f'"value {old}.0"', None))
        events.append(Delete(f"<{EX}item/{old}>", f"<{EX}p0>", f'"value {old}.0"', None))
    events.append(TxCommit())
    events.append(PatchEnd())
    return events


def segments(log: Path, rotate: int, start: int) -> Iterator[tuple[Path, int]]:
    """(file, patches it takes) for each file patches from ``start`` on go to, in order.

    A file log takes them all. In a directory, a new segment is started after the newest one
    (never appending to an old one, whose rotation may have been another), then one every
    ``rotate`` patches, so that file-name order stays log order.
    """
    if not log.is_dir():
        yield log, sys.maxsize
        return
    names = [int(p.stem) for p in log.glob("*.jellyp") if p.stem.isdigit()]
    number = max(names, default=0) + 1
    while True:
        yield log / f"{number:08d}.jellyp", rotate
        number += 1


def produce(
    log: Path,
    *,
    count: int,
    rate: float,
    rotate: int = 1000,
    seed: int = 1,
    rows: int = 5,
    stamp: bool = False,
    fsync: bool = False,
) -> int:
    """Append ``count`` patches after those ``log`` holds; returns the number of the last one.

    The producer finds where it left off from the chain head of the log (or its newest
    segment), so it can be stopped and restarted.
    """
    adapter = NTriplesTerms()
    if log.suffix.lower() != ".jellyp":
        log.mkdir(parents=True, exist_ok=True)  # a directory of rotated segments
    start = _next_patch(log)
    last = start + count - 1
    interval = 1.0 / rate if rate > 0 else 0.0
    next_at = time.monotonic()
    n = start
    for path, room in segments(log, rotate, start):
        if n > last:
            break
        with LogAppender(path, OPTIONS, adapter, fsync=fsync) as out:
            for _ in range(min(room, last - n + 1)):
                if interval:
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    next_at += interval
                out.write(patch_events(n, seed, rows=rows, stamp=stamp))
                n += 1
    return n - 1


def _next_patch(log: Path) -> int:
    files = sorted(log.glob("*.jellyp")) if log.is_dir() else [log]
    for path in reversed(files):
        if path.exists() and path.stat().st_size:
            head = log_head(path)  # read only: a log another reader follows stays as it is
            if head:
                return int(head.rsplit(":", 1)[1]) + 1
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Append chained patches to a growing .jellyp log.")
    parser.add_argument("log", type=Path, help="a .jellyp file, or a directory for rotated segments")
    parser.add_argument(
        "--count", type=int, default=1000, help="patches to write after those the log holds (default 1000)"
    )
    parser.add_argument("--rate", type=float, default=10.0, help="patches per second (0: as fast as possible)")
    parser.add_argument("--rotate", type=int, default=1000, help="patches per segment in a directory")
    parser.add_argument("--rows", type=int, default=5, help="triples added per patch")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stamp", action="store_true", help="add a ts header with the write time")
    parser.add_argument("--fsync", action="store_true", help="fsync after each patch")
    args = parser.parse_args(argv)
    last = produce(
        args.log,
        count=args.count,
        rate=args.rate,
        rotate=args.rotate,
        seed=args.seed,
        rows=args.rows,
        stamp=args.stamp,
        fsync=args.fsync,
    )
    print(f"{args.log}: wrote {args.count} patches, up to patch {last}", file=sys.stderr)
    print(f"urn:patch:{last}")  # the last id, for a script to wait on (the README's tour does)
    return 0


if __name__ == "__main__":
    sys.exit(main())
