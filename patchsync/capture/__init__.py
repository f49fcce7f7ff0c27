"""Change capture for rdflib: every change made through rdflib's API becomes RDF Patch.

:class:`Recorder` (or :func:`record`) wraps a ``Graph``/``Dataset``; its ``graph`` is used
like the original and every real change reaches a patch log written by :class:`LogWriter`,
or a stream (``nats://HOST:PORT/STREAM``), or any :class:`PatchLog`.
"""

from patchsync.capture._log import LogWriter, PatchLog, segment_files
from patchsync.capture._recorder import Recorder, record
from patchsync.capture._store import RecordingStore, unbind_prefix

__all__ = ["LogWriter", "PatchLog", "Recorder", "RecordingStore", "record", "segment_files", "unbind_prefix"]
