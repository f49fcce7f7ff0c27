"""``sparql+http(s)://`` targets: any SPARQL 1.1 store, kept in step exactly once.

A unit (or a commit group of the applier, the usual case) is buffered as its net change per
quad and written at ``commit`` as one update request (several only when it exceeds the
request bound): the guard, the data, the checkpoint, the next guard (:mod:`.state`). A 2xx
answer means committed (both measured stores commit before they answer); the state is read
back after every request to confirm. After a refused request, a timeout or a lost answer
the state read back decides (:func:`.state.settle`): applied, or sent again (harmless: the
writes are a net change), or another applier moved the log (:class:`~.state.MovedError`).

Presence (``add``/``delete`` answer how many rows changed the store, ``contains`` in bulk) is
one SELECT per batch, never a round trip per row, and only for rows whose presence is not
known: what this applier's own confirmed requests left is remembered (a bounded memory,
dropped when another applier is seen). A write is left out only where this group's own
lookup showed the store already in that state, so a remembered row is written anyway
(harmless, a net change) and the store's state never rests on the memory. With
``counts=requested`` nothing is looked up: a row of unknown presence is taken as absent
before the group (so an add counts as added), and a quad so taken that the group does not
write (it ends absent) is deleted anyway at commit, so the store ends as the log says. A base load into an empty store (``defer_indexes``) skips
lookups and goes through the Graph Store Protocol in bulk. Prefix rows are
accepted and not stored (a SPARQL store keeps no prefixes of its data); header rows live in
the patch records as ids only. See docs/sparql-stores.md and docs/guarantees.md.
"""

from __future__ import annotations

import contextlib
import itertools
import urllib.parse
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, ClassVar

from patchsync.apply.target import (
    CAN_BULK_LOAD,
    CAN_CONTAINS,
    CAN_DUMP,
    CAN_LAST_WRITES,
    CAN_WRITE_EACH,
    Checkpoint,
    PatchRecord,
    Quad,
    SourceStatus,
)
from patchsync.errors import ApplyError, EncodeError, PatchsyncError

from . import state as st
from .client import ERRORS, Client, HttpStatus
from .config import SparqlConfig, parse_url
from .terms import SparqlTerms
from .text import Terms, data_ops, dump_query, presence_query, split_requests, too_large


class SparqlTarget:
    """A SPARQL 1.1 store named by a ``sparql+http(s)://`` URL (:mod:`.config`) as an apply target."""

    capabilities: ClassVar[frozenset[str]] = frozenset(
        {CAN_DUMP, CAN_CONTAINS, CAN_LAST_WRITES, CAN_WRITE_EACH, CAN_BULK_LOAD}
    )

    def __init__(self, spec: str) -> None:
        self.config: SparqlConfig = parse_url(spec)
        self.url = self.config.url
        self.adapter = SparqlTerms(self.config)
        self.terms = Terms(self.config)
        self.client = Client(self.config)
        layout = self.config.layout
        self._per_op = layout.op_triples
        self._per_request = layout.request_triples
        self._values_rows = layout.values_rows
        self._per_request_ops = layout.request_ops
        self._positions: dict[str, int] = {}
        self._head: str | None = None
        self._ids: set[str] = set()
        self._pending: dict[Quad, bool] | None = None
        self._known: dict[Quad, bool] = {}  # this group's lookups
        self._seen: dict[Quad, bool] = {}  # what this applier's confirmed requests left
        self._guessed: set[Quad] = set()  # taken as absent, not looked up (counts=requested)
        self._exact = self.config.counts == "exact"
        self._bulk = False
        self.requests = 0  # update requests sent (for the bench and tests)
        self.lookups = 0  # presence queries sent (for the bench and tests)
        with self._errors("cannot read the store's state"):
            self._load_head(self._read_head())

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except PatchsyncError:
            raise
        except Exception as exc:
            raise ERRORS.translate(exc, f"{self.url}: {what}") from exc

    # -- state -----------------------------------------------------------------------------

    def _log(self, source: str) -> str:
        return st.log_graph(self.config.state, source)

    def _read_state(self, source: str) -> st.LogState:
        return st.read_state(self.client.select(st.state_query(self._log(source))))

    def _read_head(self) -> str | None:
        rows = self.client.select(st.head_query(self.config.state))
        return str(rows[0]["h"]["value"]) if rows else None

    def _load_head(self, head: str | None) -> None:
        self._head = head
        self._ids = {str(r["id"]["value"]) for r in self.client.select(st.applied_query(self.config.state))}

    def checkpoint(self, source: str) -> Checkpoint | None:
        with self._errors(f"cannot read the checkpoint of {source}"):
            state = self._read_state(source)
        if not state.positions:
            self._positions.pop(source, None)
            return None
        position = state.position
        if position is None or len(state.checkpoints) > 1:
            # Two appliers' requests overlapped on a store that let both commit (Oxigraph):
            # resume from the lowest checkpoint, at a new position (0019; replaying is harmless).
            self._seen = {}
            with self._errors(f"cannot consolidate the checkpoints of {source}"):
                position = max(state.positions | state.guards) + 1
                self._send(st.consolidate(self._log(source), state, position))
        self._positions[source] = position
        return state.checkpoint()

    def head(self) -> str | None:
        with self._errors("cannot read the head"):
            head = self._read_head()
            if head != self._head:  # another applier moved the store: its ids too
                self._seen = {}
                self._load_head(head)
        return head

    def has_patch(self, patch_id: str) -> bool:
        return patch_id in self._ids

    def sources(self) -> list[SourceStatus]:
        with self._errors("cannot read the checkpoints"):
            rows = self.client.select(st.sources_query(self.config.state))
        found = []
        for row in rows:
            cp = st.decode_checkpoint(row["cp"]["value"]) if "cp" in row else Checkpoint(0, 0, 0)
            found.append(SourceStatus(str(row["src"]["value"]), cp))
        return sorted(found, key=lambda s: s.source)

    def quads(self) -> Iterator[tuple[str, str, str, str]]:
        with self._errors("cannot read the data"):
            rows = self.client.select(dump_query(self.terms, self.config.state))
        read, read_graph = self.terms.read, self.terms.read_graph
        for row in rows:
            g = read_graph(row.get("g"))
            if g is not None:
                yield read(row["s"]), read(row["p"]), read(row["o"]), g

    def namespaces(self) -> dict[tuple[str, str], str]:
        return {}  # prefix rows are not stored (module docstring)

    # -- unit ------------------------------------------------------------------------------

    def begin(self) -> None:
        self._pending = {}
        self._known = {}
        self._guessed = set()
        self._bulk = False

    def last_writes(self) -> None:
        pass  # every write waits for commit anyway: nothing to undo before it

    def defer_indexes(self) -> bool:
        """A base load into an empty store: no presence lookups; the Graph Store at commit."""
        self._bulk = True
        return True

    def contains(self, quads: Sequence[Quad]) -> list[bool]:
        if self._exact or self._bulk:
            return self._presence(quads, None)
        pending, known, seen = self._pending or {}, self._known, self._seen
        self._guessed.update(q for q in quads if q not in pending and q not in known and q not in seen)
        return self._presence(quads, False)

    def _presence(self, quads: Sequence[Quad], unknown_is: bool | None) -> list[bool]:
        """Whether the store holds each quad now: the open group's own rows, this group's
        lookups, then what this applier's requests left; the rest looked up, or taken as
        ``unknown_is`` (a row that counts as a change, ``counts=requested``)."""
        pending = self._pending
        assert pending is not None, "presence outside a unit"
        known, seen = self._known, self._seen
        unknown = [q for q in dict.fromkeys(quads) if q not in pending and q not in known and q not in seen]
        if unknown and not self._bulk and unknown_is is None:
            self._look_up(unknown)
        other = bool(unknown_is)
        return [pending[q] if q in pending else known[q] if q in known else seen.get(q, other) for q in quads]

    def _look_up(self, quads: list[Quad]) -> None:
        known = self._known
        step = self._values_rows
        with self._errors("presence lookup failed"):
            for start in range(0, len(quads), step):
                chunk = quads[start : start + step]
                try:
                    query = presence_query(self.terms, chunk)
                except EncodeError as exc:
                    raise ApplyError(str(exc)) from None
                self.lookups += 1
                present = {int(r["i"]["value"]) for r in self.client.select(query)}
                for i, quad in enumerate(chunk):
                    known[quad] = i in present

    def _change(self, quads: Sequence[Quad], value: bool, unknown_is: bool | None = None) -> list[bool]:
        present = self._presence(quads, unknown_is)
        pending = self._pending
        assert pending is not None
        changed = []
        for quad, was in zip(quads, present, strict=True):
            changed.append(pending.get(quad, was) != value)
            pending[quad] = value
        return changed

    def add(self, quads: Sequence[Quad]) -> int:
        return sum(self.add_each(quads))

    def delete(self, quads: Sequence[Quad]) -> int:
        return sum(self.delete_each(quads))

    def add_each(self, quads: Sequence[Quad]) -> list[bool]:
        """``add``, telling which quads changed the store (as requested, under ``counts=requested``)."""
        return self._change(quads, True, None if self._exact else False)

    def delete_each(self, quads: Sequence[Quad]) -> list[bool]:
        """``delete``, telling which quads changed the store (as requested, under ``counts=requested``)."""
        return self._change(quads, False, None if self._exact else True)

    def add_prefix(self, graph: Any, name: str, iri: Any) -> None:
        pass

    def delete_prefix(self, graph: Any, name: str) -> None:
        pass

    def rollback(self) -> None:
        self._pending = None
        self._known = {}
        self._guessed = set()
        self._seen = {}  # a failed request may have left anything: look up again

    def commit(self, source: str, checkpoint: Checkpoint, records: Sequence[PatchRecord]) -> None:
        pending, self._pending = self._pending or {}, None
        known, self._known = self._known, {}
        # Left out only where this group's lookup found the store already so (module docstring).
        adds = [q for q, v in pending.items() if v and not known.get(q, False)]
        deletes = [q for q, v in pending.items() if not v and known.get(q, True)]
        # Taken as absent and left so by the group: absent in the end whatever the store held.
        guessed, self._guessed = self._guessed, set()
        deletes += [q for q in guessed if q not in pending]
        with self._errors(f"{source}: writing the unit ending at byte {checkpoint.offset} failed"):
            n = self._positions.get(source)
            if n is None:
                n = self._set_up(source)
            if self._bulk and self.config.store is not None and adds:
                self._post_bulk(adds)
                adds = []
            self._write(source, n, checkpoint, records, deletes, adds)
        self._positions[source] = n + 1
        self._remember(known)
        self._remember(dict.fromkeys(guessed, False))
        self._remember(pending)
        for record in records:
            if record.patch_id is not None:
                self._ids.add(record.patch_id)
                self._head = record.patch_id

    def _remember(self, written: dict[Quad, bool]) -> None:
        """What a confirmed request left, kept up to :data:`SEEN_ROWS` rows (the oldest go first)."""
        seen = self._seen
        seen.update(written)
        excess = len(seen) - SEEN_ROWS
        if excess > 0:
            for quad in list(itertools.islice(seen, excess)):
                del seen[quad]

    def _set_up(self, source: str) -> int:
        """A log's first guard and position (0019: a request of its own, before its first unit)."""
        s = self._log(source)
        with contextlib.suppress(HttpStatus):  # made meanwhile by another applier: read back
            self._send(st.setup_request(s, source))
        state = self._read_state(source)
        if state.position is None:
            raise st.MovedError(f"{self.url}: {source}: another applier set this log up at the same time")
        return state.position

    def _send(self, text: str) -> None:
        self.requests += 1
        self.client.update(text)

    def _write(
        self,
        source: str,
        n: int,
        checkpoint: Checkpoint,
        records: Sequence[PatchRecord],
        deletes: list[Quad],
        adds: list[Quad],
    ) -> None:
        s = self._log(source)
        try:
            ops = [*data_ops(self.terms, "DELETE DATA", deletes, self._per_op)]
            ops += data_ops(self.terms, "INSERT DATA", adds, self._per_op)
        except EncodeError as exc:
            raise ApplyError(f"{source}: the unit ending at byte {checkpoint.offset}: {exc}") from None
        # Whole requests within the bounds; all but the last keep the guard (a unit too large
        # for one request is written in several, each idempotent; the checkpoint moves last).
        # A request the store finds too large to compile (Virtuoso: "10000 lines of SQL", which
        # is also what it answers after an after-image over its limit, 0019) applied nothing: the
        # bounds are halved and the rest of the unit sent again in smaller requests.
        while True:
            requests = split_requests(ops, self.config.max_request, self._per_request, self._per_request_ops)
            try:
                for body in requests[:-1]:
                    self._request(source, s, n, st.keep_guard(s, n) + body, None)
                    ops = ops[len(body) :]
                last = [st.guard_first(s, n), *requests[-1]]
                last += st.checkpoint_last(s, self.config.state, n, checkpoint, records)
                self._request(source, s, n, last, checkpoint)
                return
            except _TooLarge:
                if self._per_request_ops <= 1:
                    raise ApplyError(
                        f"{self.url}: {source}: the unit ending at byte {checkpoint.offset}: "
                        "the store refuses even one operation as too large"
                    ) from None
                self._per_request_ops = max(1, min(self._per_request_ops, len(requests[0])) // 2)
                self._per_request = max(1, self._per_request // 2)

    def _request(self, source: str, s: str, n: int, ops: list[str], checkpoint: Checkpoint | None) -> None:
        """Send one request; confirm by reading the state back; send it again where that is
        harmless and needed (see the module docstring); ``checkpoint``: it moves the log."""
        text = " ;\n".join(ops)
        mine = st.encode_checkpoint(checkpoint) if checkpoint is not None else None
        unit = f"{self.url}: {source}: the unit ending at byte {checkpoint.offset if checkpoint else '?'}"
        for attempt in (0, 1):
            failure: Exception | None = None
            try:
                self._send(text)
            except (HttpStatus, OSError, TimeoutError) as exc:
                if isinstance(exc, HttpStatus) and exc.status in _NOT_SENT:
                    raise  # wrong endpoint or credentials: said by the error table
                if isinstance(exc, HttpStatus) and too_large(exc.message):
                    # Virtuoso also says so after a transaction it aborted under a concurrent
                    # writer: only a state still at n means the request itself was too large.
                    state = self._read_state(source)
                    if state.position == n and n in state.guards:
                        raise _TooLarge from None
                    if st.settle(source, s, n, state, mine).applied:
                        return
                if isinstance(exc, HttpStatus) and exc.status in _REFUSED:
                    # Refused whole at compile time (both stores, 0019): nothing applied.
                    raise ApplyError(f"{unit}: the store refused it: HTTP {exc.status}: {exc.message}") from None
                failure = exc
            state = self._read_state(source)
            if checkpoint is None and failure is None and n in state.guards and state.position == n:
                return  # a part of a unit: written, the log still at n
            outcome = st.settle(source, s, n, state, mine)
            if outcome.repair is not None:
                with contextlib.suppress(HttpStatus):  # another applier repaired it first: read again
                    self._send(outcome.repair)
                outcome = st.settle(source, s, n, self._read_state(source), mine)
            if outcome.applied:
                return
            if failure is None and checkpoint is not None:
                raise ApplyError(f"{unit}: the store answered the request but did not apply it")
            if attempt == 1 and isinstance(failure, HttpStatus):
                raise ApplyError(f"{unit}: the store failed it twice: HTTP {failure.status}: {failure.message}")
            if attempt == 1 and failure is not None:
                raise failure
        raise AssertionError("unreachable")

    def _post_bulk(self, adds: list[Quad]) -> None:
        """A base's quads through the Graph Store Protocol: one POST of N-Quads where the store
        takes a dataset, else one POST of N-Triples per graph."""
        layout = self.config.layout
        terms = self.terms
        if layout.dataset_post and terms.default_graph is None:
            lines = []
            for s, p, o, g in adds:
                graph = terms.graph(g)
                tail = " ." if graph is None else f" {graph} ."
                lines.append(f"{terms.term(s, position='s')} {terms.term(p, position='p')} {terms.term(o)}{tail}")
            self.client.post_graph(layout.bulk_query, "\n".join(lines).encode("utf-8"), "application/n-quads")
            return
        by_graph: dict[Any, list[Quad]] = {}
        for quad in adds:
            by_graph.setdefault(quad[3], []).append(quad)
        # A graph's text is made while the store reads the one before: one POST at a time, on
        # one thread, so the connection is never shared; the client's CPU and the store's overlap.
        with ThreadPoolExecutor(max_workers=1) as sender:
            sent: Future[None] | None = None
            for quads in by_graph.values():
                g = terms.graph(quads[0][3])
                body = "\n".join([terms.triple_text(q)[1] for q in quads]).encode("utf-8")
                query = "default" if g is None else "graph=" + _quote(g[1:-1])
                if sent is not None:
                    sent.result()
                sent = sender.submit(self.client.post_graph, query, body, "application/n-triples")
            if sent is not None:
                sent.result()

    def flush(self) -> None:
        pass  # every commit is a request the store answered after committing

    def close(self) -> None:
        self.client.close()


class _TooLarge(Exception):
    """The store refused a request as too large to compile; it applied nothing (0019)."""


#: Rows whose presence is remembered from this applier's own requests (about 0.3 KB each).
SEEN_ROWS = 500_000
#: Answers to an update that mean it reached no store (wrong URL, credentials refused).
_NOT_SENT = frozenset({401, 403, 404, 405, 406, 415})
#: Answers that mean the store refused the request whole (a syntax or size rule, 0019).
_REFUSED = frozenset(range(400, 500)) - _NOT_SENT - {408, 409, 429}


def _quote(iri: str) -> str:
    return urllib.parse.quote(iri, safe="")


__all__ = ["SparqlTarget"]
