"""A private asyncio event loop on a thread of its own, for a synchronous facade.

nats-py is asyncio only; the rest of patchsync (the applier, the tail daemon, the CLI) is
synchronous. Two ways to bridge were possible:

- ``asyncio.run`` per call: every call would connect anew (a connection belongs to the
  loop that made it), and it fails outright when the caller's thread already runs a loop
  (Jupyter, an async application using the library).
- One loop on a private daemon thread, calls submitted with ``run_coroutine_threadsafe``
  (chosen): one connection lives as long as the facade, the client's background tasks
  (answering the server's pings, reading, reconnecting) keep running between calls, and
  the caller's own thread and loop are never touched. Each call waits with a deadline, so
  a hung server cannot block the caller forever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever on a daemon thread until :meth:`close`."""

    def __init__(self, name: str = "patchsync-nats") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait for it; after ``timeout`` seconds it is cancelled.

        Raises ``TimeoutError`` on the deadline and the coroutine's own exception
        otherwise.
        """
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            if future.done():
                raise  # the coroutine's own TimeoutError (the same class since Python 3.11)
            future.cancel()
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    def submit(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` on the loop without waiting for it; it handles its own errors."""
        asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        """Cancel what still runs on the loop, stop it and join the thread."""
        if self.loop.is_closed():
            return

        async def _cancel_all() -> None:
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            # A task that will not stop must not keep the caller from closing.
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
