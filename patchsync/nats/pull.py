"""Reading a stream through an ephemeral pull consumer: one inbox, requests made ahead.

nats-py's pull subscription waits for each message of a batch in turn (a deadline task per
message) and parses every reply subject into metadata objects with datetimes; for
one-patch messages of a few rows that costs about as much CPU as applying them, on the
thread the applier shares the interpreter with. :class:`PullReader` asks the consumer
for messages itself (a ``$JS.API.CONSUMER.MSG.NEXT`` request naming its inbox as the
reply subject) and receives them on one plain subscription whose callback only reads
the stream sequence, consumer sequence and time out of the reply subject
(``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>``, or the form
with a domain and account in front) and queues the message.

One request runs at a time: the server answers it with up to its ``batch`` messages (in
stream order: the consumer does not wait for acknowledgements) and ends it early with a
status message (``404`` nothing now, ``408`` its ``expires`` passed, ``409`` its byte
budget or the consumer is gone). Reading ahead, a request that was answered in full is
followed at once by the next, from the client's own thread, while the caller still
applies the messages it took: the queue never holds more than about two requests' worth.

A message missing between two delivered ones (the client dropped it, or the consumer was
reset) shows as a jump in the consumer sequence: the reader then stops taking messages
and reports itself :attr:`~PullReader.broken`; its owner starts a new consumer where the
last good message ended.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import TYPE_CHECKING, Any

from patchsync.logs.payloads import StreamMessage

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription
    from nats.js.client import JetStreamContext

#: Messages one request asks for when reading ahead.
WINDOW = 1024
#: The least byte budget of one request (the server may allow larger messages: then one
#: message's worth is the budget, so that every message fits in a request).
WINDOW_BYTES = 16 << 20
#: Seconds after a request's ``expires`` when it counts as over even without its end
#: status (a status lost with a reconnect must not leave the reader waiting on it).
_GRACE = 1.0

_STATUS = "Status"
_HEARTBEAT = "100"


class PullReader:
    """Messages of one ephemeral pull consumer, from the sequence it was created at on.

    Runs on the connection's event loop; :meth:`start` subscribes the inbox and creates
    the consumer, :meth:`fetch` hands out what arrived, :meth:`stop` removes both.
    """

    def __init__(self, nc: Client, js: JetStreamContext, stream: str, *, read_ahead: bool) -> None:
        self._nc = nc
        self._js = js
        self._stream = stream
        self._read_ahead = read_ahead
        self.name = ""
        self._inbox = nc.new_inbox()
        self._sub: Subscription | None = None
        self._next_subject = ""
        self._queue: deque[StreamMessage] = deque()
        #: Messages the running request may still deliver (0: none runs).
        self._owed = 0
        self._request_ends = 0.0
        self._expires = 1.0
        self._budget = max(WINDOW_BYTES, 2 * int(nc.max_payload))
        self._next_dseq = 1
        self._broken = False
        self._arrived = asyncio.Event()

    async def start(self, name: str, config: Any) -> None:
        """Subscribe the inbox, then create the consumer ``name`` with ``config`` (an ephemeral)."""
        self.name = name
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{name}"
        self._sub = await self._nc.subscribe(self._inbox, cb=self._on_message)
        await self._js.add_consumer(self._stream, config=config)

    @property
    def broken(self) -> bool:
        """A message went missing after those still queued: start a new consumer after them."""
        return self._broken and not self._queue

    def _running(self) -> bool:
        if self._owed and asyncio.get_running_loop().time() > self._request_ends:
            self._owed = 0
        return self._owed > 0

    async def _request(self, batch: int, expires: float) -> None:
        self._expires = expires
        self._owed = batch
        self._request_ends = asyncio.get_running_loop().time() + expires + _GRACE
        body = {"batch": batch, "expires": int(expires * 1e9), "max_bytes": self._budget}
        await self._nc.publish(self._next_subject, json.dumps(body).encode(), reply=self._inbox)

    async def _on_message(self, msg: Msg) -> None:
        reply = msg.reply
        if not reply:
            headers = msg.headers
            if not msg.data and headers is not None and headers.get(_STATUS) != _HEARTBEAT:
                # The running request is over (nothing more now, expired, out of budget,
                # the consumer is gone): the next fetch asks again.
                self._owed = 0
                self._arrived.set()
            return
        if self._broken:
            return
        tokens = reply.split(".")
        at = 5 if len(tokens) == 9 else 7  # without or with domain and account hash
        dseq = int(tokens[at + 1])
        if dseq != self._next_dseq:
            self._broken = True
            self._arrived.set()
            return
        self._next_dseq = dseq + 1
        self._queue.append(StreamMessage(int(tokens[at]), int(tokens[at + 2]) / 1e9, msg.headers or {}, msg.data))
        owed = self._owed - 1
        self._owed = owed if owed > 0 else 0
        if owed == 0 and self._read_ahead and len(self._queue) < WINDOW:
            # Answered in full: a backlog. The next request goes out now, not when the
            # caller comes back for more.
            await self._request(WINDOW, self._expires)
        self._arrived.set()

    async def fetch(self, batch: int, timeout: float) -> list[StreamMessage]:
        """Up to ``batch`` queued messages; waits up to ``timeout`` seconds when none is queued.

        An empty list: nothing arrived within ``timeout`` (or the reader is broken).
        """
        queue = self._queue
        if not queue and not self._broken:
            if not self._running():
                await self._request(max(batch, WINDOW) if self._read_ahead else batch, timeout)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while not queue and not self._broken and self._running():
                self._arrived.clear()
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except TimeoutError:
                    break
        count = min(batch, len(queue))
        out = [queue.popleft() for _ in range(count)]
        if self._read_ahead and not self._broken and not self._running() and len(queue) < WINDOW and count == batch:
            # The caller is working through a backlog: ask for more while it applies these.
            await self._request(WINDOW, timeout)
        return out

    def take(self, from_seq: int, batch: int) -> list[StreamMessage]:
        """Up to ``batch`` queued messages, the first being ``from_seq``; from the caller's thread.

        Empty when none is queued, the first queued is another one or the reader is broken:
        the caller then goes through :meth:`fetch` on the loop. Messages the reader has
        already are handed out without a round trip through the loop's thread, which costs
        two thread wake-ups, each waiting for a core on a busy machine. Safe from another
        thread: the loop only appends to the queue meanwhile, and only the caller takes.
        """
        queue = self._queue
        if self._broken or not queue or queue[0].seq != from_seq:
            return []
        return [queue.popleft() for _ in range(min(batch, len(queue)))]

    async def top_up(self, timeout: float) -> None:
        """After :meth:`take` emptied a full batch: ask for the next messages, as :meth:`fetch` does."""
        if self._read_ahead and not self._broken and not self._running() and len(self._queue) < WINDOW:
            try:
                await self._request(WINDOW, timeout)
            except Exception:
                # Nobody waits for this request: the reader is given up instead, and the
                # next fetch, once the queue is empty, starts a new consumer (or reports
                # the lost server).
                self._owed = 0
                self._broken = True

    async def stop(self) -> None:
        """Unsubscribe and delete the consumer (best effort: an abandoned one expires anyway)."""
        sub, self._sub = self._sub, None
        self._queue.clear()
        self._owed = 0
        try:
            if sub is not None:
                await sub.unsubscribe()
            if self.name:
                await self._js.delete_consumer(self._stream, self.name)
        except Exception:
            pass
