"""Starting a replica from a snapshot instead of the whole history (``--base FILE``).

:func:`load_base` loads an RDF file into an *empty* target. A Jelly-RDF snapshot written
by ``patchsync snapshot`` carries its position (:mod:`.snapshot_file`); the target then
gets, in the same target transaction as the quads (docs/design.md §10):

- a patch record of the snapshot's last patch id, so that the target's head is that id and
  the next patch must follow it (the chain check of docs/design.md §4);
- the snapshot's checkpoints of the sources given (``logs``), copied as they are: a stream
  source resumes after its stored sequence (also when given under another address of the
  same stream, see :func:`stream_checkpoints`), a file log at the same path with the same
  fingerprint after its unit. The snapshot's checkpoints of other sources are not copied:
  the replica does not follow them, and ``status`` would list them and ask their servers
  for a lag (the snapshot file keeps them; a replica that is to follow one is started with
  it given);
- for each served topic given (``grpc://…``), a checkpoint just past the snapshot's last
  patch, asked of the server (:func:`address_checkpoints`);
- for each log given (``logs``: files, or directories of ``.jellyp`` files in file-name
  order), a checkpoint just past the snapshot's last patch, found by reading the log: the
  patches up to and including it are passed over, and the applier's chain check makes
  sure the next one follows it. Logs that do not hold that patch must start right after
  it (their first ``prev`` is the snapshot's head), else nothing is loaded (ChainError).

Any other RDF file (``.nq``, ``.trig``, ``.rt``, ``.rpb``, a ``.jelly`` without position)
is a starting state without position, as Spark's replay takes one: the logs are then
applied from their beginning on top of it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.apply.snapshot_file import SnapshotPosition, read_position
from patchsync.apply.target import Checkpoint, PatchRecord, Target, abilities_of, dumpable
from patchsync.codec.rdf_decoder import RdfDecoder
from patchsync.errors import ChainError, UsageError
from patchsync.events import Event, Namespace, Statement
from patchsync.logs.fingerprint import FINGERPRINT_BYTES, fingerprint
from patchsync.logs.patch_logs import format_of, iter_stream_events
from patchsync.logs.rdf_files import read_rdf_bytes
from patchsync.options import Limits
from patchsync.sources import log_files, resolve_source, resolve_sources
from patchsync.terms.ntriples import NTriplesTerms, scan_term
from patchsync.units import patch_ends

#: Quads handed to the target per ``add`` call.
BATCH = 5000
#: The checkpoint source under which a base file is recorded (``base:`` + its path).
BASE_SOURCE_PREFIX = "base:"

_NT = NTriplesTerms()


@dataclass(frozen=True, slots=True)
class BaseReport:
    """What :func:`load_base` loaded."""

    path: Path
    quads: int
    #: ``None`` for a base without position.
    position: SnapshotPosition | None
    #: The checkpoints installed for the logs given, by source name.
    log_checkpoints: dict[str, Checkpoint]


def _patch_ends(path: Path, limits: Limits | None) -> Iterator[tuple[Event, str | None, str | None]]:
    """Each complete patch of the log: its end event, id and prev."""
    with open(path, "rb") as f:
        events = iter_stream_events(f, format_of(path), adapter=_NT, source=str(path), limits=limits)
        for end in patch_ends(events, _NT, source=str(path)):
            yield end.end, end.patch.id, end.patch.prev


def log_checkpoints(
    paths: Iterable[str | os.PathLike[str]], head: str, *, limits: Limits | None = None
) -> dict[str, Checkpoint]:
    """Checkpoints that make the logs continue right after patch ``head`` (see the module docstring).

    Every log before the one holding ``head`` is passed over whole; the one holding it up
    to and including it. Raises :class:`ChainError` if no log holds ``head`` and the first
    patch does not follow it.
    """
    files = log_files(paths)
    found: dict[str, Checkpoint] = {}
    first: tuple[Path, str | None, str | None] | None = None
    now = time.time()
    for path in files:
        with open(path, "rb") as f:
            fp = fingerprint(f.read(FINGERPRINT_BYTES), format_of(path))
        patches = 0
        last_end: Event | None = None
        last_id: str | None = None
        for end, patch_id, prev in _patch_ends(path, limits):
            if first is None:
                first = (path, patch_id, prev)
            patches += 1
            last_end, last_id = end, patch_id or last_id
            if patch_id == head:
                found[str(path.resolve())] = Checkpoint(end.offset, end.frame, end.row, patches, head, fp, now)
                return found
        if last_end is not None:
            found[str(path.resolve())] = Checkpoint(
                last_end.offset, last_end.frame, last_end.row, patches, last_id, fp, now
            )
    if first is None or first[2] == head:
        return {}  # the logs start right after the snapshot (or hold nothing yet)
    path, patch_id, prev = first
    raise ChainError(
        f"{path}: the logs do not hold the base's last patch {head}, and their first patch "
        f"{patch_id or '(no id)'} follows {prev or '(no prev: a first patch)'}, not {head}: "
        "they do not continue the base"
    )


def stream_checkpoints(paths: Iterable[str | os.PathLike[str]], position: SnapshotPosition) -> dict[str, Checkpoint]:
    """The snapshot's stream checkpoints moved to the addresses given for the same streams.

    A stream source is named by its address (``nats://HOST:PORT/STREAM``); a replica on
    another machine may reach the same stream through another host name. Returns the
    checkpoints under their new names (the old ones are not followed). The checkpoint keeps
    the stream's fingerprint (its name and creation time), so the applier still refuses a
    different stream of the same name.
    """
    by_stream: dict[tuple[str, str], list[str]] = {}
    for name in position.sources:
        old = resolve_source(name)
        if not old.is_path:
            by_stream.setdefault((old.kind.name, old.address.stream), []).append(name)
    moved: dict[str, Checkpoint] = {}
    for source in map(resolve_source, paths):
        if source.is_path:
            continue
        address = source.address
        candidates = by_stream.get((source.kind.name, address.stream), [])
        if str(address) not in position.sources and len(candidates) == 1:
            moved[str(address)] = position.sources[candidates[0]]
    return moved


def address_checkpoints(
    paths: Iterable[str | os.PathLike[str]], head: str, known: Iterable[str]
) -> dict[str, Checkpoint]:
    """Checkpoints just past patch ``head`` for the network sources given that can tell one
    (their kind's ``checkpoint_after`` role: a served topic finds the version of ``head``),
    except those named in ``known``. Raises :class:`ChainError` if such a source does not
    hold ``head``: it does not continue the base."""
    skip = set(known)
    found: dict[str, Checkpoint] = {}
    for source in map(resolve_source, paths):
        if source.is_path or not source.has("checkpoint_after"):
            continue
        name = str(source.address)
        if name in skip or source.name in skip:
            continue
        checkpoint = source.checkpoint_after()(source.name, head)
        if checkpoint is None:
            raise ChainError(
                f"{source.name}: holds no patch {head}, the base's last patch: it does not continue the base"
            )
        found[name] = checkpoint
    return found


def _followed(logs: Iterable[str | os.PathLike[str]]) -> Callable[[str], bool]:
    """Whether a source name (a checkpoint's) is one of the sources given, which the replica
    follows: a log file given or in a directory given (also one written there later), or an
    address given. Only their checkpoints are taken from a snapshot (module docstring)."""
    names: set[str] = set()
    directories: set[str] = set()
    for source in resolve_sources(logs):
        if source.is_path:
            path = Path(source.address).resolve()
            (directories if path.is_dir() else names).add(str(path))
        else:
            names |= {source.name, str(source.address)}

    def followed(name: str) -> bool:
        if name in names:
            return True
        source = resolve_source(name)
        return source.is_path and str(Path(source.address).parent) in directories

    return followed


def _require_empty(target: Target, base: Path) -> None:
    dump = dumpable(target)
    quads = iter(dump.quads())
    try:
        has_quads = next(quads, None) is not None
    finally:
        close = getattr(quads, "close", None)
        if close is not None:
            close()  # a generator holding a read transaction ends it now
    if has_quads or dump.sources() or target.head() is not None:
        raise UsageError(
            f"{base}: a base is loaded only into an empty target, and this one holds data or checkpoints "
            "(to continue it, apply the logs without a base)"
        )


Statements = Callable[[], Iterator[tuple[str, str, str, str | None]]]


def _jelly_events(path: Path, limits: Limits | None) -> Iterator[Any]:
    decoder: RdfDecoder[str] = RdfDecoder(_NT, source=str(path), limits=limits)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            decoder.feed(chunk)
            yield from decoder
    decoder.close()
    yield from decoder


def _read_base(path: Path, fmt: str, limits: Limits | None) -> tuple[Statements, list[tuple[str, str]], int]:
    """The base's statements (a function reading them), namespaces and statement count.

    The whole file is read and checked here, before the target is touched. A Jelly file is
    then read a second time as the statements are loaded instead of being held in memory;
    the other formats are parsed whole (rdflib and Jena's formats have no streaming reader here).
    """
    if fmt != "jelly":
        content = read_rdf_bytes(path.read_bytes(), fmt, source=str(path), limits=limits)
        quads = content.quads
        return lambda: iter(quads), content.namespaces, len(quads)
    namespaces = []
    count = 0
    for event in _jelly_events(path, limits):
        kind = type(event)
        if kind is Statement:
            count += 1
        elif kind is Namespace:
            namespaces.append((event.name, _NT.unpack(event.iri)[1]))

    def streamed() -> Iterator[tuple[str, str, str, str | None]]:
        for event in _jelly_events(path, limits):
            if type(event) is Statement:
                yield event.s, event.p, event.o, event.g or None

    return streamed, namespaces, count


def _load(
    target: Target,
    statements: Iterator[tuple[str, str, str, str | None]],
    namespaces: list[tuple[str, str]],
    position: SnapshotPosition | None,
    term: Callable[[str], Any],
) -> int:
    """Add the base's quads and namespaces in the open unit; returns how many quads were new."""
    count = 0
    batch: list[tuple[Any, Any, Any, Any]] = []
    for s, p, o, g in statements:
        batch.append((term(s), term(p), term(o), term(g) if g else None))
        if len(batch) >= BATCH:
            count += target.add(batch)
            batch = []
    if batch:
        count += target.add(batch)
    for name, iri in namespaces:
        target.add_prefix(None, name, term(_NT.iri(iri)))
    if position is not None:
        for g, name, iri in position.graph_namespaces:
            target.add_prefix(term(g), name, term(iri))
    return count


def load_base(
    target: Target,
    path: str | os.PathLike[str],
    logs: Iterable[str | os.PathLike[str]] = (),
    *,
    limits: Limits | None = None,
    name: str | None = None,
) -> BaseReport:
    """Load the RDF file ``path`` into the empty ``target`` with its position (module docstring).

    Refuses a target holding quads, checkpoints or patches (:class:`UsageError`). Nothing
    is written when the file is unreadable or the logs do not continue it. ``name`` is how
    the target records the base (default: the file's path), e.g. the address it came from.
    """
    base = Path(path)
    fmt = formats.require(base, None, formats.RDF_CONVERT, "RDF").name
    source = str(base)
    position = read_position(base) if fmt == "jelly" else None
    statements, namespaces, total = _read_base(base, fmt, limits)
    _require_empty(target, base)
    logs = list(logs)
    followed = _followed(logs)
    checkpoints = {n: cp for n, cp in position.sources.items() if followed(n)} if position is not None else {}
    from_logs: dict[str, Checkpoint] = {}
    if position is not None and position.head is not None:
        from_logs = log_checkpoints(logs, position.head, limits=limits) | stream_checkpoints(logs, position)
        from_logs |= address_checkpoints(logs, position.head, [*checkpoints, *from_logs])
        checkpoints |= from_logs
    own = BASE_SOURCE_PREFIX + (name or str(base.resolve()))
    size = base.stat().st_size
    with open(base, "rb") as f:
        fp = fingerprint(f.read(FINGERPRINT_BYTES), fmt)
    for name in [*checkpoints, own]:
        target.checkpoint(name)  # the SQL ledger learns each source's (absent) version here
    adapter = target.adapter
    native = isinstance(adapter, NTriplesTerms)

    def term(text: str) -> Any:
        return text if native else scan_term(text, 0, adapter)[0]

    # The source checkpoints first: each is a unit of its own with no data, and they all
    # share the database transaction that the quads' unit commits last (docs/design.md §2).
    for name, cp in checkpoints.items():
        target.begin()
        target.commit(name, cp, [])
    bulk = abilities_of(target).bulk_load  # checked before the target is touched
    target.begin()
    try:
        if bulk is not None:
            # Into an empty target, in one unit: its lookup indexes are built after the
            # quads instead of with each (SQL: patchsync.apply.targets.sql.bulk).
            bulk.defer_indexes()
        count = _load(target, statements(), namespaces, position, term)
    except BaseException:
        target.rollback()  # the caller discards the target (see cli.common.close_target)
        raise
    head = position.head if position is not None else None
    records = []
    if head is not None:
        records.append(
            PatchRecord(head, None, own, size, 0, 0, count, 0, 0, time.time(), (("id", head), ("base", name or source)))
        )
    target.commit(own, Checkpoint(size, 0, 0, 0, head, fp), records)
    target.flush()
    return BaseReport(base, total, position, from_logs)


__all__ = [
    "BASE_SOURCE_PREFIX",
    "BaseReport",
    "address_checkpoints",
    "load_base",
    "log_checkpoints",
    "stream_checkpoints",
]
