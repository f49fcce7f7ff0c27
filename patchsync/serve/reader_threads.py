"""The worker threads readers share, and running a blocking iterator in them a batch at a
time (:func:`thread_batches`): what every door and log topic uses to read logs and convert
patches off the event loop."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


#: Worker threads for what readers make the server do (reading logs, converting patches):
#: few, so that many readers share them instead of crowding out the event loop and the
#: topics' writer threads, and so that their memory is a few steps' worth, not one a reader.
READER_THREADS = max(2, min(4, os.cpu_count() or 2))
_readers: ThreadPoolExecutor | None = None


async def in_reader(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on one of the :data:`READER_THREADS` threads readers share."""
    global _readers
    if _readers is None:
        _readers = ThreadPoolExecutor(READER_THREADS, thread_name_prefix="patchsync-read")
    return await asyncio.get_running_loop().run_in_executor(_readers, functools.partial(fn, *args))


async def thread_batches(
    source: Callable[[], Iterator[T]],
    batch: int = 256,
    *,
    max_bytes: int | None = None,
    size: Callable[[T], int] = len,  # type: ignore[assignment]
    first: int | None = None,
) -> AsyncIterator[list[T]]:
    """Run the blocking iterator ``source()`` in a worker thread, ``batch`` items at a time
    (and, with ``max_bytes``, no more than that by ``size`` unless one item is larger).

    With ``first``, the first step takes that many items and each next one 16 times more, up
    to ``batch``: a reader that wants one item (a fetch by version) makes the source produce
    one, not a batch, and a long read still goes ``batch`` at a time."""
    iterator = await asyncio.to_thread(source)
    ended = False
    step_size = batch if first is None else max(1, min(first, batch))

    def take() -> list[T]:
        nonlocal ended, step_size
        items: list[T] = []
        total = 0
        wanted, step_size = step_size, min(batch, step_size * 16)
        for item in iterator:
            items.append(item)
            if max_bytes is not None:
                total += size(item)
            if len(items) >= wanted or (max_bytes is not None and total >= max_bytes):
                return items
        ended = True
        return items

    step: asyncio.Future[list[T]] | None = None
    try:
        while not ended:
            # Shielded: a reader cancelled meanwhile leaves the step running in its thread,
            # and the iterator is closed only once the step is done with it.
            step = asyncio.ensure_future(in_reader(take))
            items = await asyncio.shield(step)
            if items:
                yield items
    finally:
        if step is not None and not step.done():
            await asyncio.wait([step])
        close = getattr(iterator, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


async def flatten(batches: AsyncIterator[list[T]]) -> AsyncGenerator[T, None]:
    """The items of ``batches``, one at a time."""
    async for batch in batches:
        for item in batch:
            yield item


__all__ = ["READER_THREADS", "flatten", "in_reader", "thread_batches"]
