"""Joining and appending patch logs so that the result still decodes.

Jelly-Patch streams carry lookup tables (names, prefixes, datatypes) that later rows refer
to by id; two logs written separately and joined byte by byte (``cat a.jellyp b.jellyp``)
make the second log's rows resolve against the first log's tables. :func:`append_logs`
decodes each source (``.jellyp`` or ``.rdfp``) and re-encodes its patches onto the
destination through :class:`~patchsync.logs.patch_logs.LogAppender`, which locks the
destination, repeats its options and cuts a trailing partial frame.

The chain is checked first (docs/design.md §6): each appended patch whose ``H prev`` is present
must name the current head (the ``H id`` of the destination's last patch, then of each
appended patch in turn). The head is the one read under the destination's lock, held from
the check to the last byte written, so of two concurrent appends that follow one head
exactly one appends; the other waits for the lock (up to :data:`LOCK_WAIT` seconds), then
finds the head moved. A broken chain raises :class:`ChainError` naming both ids before
anything is written; any later failure truncates the destination back to where it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.errors import ChainError, FormatError, UsageError
from patchsync.events import Event, Options, PatchEnd
from patchsync.logs.convert import FeatureScan
from patchsync.logs.patch_logs import CHUNK_SIZE, LogAppender, format_of, read_events
from patchsync.options import Limits, PatchOptions
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.units import chain_head, patch_ends

#: Seconds an append waits for another writer of the destination before refusing.
LOCK_WAIT = 10.0


def append_logs(
    dest: str | os.PathLike[str],
    sources: Sequence[str | os.PathLike[str]],
    *,
    options: PatchOptions | None = None,
    limits: Limits | None = None,
    fsync: bool = False,
) -> int:
    """Append the patches of ``sources`` (in order) to the ``.jellyp`` log ``dest``.

    ``dest`` is created when missing, with ``options`` or else the first Jelly-Patch
    source's options. Returns the number of patches appended. Raises :class:`ChainError`
    for a broken chain, :class:`UsageError` for a source that is the destination, and the
    decoders' :class:`DecodeError` for a malformed source (naming file and byte).
    """
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
    # One pass over the sources before the lock: the features a new destination declares,
    # and the chain against the head as it was. Under the lock the head is read again, and
    # the chain checked again if another writer moved it in between.
    head = log_head(dest_path, adapter) if dest_path.exists() else None
    scan = FeatureScan()
    first_options = _check_chain(dest_path, head, sources, adapter, limits, scan)
    created = not dest_path.exists()
    # A log that exists keeps its own options (the appender reads them); a new one declares
    # every feature the sources use (as convert does).
    new_options = (options or scan.options(first_options)) if created else None
    appender = LogAppender(dest_path, new_options, adapter, fsync=fsync, wait=LOCK_WAIT)
    start = appender.size  # after the appender cut any partial frame
    patches = [0]
    try:
        scan.require(appender.options, dest, "appended")
        if appender.head != head:
            _check_chain(dest_path, appender.head, sources, adapter, limits, FeatureScan())
        for src in sources:
            appender.write(_content(src, adapter, limits, patches))
        appender.close()
    except BaseException:
        # Nothing half-appended: back to the log as it was (the lock is still held). A log
        # this call created is removed only while still empty: another writer may have
        # created it too and appended first.
        os.truncate(dest_path, start)
        if created and start == 0:
            dest_path.unlink(missing_ok=True)
        appender.abandon()
        raise
    return patches[0]


def log_head(path: str | os.PathLike[str], adapter: TermAdapter[Any] | None = None) -> str | None:
    """The ``H id`` IRI of the last complete patch of a ``.jellyp`` log (``None`` if none).

    A trailing partial frame is ignored, as :class:`LogAppender` cuts it.
    """
    decoder: PatchDecoder[Any] = PatchDecoder(adapter or NTriplesTerms(), source=str(path))

    def events() -> Iterator[Event]:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK_SIZE):
                decoder.feed(chunk)
                yield from decoder

    return chain_head(events(), decoder.adapter)[0]


def _check_chain(
    dest: Path,
    head: str | None,
    sources: Sequence[str | os.PathLike[str]],
    adapter: TermAdapter[Any],
    limits: Limits | None,
    scan: FeatureScan,
) -> PatchOptions | None:
    """Decode every source once, checking ``prev`` against the running head and noting the
    features used in ``scan``; returns the options of the first Jelly-Patch source."""
    first: PatchOptions | None = None
    for src in sources:
        found: list[PatchOptions] = []
        events = _noted(read_events(src, adapter=adapter, limits=limits), scan, str(src), found)
        for end in patch_ends(events, adapter, source=str(src)):
            patch_id, prev = end.patch.id, end.patch.prev
            if prev is not None and head is not None and prev != head:
                raise ChainError(
                    f"{src}: patch {'<' + patch_id + '>' if patch_id else '(no id)'} has prev <{prev}> but the head of {dest} "
                    f"is <{head}> (a gap or a fork); nothing was appended"
                )
            head = patch_id or head
        first = first or (found[0] if found else None)
    return first


def _noted(events: Iterable[Event], scan: FeatureScan, source: str, options: list[PatchOptions]) -> Iterator[Event]:
    """``events`` as they come, with the features they use noted in ``scan`` and their options in ``options``."""
    for event in events:
        scan.see(event, source)
        if type(event) is Options:
            options.append(event.options)
        yield event


def _content(
    src: str | os.PathLike[str], adapter: TermAdapter[Any], limits: Limits | None, patches: list[int]
) -> Iterator[Event]:
    # The options row belongs to the destination stream; the appender writes its own.
    for event in read_events(src, adapter=adapter, limits=limits):
        kind = type(event)
        if kind is not Options:
            patches[0] += kind is PatchEnd
            yield event


__all__ = ["append_logs", "log_head"]
