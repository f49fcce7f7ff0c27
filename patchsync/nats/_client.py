"""Importing nats-py without the part of it patchsync never uses.

The client's transport module imports aiohttp, when it is installed, for connections over
websockets (``ws://``); patchsync connects to ``nats://`` addresses only. Importing aiohttp
costs a CLI process about as long as importing the rest of the client, paid by every
``tail nats://`` and ``publish`` run. :func:`import_client` imports the client with aiohttp
hidden, so its websocket transport is left without it; the entry is removed at once, so
code of the same process that imports aiohttp itself (``patchsync serve``'s HTTP door) gets
the real module.
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_client() -> ModuleType:
    """The ``nats`` package, its transport module imported without aiohttp if not loaded yet."""
    if "nats.aio.transport" not in sys.modules and "aiohttp" not in sys.modules:
        # A None entry makes ``import aiohttp`` raise ImportError, which the transport
        # module catches (it then refuses websocket connections only).
        sys.modules["aiohttp"] = None  # type: ignore[assignment]
        try:
            import nats.aio.transport
        finally:
            if sys.modules.get("aiohttp", 0) is None:
                del sys.modules["aiohttp"]
    import nats

    return nats
