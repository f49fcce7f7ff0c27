"""Joining and appending patch logs so that the result still decodes.

Jelly-Patch streams carry lookup tables (names, prefixes, datatypes) that later rows refer
to by id; two logs written separately and joined byte by byte (``cat a.jellyp b.jellyp``)
make the second log's rows resolve against the first log's tables. :func:`append_logs`
decodes each source (``.jellyp`` or ``.rdfp``) and re-encodes its patches onto the
destination through :class:`~patchsync.logs.patch_logs.LogAppender`, which locks the
destination, repeats its options and cuts a trailing partial frame.

The chain rule is every writer's (:mod:`patchsync.chains`, docs/design.md §6): the patches
the destination already holds (by ``H id``) are skipped and counted, so appending the same
logs again appends nothing; the others must continue the destination's head, the first one
the head itself, each next the patch before it. The rule is applied to the destination as
read under its lock, held from that read to the last byte written, so of two concurrent
appends that follow one head exactly one appends; the other waits for the lock (up to
:data:`LOCK_WAIT` seconds), then finds its patches held or the head moved. A broken chain
raises :class:`ChainError` naming the source, the patch, the destination and its head
before anything is written; any later failure truncates the destination back to where it
was. ``chain="ignore"`` appends every patch as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchsync.chains import ChainCheck, held_prefix
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import FormatError, UsageError, param
from patchsync.events import Event, Options, PatchEnd
from patchsync.logs.convert import FeatureScan
from patchsync.logs.files import LogFile
from patchsync.logs.patch_logs import CHUNK_SIZE, LogAppender, format_of, read_events
from patchsync.options import Limits, PatchOptions
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import chain_head, patch_ends

#: Seconds an append waits for another writer of the destination before refusing.
LOCK_WAIT = 10.0


@dataclass(frozen=True, slots=True)
class AppendReport:
    """What one :func:`append_logs` run did."""

    #: Patches written to the destination.
    appended: int
    #: Patches of the sources the destination already held (not written again).
    skipped: int
    #: The destination's last patch id after the run.
    head: str | None


@dataclass(frozen=True, slots=True)
class _Patch:
    source: str
    number: int
    patch_id: str | None
    prev: str | None


def append_logs(
    dest: str | os.PathLike[str],
    sources: Sequence[str | os.PathLike[str]],
    *,
    options: PatchOptions | None = None,
    limits: Limits | None = None,
    fsync: bool = False,
    chain: str = "strict",
) -> AppendReport:
    """Append the patches of ``sources`` (in order) to the ``.jellyp`` log ``dest``.

    ``dest`` is created when missing, with ``options`` or else the features the sources
    use. Patches ``dest`` already holds are skipped (see the module docstring). Raises
    :class:`ChainError` for a broken chain, :class:`UsageError` for a source that is the
    destination, and the decoders' :class:`DecodeError` for a malformed source (naming file
    and byte); nothing is appended then.
    """
    if chain not in ("strict", "ignore"):
        raise UsageError(f"{param('chain', chain)}: expected 'strict' or 'ignore'").naming(("chain", chain))
    dest_path = Path(dest)
    if format_of(dest_path) != "jellyp":
        raise FormatError(f"{dest}: logs are appended to a .jellyp file (RDF Patch text is one patch per file)")
    if not sources:
        raise UsageError("nothing to append: name at least one source log")
    for src in sources:
        format_of(src)
        if dest_path.exists() and Path(src).resolve() == dest_path.resolve():
            raise UsageError(f"{src}: a log cannot be appended to itself")
    adapter = NTriplesTerms()
    # One pass over the sources before the lock: their chain headers, and the features a
    # new destination declares (as convert does). A log that exists keeps its own options.
    scan = FeatureScan()
    first_options, patches = _read_sources(sources, adapter, limits, scan)
    created = not dest_path.exists()
    new_options = (options or scan.options(first_options)) if created else None
    strict = chain == "strict"
    appender = LogAppender(
        dest_path, new_options, adapter, fsync=fsync, wait=LOCK_WAIT, chain=chain, collect_ids=strict
    )
    start = appender.size
    try:
        scan.require(appender.options, dest, "appended")
        skipped = 0
        if strict:
            skipped, rest = held_prefix(
                lambda: iter(patches), lambda p: (p.patch_id, p.prev), appender.head, appender.ids
            )
            check = ChainCheck(appender.head, str(dest), refused="nothing was appended")
            for p in rest:
                check.check(p.patch_id, p.prev, p.source)
        appender.write(_content(sources, adapter, limits, skipped))
        appender.close()
    except BaseException:
        # Nothing half-appended: back to the log as it was (the lock is still held). A log
        # this call created is removed only while still empty: another writer may have
        # created it too and appended first.
        if appender.touched:
            os.truncate(dest_path, start)
        if created and start == 0:
            dest_path.unlink(missing_ok=True)
        appender.abandon()
        raise
    return AppendReport(len(patches) - skipped - appender.skipped, skipped + appender.skipped, appender.head)


def log_head(path: str | os.PathLike[str], adapter: TermAdapter[Any] | None = None) -> str | None:
    """The ``H id`` IRI of the last complete patch of a ``.jellyp`` log (``None`` if none).

    A trailing partial frame is ignored, as :class:`LogAppender` cuts it.
    """
    decoder: PatchDecoder[Any] = PatchDecoder(adapter or NTriplesTerms(), source=str(path))

    def events() -> Iterator[Event]:
        with LogFile(path) as f:
            while chunk := f.read(CHUNK_SIZE):
                decoder.feed(chunk)
                yield from decoder

    return chain_head(events(), decoder.adapter)[0]


def _read_sources(
    sources: Sequence[str | os.PathLike[str]],
    adapter: TermAdapter[Any],
    limits: Limits | None,
    scan: FeatureScan,
) -> tuple[PatchOptions | None, list[_Patch]]:
    """Decode every source once: the options of the first Jelly-Patch source, and each
    patch's id and prev; the features used are noted in ``scan``."""
    first: PatchOptions | None = None
    patches: list[_Patch] = []
    for src in sources:
        found: list[PatchOptions] = []
        events = _noted(read_events(src, adapter=adapter, limits=limits), scan, str(src), found)
        for number, end in enumerate(patch_ends(events, adapter, source=str(src)), 1):
            patches.append(_Patch(str(src), number, end.patch.id, end.patch.prev))
        first = first or (found[0] if found else None)
    return first, patches


def _noted(events: Iterable[Event], scan: FeatureScan, source: str, options: list[PatchOptions]) -> Iterator[Event]:
    """``events`` as they come, with the features they use noted in ``scan`` and their options in ``options``."""
    for event in events:
        scan.see(event, source)
        if type(event) is Options:
            options.append(event.options)
        yield event


def _content(
    sources: Sequence[str | os.PathLike[str]], adapter: TermAdapter[Any], limits: Limits | None, skip: int
) -> Iterator[Event]:
    """The events of the sources' patches after the first ``skip`` (the options row belongs
    to the destination stream; the appender writes its own)."""
    ended = 0
    for src in sources:
        for event in read_events(src, adapter=adapter, limits=limits):
            kind = type(event)
            if ended >= skip and kind is not Options:
                yield event
            ended += kind is PatchEnd


__all__ = ["LOCK_WAIT", "AppendReport", "append_logs", "log_head"]
