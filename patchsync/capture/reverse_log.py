"""Reversing a whole log of real changes (``patchsync reverse``)."""

from __future__ import annotations

import io
from typing import IO

from patchsync.capture.diff import reverse
from patchsync.events import Options
from patchsync.logs.convert import reversal_options
from patchsync.logs.patch_logs import iter_stream_events, write_events
from patchsync.terms.rdflib_adapter import RdflibTerms


def reverse_log(data: bytes, in_fmt: str, out: IO[bytes], out_fmt: str, *, source: str) -> None:
    """Write the patches that undo the log in ``data`` (a log of real changes), last first.

    Reversing needs the whole log (the last patch comes first), so it is decoded and
    checked completely before anything is written.
    """
    events = list(iter_stream_events(io.BytesIO(data), in_fmt, adapter=RdflibTerms(), source=source))
    found = next((e.options for e in events if type(e) is Options), None)
    inverse = list(reverse(events))
    write_events(inverse, out, out_fmt, options=reversal_options(found), adapter=RdflibTerms())
