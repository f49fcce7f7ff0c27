"""A producer that keeps appending patches to a growing Jelly-Patch log.

Run it next to the tail daemon, from the repository root::

    python examples/producer.py logs/ --rate 50 --count 2000 &
    patchsync tail logs/ --target sqlite:///replica.db

``LOG`` is a ``.jellyp`` file, or a directory (created if needed) into which the producer writes numbered
segments (``00000001.jellyp``, ...), starting a new one every ``--rotate`` patches. Each
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
    """(file, first patch number) for each segment, from the one holding patch ``start``."""
    if not log.is_dir():
        yield log, start
        return
    index = (start - 1) // rotate
    while True:
        yield log / f"{index + 1:08d}.jellyp", index * rotate + 1
        index += 1


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
    """Append patches ``1..count`` (continuing after those already written); returns the last number.

    The producer finds where it left off from the chain head of the log (or its newest
    segment), so it can be stopped and restarted.
    """
    adapter = NTriplesTerms()
    if log.suffix.lower() != ".jellyp":
        log.mkdir(parents=True, exist_ok=True)  # a directory of rotated segments
    start = _next_patch(log)
    if start > count:
        return start - 1  # nothing to write: no segment is opened, none started
    interval = 1.0 / rate if rate > 0 else 0.0
    next_at = time.monotonic()
    n = start
    for path, first in segments(log, rotate, start):
        last = first + rotate - 1 if log.is_dir() else count
        with LogAppender(path, OPTIONS, adapter, fsync=fsync) as out:
            while n <= min(last, count):
                if interval:
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    next_at += interval
                out.write(patch_events(n, seed, rows=rows, stamp=stamp))
                n += 1
        if n > count:
            break
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
    parser.add_argument("--count", type=int, default=1000, help="patch number to stop at (default 1000)")
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
    print(f"{args.log}: wrote up to patch {last}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
