"""RDF Delta's patch log lock: a lock table and the answers to its five RPC operations.

The facts (op names, fields, replies) are RDF Delta's, read from its server and clients and
written down in docs/decisions/0002-rdf-delta-http.md. In short, per data source:

- ``lock`` ``{"datasource"}`` → ``{"lock-ref": SESSION}`` (a new bare UUID, ticks 1), or
  ``{"lock-ref": null}`` while someone holds it (it does not wait, it is not reentrant);
- ``lock-refresh`` ``{"array": [{"datasource", "lock-ref"}, ...]}`` → ``{"array": [...]}``:
  the entries that were *not* refreshed (not the holder, or no such data source), as sent;
  each refreshed one counts one more tick;
- ``lock-read`` ``{"datasource"}`` → ``{"lock-ref": SESSION, "lock-ticks": N}``, or ``{}``
  when free; a waiting client watches the ticks, and grabs when they stop moving;
- ``lock-grab`` ``{"datasource", "lock-ref"}`` → a new session when ``lock-ref`` is the
  holder's (the old one is released), ``{"lock-ref": null}`` otherwise or when free;
- ``unlock`` ``{"datasource", "lock-ref"}`` → ``{}``; a session that does not hold it, a
  free lock or an unknown data source change nothing.

An unknown data source is 404 for ``lock``, ``lock-read`` and ``lock-grab``, as RDF Delta.
RDF Delta's server keeps a lock until it is released or grabbed; this table also frees one
that has not been acquired or refreshed for ``lease`` seconds (``None``: never), so a client
that only ever calls ``lock`` is not stuck behind a holder that died. The default lease is
the time Java's client waits on ticks that do not move before it grabs, so Java clients,
which refresh every second, see no difference.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from patchsync.serve.delta_protocol import BadRequest, RpcCall, bare_id, by_id
from patchsync.serve.errors import UnknownTopic

#: Seconds without a refresh after which a lock is free: Java's ``LogLock`` grabs after 60
#: reads of the lock, one a second, that saw the same ticks.
LEASE = 60.0

Answer = dict[str, Any]


@dataclass(slots=True)
class Held:
    """One held lock: the holder's session, its ticks (1 when acquired, one more per
    refresh) and when it was last acquired or refreshed (on the table's clock)."""

    session: str
    ticks: int
    refreshed: float


class LockTable:
    """The patch log locks of one server, by data source name (in memory: a restart frees
    them, as RDF Delta's)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, lease: float | None = LEASE) -> None:
        self.clock = clock
        self.lease = lease
        self._held: dict[str, Held] = {}
        self._answers: Mapping[str, Callable[[RpcCall, list[str]], Answer]] = {
            "lock": self._lock,
            "lock-refresh": self._refresh,
            "lock-read": self._read,
            "lock-grab": self._grab,
            "unlock": self._unlock,
        }

    # -- the table ---------------------------------------------------------------------

    def holder(self, name: str) -> Held | None:
        """The lock of data source ``name``, or ``None`` when free (an expired one is freed)."""
        held = self._held.get(name)
        if held is not None and self.lease is not None and self.clock() - held.refreshed >= self.lease:
            del self._held[name]
            return None
        return held

    def acquire(self, name: str) -> str | None:
        """A new session holding ``name``'s lock, or ``None`` when it is held."""
        if self.holder(name) is not None:
            return None
        session = str(uuid.uuid4())
        self._held[name] = Held(session, 1, self.clock())
        return session

    def refresh(self, name: str, session: str) -> bool:
        """Whether ``session`` holds ``name``'s lock; if so it counts one more tick."""
        held = self.holder(name)
        if held is None or held.session != session:
            return False
        held.ticks += 1
        held.refreshed = self.clock()
        return True

    def grab(self, name: str, session: str) -> str | None:
        """A new session in place of ``session`` when that is the holder, else ``None``."""
        held = self.holder(name)
        if held is None or held.session != session:
            return None
        del self._held[name]
        return self.acquire(name)

    def release(self, name: str, session: str) -> None:
        """Free ``name``'s lock if ``session`` holds it."""
        held = self.holder(name)
        if held is not None and held.session == session:
            del self._held[name]

    def forget(self, name: str) -> None:
        """Drop ``name``'s lock (its data source is removed)."""
        self._held.pop(name, None)

    # -- the RPC operations --------------------------------------------------------------

    def answer(self, call: RpcCall, names: Iterable[str]) -> Answer:
        """The JSON answer to lock operation ``call`` over the data sources ``names``."""
        return self._answers[call.op](call, list(names))

    def _lock(self, call: RpcCall, names: list[str]) -> Answer:
        return {"lock-ref": self.acquire(_known(call, names))}

    def _refresh(self, call: RpcCall, names: list[str]) -> Answer:
        entries = call.arg.get("array")
        if not isinstance(entries, list):
            raise BadRequest(f"{call.op}: field 'array' is missing or not a JSON array")
        missed = []
        for entry in entries:
            if not isinstance(entry, dict):
                raise BadRequest(f"{call.op}: an entry of 'array' is not a JSON object")
            one = RpcCall(call.op, entry)
            name = by_id(_id_field(one, "datasource"), names)
            if name is None or not self.refresh(name, _id_field(one, "lock-ref")):
                missed.append(entry)
        return {"array": missed}

    def _read(self, call: RpcCall, names: list[str]) -> Answer:
        held = self.holder(_known(call, names))
        return {} if held is None else {"lock-ref": held.session, "lock-ticks": held.ticks}

    def _grab(self, call: RpcCall, names: list[str]) -> Answer:
        name = _known(call, names)
        return {"lock-ref": self.grab(name, _id_field(call, "lock-ref"))}

    def _unlock(self, call: RpcCall, names: list[str]) -> Answer:
        name = by_id(_id_field(call, "datasource"), names)
        session = _id_field(call, "lock-ref")
        if name is not None:
            self.release(name, session)
        return {}


def _id_field(call: RpcCall, field: str) -> str:
    """The required id ``field`` (``id:`` or bare; ``id:nil`` is the nil UUID), as a bare
    lower-case UUID."""
    text = call.string(field, required=True)
    assert text is not None
    if text == "id:nil":
        return str(uuid.UUID(int=0))
    try:
        return str(uuid.UUID(bare_id(text)))
    except ValueError:
        raise BadRequest(f"{call.op}: field '{field}' is not an id (a UUID): {text!r}") from None


def _known(call: RpcCall, names: list[str]) -> str:
    """The data source of ``call``'s ``datasource`` id; 404 when there is none."""
    ds = _id_field(call, "datasource")
    name = by_id(ds, names)
    if name is None:
        raise UnknownTopic(f"{call.op}: No such data source: {ds}")
    return name


__all__ = ["LEASE", "Held", "LockTable"]
