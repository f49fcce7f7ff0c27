"""Carrying a codec error from a Spark worker back to the driver as the codec's own error.

A worker's exception reaches the driver as a Spark/py4j exception whose text holds the
worker's Python traceback and the JVM's. The worker therefore raises :class:`WorkerDecodeError`,
whose message carries the :class:`DecodeError` fields as a JSON object between markers; the
driver finds the marker in the Spark exception's text and rebuilds the original
:class:`DecodeError`, so users see ``file, byte N, frame F, row R: rule`` and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

from patchsync.errors import CheckpointError, DecodeError, PatchsyncError, UsageError
from patchsync.remote.errors import StreamGap, StreamNotFound, StreamRefused, StreamUnavailable

_MARK = "PATCHSYNC-DECODE-ERROR"
_FOUND = re.compile(_MARK + r"<(\{.*?\})>" + _MARK)

#: Other one-line refusals a worker or a streaming source may raise, carried by class name:
#: the message is already the whole line (a log replaced or cut under a streaming query).
_OTHER_MARK = "PATCHSYNC-ERROR"
_OTHER_FOUND = re.compile(_OTHER_MARK + r"<(\{.*?\})>" + _OTHER_MARK)
_CARRIED: dict[str, type[PatchsyncError]] = {
    kind.__name__: kind
    # A remote log read by a streaming source's tasks refuses with its own errors (a gap, a
    # stream gone or out of reach).
    for kind in (CheckpointError, UsageError, StreamGap, StreamNotFound, StreamRefused, StreamUnavailable)
}


class WorkerDecodeError(RuntimeError):
    """A :class:`DecodeError` raised in a Spark worker, in a form that survives the trip."""


def encode_decode_error(exc: DecodeError) -> WorkerDecodeError:
    """Wrap ``exc`` for the trip from a worker to the driver."""
    fields = {
        "rule": exc.rule,
        "source": exc.source,
        "offset": exc.offset,
        "frame": exc.frame,
        "row": exc.row,
        "line": exc.line,
    }
    return WorkerDecodeError(f"{_MARK}<{json.dumps(fields)}>{_MARK} {exc}")


def encode_error(exc: PatchsyncError) -> WorkerDecodeError:
    """Wrap a :class:`DecodeError`, :class:`CheckpointError` or :class:`UsageError` for the trip
    from a worker (or the process running a streaming source) to the driver."""
    if isinstance(exc, DecodeError):
        return encode_decode_error(exc)
    fields = {"kind": type(exc).__name__, "message": str(exc)}
    return WorkerDecodeError(f"{_OTHER_MARK}<{json.dumps(fields)}>{_OTHER_MARK} {exc}")


def decode_error_in(text: str) -> PatchsyncError | None:
    """The :class:`DecodeError` (or other carried refusal) in a Spark exception's text, if any."""
    m = _FOUND.search(text)
    if m is None:
        other = _OTHER_FOUND.search(text)
        if other is None:
            return None
        doc = json.loads(other.group(1))
        return _CARRIED.get(doc["kind"], PatchsyncError)(doc["message"])
    f = json.loads(m.group(1))
    return DecodeError(
        f["rule"], source=f["source"], offset=f["offset"], frame=f["frame"], row=f["row"], line=f["line"]
    )


@contextmanager
def codec_errors() -> Iterator[None]:
    """Re-raise a Spark job failure caused by a bad input file as the codec's :class:`DecodeError`.

    Wrap the Spark actions (``collect``, ``write``, ``count``) of a job that reads patchsync
    formats. Other failures propagate unchanged.
    """
    try:
        yield
    except PatchsyncError:
        raise
    except Exception as exc:
        found = decode_error_in(str(exc))
        if found is None:
            raise
        raise found from None
