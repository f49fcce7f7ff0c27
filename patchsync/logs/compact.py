"""The net effect of patch logs as one patch (``patchsync compact LOG... -o NET.jellyp``).

Applying a patch is set semantics: after ``A x`` then ``D x`` the statement is absent
whatever it was before, after ``D x`` then ``A x`` it is present. So the net effect of a
run of patches is, for every statement (and prefix) they touch, the last operation on it;
nothing else is needed and nothing untouched changes. The units are those the applier sees
(the one unit reader of :mod:`patchsync.units`): committed transactions and the rows outside
transactions count, aborted transactions (``TA``) were never applied and are left out.

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
    Options,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxCommit,
    TxStart,
)
from patchsync.logs.files import replaced_whole
from patchsync.logs.payloads import NT_TERMS, log_events, text_options
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.units import Unit, read_units


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

    def read(self, path: str, limits: Limits | None) -> None:
        for item in read_units(self._events(path, limits), source=path):
            if type(item) is Unit:
                if item.committed:  # an aborted transaction applied nothing
                    self._commit(item.rows)
            else:
                self._end_patch(path, item.patch.id, item.patch.prev)

    def _events(self, path: str, limits: Limits | None) -> Iterator[Event]:
        for event in log_events(path, limits=limits):
            if type(event) is Options:
                self.options = self.options or event.options
            yield event

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

    def _commit(self, rows: list[Event]) -> None:
        for event in rows:
            if isinstance(event, (Add, Delete)):
                key = tuple(event[:4])
                self.statements.pop(key, None)  # re-insert: the output follows the last change
                self.statements[key] = type(event) is Add
            elif isinstance(event, (PrefixAdd, PrefixDelete)):
                key2 = (event.name, event.g)
                self.prefixes.pop(key2, None)
                self.prefixes[key2] = event

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
    written. A log that ends inside a unit or a patch (cut short, or still being written)
    fails with :class:`DecodeError` naming the file and byte, and nothing is written. The
    logs must chain (each patch's ``prev`` the id before it; a :class:`ChainError`
    otherwise). See the module docstring for the net patch's ids.
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
    with replaced_whole(out) as f:
        f.write(data)
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
