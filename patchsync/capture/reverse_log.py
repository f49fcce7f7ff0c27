"""Reversing a whole log of real changes (``patchsync reverse``)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import IO

from patchsync.capture.diff import reverse
from patchsync.errors import EncodeError
from patchsync.events import Event, Options
from patchsync.logs.convert import FeatureScan, reversal_options
from patchsync.logs.patch_logs import iter_stream_events, write_events
from patchsync.terms.ntriples import NTriplesTerms


def reverse_log(data: bytes, in_fmt: str, out: IO[bytes], out_fmt: str, *, source: str) -> None:
    """Write the patches that undo the log in ``data`` (a log of real changes), last first.

    Reversing needs the whole log (the last patch comes first), so it is decoded and
    checked completely before anything is written. Terms stay N-Triples strings, so every
    term the log holds (RDF-star, generalized statements) is written back exactly, and the
    output declares every feature the inverse uses. The inverse's first patch follows the
    log's last one (see :func:`~patchsync.capture.diff.reverse`).
    """
    adapter = NTriplesTerms()
    events = list(iter_stream_events(io.BytesIO(data), in_fmt, adapter=adapter, source=source))
    found = next((e.options for e in events if type(e) is Options), None)
    inverse = list(reverse(events, adapter))
    scan = FeatureScan()
    for event in inverse:
        scan.see(event, source)
    options = scan.options(reversal_options(found))
    written: list[Event] = []

    def tracked() -> Iterator[Event]:
        for event in inverse:
            written.append(event)
            yield event

    try:
        write_events(tracked(), out, out_fmt, options=options, adapter=adapter)
    except EncodeError as exc:
        # Each inverted row keeps the position of the row it undoes: name that one.
        at = f", byte {written[-1].offset}" if written and written[-1].offset else ""
        raise EncodeError(f"{source}{at}: its inverse cannot be written as {out_fmt}: {exc}") from None
