"""Shared helpers of the serve tests: patch payloads, logs, running a topic's coroutines."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TypeVar

from patchsync.events import Add, Event, Header, PatchEnd, TxCommit, TxStart
from patchsync.options import PatchOptions
from patchsync.streams.payloads import NT_TERMS, encode_patch

from .helpers import write_log

T = TypeVar("T")


def patch_id(n: int) -> str:
    return f"urn:test:p{n}"


def patch_events(n: int, prev: int | None, rows: int = 2) -> list[Event]:
    """Patch number ``n`` (its prev patch number ``prev``): ``rows`` added triples."""
    events: list[Event] = [Header("id", f"<{patch_id(n)}>")]
    if prev is not None:
        events.append(Header("prev", f"<{patch_id(prev)}>"))
    events.append(TxStart())
    for r in range(rows):
        events.append(Add(f"<http://ex.org/s{n}>", f"<http://ex.org/p{r}>", f'"value {n}.{r}"', None))
    events += [TxCommit(), PatchEnd()]
    return events


def payload(n: int, prev: int | None, rows: int = 2, options: PatchOptions | None = None) -> bytes:
    """Patch ``n`` as a one-patch Jelly-Patch stream (what a publisher sends)."""
    return encode_patch(patch_events(n, prev, rows), options or PatchOptions())


def chain_log(path: Path, count: int, rows: int = 2) -> Path:
    """A ``.jellyp`` log of patches 1..count chained, written in one stream (shared lookups)."""
    events: list[Event] = []
    for n in range(1, count + 1):
        events += patch_events(n, n - 1 if n > 1 else None, rows)
    return write_log(path, _nt(events), adapter=NT_TERMS)


def _nt(events: Sequence[Event]) -> list[Event]:
    return list(events)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(_wrap(coro))


async def _wrap(coro: Awaitable[T]) -> T:
    return await coro
