"""Helpers of the HTTP door tests: a serve process in a thread, a serve process as a child,
RDF Patch text of chained patches with RDF Delta's UUID ids."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from patchsync.serve.app import Server
from patchsync.serve.settings import Address, ServeSettings


class ServerThread:
    """A real serve process's :class:`Server` on its own event loop, in a thread of the test."""

    def __init__(self, settings: ServeSettings) -> None:
        self.server = Server(settings, announce=lambda line: None)
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.stop())
        self.loop.close()

    def start(self) -> ServerThread:
        self._thread.start()
        # Bounded for a server that hangs at start; a slow machine still gets there.
        assert self._ready.wait(300), "the server did not start"
        if self._error is not None:
            raise self._error
        return self

    @property
    def url(self) -> str:
        scheme = "https" if self.server.settings.tls else "http"
        return f"{scheme}://{self.server.addresses['http']}"

    def call(self, coro: Any) -> Any:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)


def settings(tmp: Path, *, topics: Sequence[str] = (), **kwargs: Any) -> ServeSettings:
    """Settings of an HTTP door on a free loopback port, log root ``tmp/logs``."""
    base = ServeSettings(listeners={"http": Address("127.0.0.1", 0)}, topics=tuple(topics), log_root=tmp / "logs")
    return replace(base, **kwargs)


@contextmanager
def serving(tmp: Path, **kwargs: Any) -> Iterator[ServerThread]:
    server = ServerThread(settings(tmp, **kwargs)).start()
    try:
        yield server
    finally:
        server.stop()


def uuid_id(tag: str, n: int) -> str:
    """A patch id as RDF Delta's clients make them (a UUID), stable for ``(tag, n)``."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"patch:{tag}:{n}"))


def patch_text(tag: str, n: int, prev: int | None, rows: int = 2) -> str:
    """RDF Patch text of patch ``n`` of chain ``tag`` (``prev``: the patch before, or none)."""
    lines = [f"H id <uuid:{uuid_id(tag, n)}> ."]
    if prev is not None:
        lines.append(f"H prev <uuid:{uuid_id(tag, prev)}> .")
    lines.append("TX .")
    lines += [f'A <http://ex.org/s{n}> <http://ex.org/p{r}> "v{n}.{r}" .' for r in range(rows)]
    lines.append("TC .")
    return "\n".join(lines) + "\n"


def start_serve(args: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """``patchsync serve ARGS`` as a child process; returns it and the HTTP door's address."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "patchsync", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("serving http on "):
            return proc, line.split()[-1]
    proc.wait(10)
    assert proc.stderr is not None
    raise AssertionError(f"serve did not start: {proc.stderr.read()}")
