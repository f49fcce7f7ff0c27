"""The net effect of patch logs as one patch (``patchsync compact LOG... -o NET.jellyp``).

Applying a patch is set semantics: after ``A x`` then ``D x`` the statement is absent
whatever it was before, after ``D x`` then ``A x`` it is present. So the net effect of a
run of patches is, for every statement (and prefix) they touch, the last operation on it;
nothing else is needed and nothing untouched changes. Changes of aborted transactions
(``TA``) were never applied and are left out.

The net patch stands for the whole run in a chain: its ``id`` is the last patch's and its
``prev`` the first patch's. A replica at the first patch's ``prev`` applies it and then
follows the stream after the run's last patch; a replica that already applied the last
patch skips it (same id); one in between is refused by the chain check (its head is not
the net patch's ``prev``), as it must be, since the net patch would undo nothing of what
it applied twice but could reorder it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from patchsync import formats
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import RdfPatchTextWriter
from patchsync.errors import ChainError, UsageError
from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxAbort,
    TxCommit,
    TxStart,
)
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.streams.payloads import NT_TERMS, read_patches, text_options


@dataclass(frozen=True, slots=True)
class CompactReport:
    """What :func:`compact_logs` read and wrote."""

    patches: int
    first_prev: str | None
    last_id: str | None
    added: int
    deleted: int


class _Net:
    """The last operation on each statement and prefix, over a run of patches."""

    def __init__(self) -> None:
        self.statements: dict[tuple[Any, ...], bool] = {}  # key -> added (else deleted)
        self.prefixes: dict[tuple[str, Any], Event] = {}
        self.options: PatchOptions | None = None
        self.patches = 0
        self.first_prev: str | None = None
        self.last_id: str | None = None
        self._unit: list[Event] = []  # changes of the open transaction, kept until TC/TA

    def read(self, path: str, limits: Limits | None) -> None:
        for patch in read_patches(path, limits=limits):
            self.options = self.options or patch.options
            for event in patch.events:
                kind = type(event)
                if kind is TxCommit:
                    self._commit()
                elif kind is TxAbort:
                    self._unit = []
                elif kind is Add or kind is Delete or kind is PrefixAdd or kind is PrefixDelete:
                    self._unit.append(event)
            self._commit()  # changes outside a transaction are applied as they come
            self._end_patch(path, patch.patch_id, patch.prev)

    def _end_patch(self, path: str, patch_id: str | None, prev: str | None) -> None:
        self.patches += 1
        if self.patches == 1:
            self.first_prev = prev
        elif prev is not None and self.last_id is not None and prev != self.last_id:
            raise ChainError(
                f"{path}: patch {patch_id or '(no id)'} has prev {prev}, but the patch before it is "
                f"{self.last_id}: the logs are not one chain"
            )
        self.last_id = patch_id or self.last_id

    def _commit(self) -> None:
        for event in self._unit:
            kind = type(event)
            if kind is Add or kind is Delete:
                key = tuple(event[:4])
                self.statements.pop(key, None)  # re-insert: the output follows the last change
                self.statements[key] = kind is Add
            else:
                key2 = (event.name, event.g)  # type: ignore[union-attr]
                self.prefixes.pop(key2, None)
                self.prefixes[key2] = event
        self._unit = []

    def events(self) -> Iterator[Event]:
        if self.last_id is not None:
            yield Header("id", f"<{self.last_id}>")
        if self.first_prev is not None:
            yield Header("prev", f"<{self.first_prev}>")
        yield TxStart()
        yield from self.prefixes.values()
        for (s, p, o, g), added in self.statements.items():
            yield (Add if added else Delete)(s, p, o, g)
        yield TxCommit()
        yield PatchEnd()


def compact_logs(
    paths: Iterable[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    limits: Limits | None = None,
) -> CompactReport:
    """Write the net effect of the logs (one chain, in order) to ``out`` as one patch.

    ``out`` is a ``.jellyp`` or ``.rdfp`` file, replaced only once the whole output is
    written. A log still being written counts with its complete patches. The logs must chain (each patch's ``prev`` the id before it; a
    :class:`ChainError` otherwise). See the module docstring for the net patch's ids.
    """
    logs = [os.fspath(p) for p in paths]
    if not logs:
        raise UsageError("compact needs at least one log")
    out = Path(out)
    out_fmt = formats.require(out, None, formats.PATCH_LOG, "patch", nameable=False).name
    net = _Net()
    for path in logs:
        net.read(path, limits)
    events = list(net.events())
    options = net.options or text_options(events)
    options = replace(options, stream_type=StreamType.PUNCTUATED)
    data = _encode(events, options, out_fmt)
    partial = out.with_name(out.name + ".partial")
    partial.write_bytes(data)
    partial.replace(out)
    added = sum(1 for v in net.statements.values() if v)
    return CompactReport(net.patches, net.first_prev, net.last_id, added, len(net.statements) - added)


def _encode(events: list[Event], options: PatchOptions, fmt: str) -> bytes:
    if fmt == "jellyp":
        encoder: PatchEncoder[str] = PatchEncoder(options, NT_TERMS)
        for event in events:
            encoder.send(event)
        encoder.finish()
        return encoder.take()
    writer: RdfPatchTextWriter[str] = RdfPatchTextWriter(NT_TERMS, segments=True)
    for event in events:
        writer.send(event)
    return writer.take().encode("utf-8")
