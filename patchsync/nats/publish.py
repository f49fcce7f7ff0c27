"""Publishing patch logs to a NATS stream, and committing a recorder's patches to one.

The publish loop and its resume rule are every remote log's
(:func:`patchsync.remote.publish.publish_patches`); what is a stream's own is made here: a
missing stream is created (:class:`~patchsync.remote.publish.StreamSettings`), and a patch
whose message (payload and headers) exceeds the server's ``max_payload`` (1 MiB by default) or
the stream's ``max_msg_size`` is refused before sending, with one
:class:`~patchsync.remote.errors.MessageTooLarge` line naming the file, the patch, its size and
the limit (:mod:`.headers`); the patches before it stay published (a prefix of the chain,
which a rerun continues). Splitting was rejected: the stream sequence would no longer be a
per-patch checkpoint, the conditional append and deduplication would guard fragments rather
than patches, and every replica would have to reassemble fragments across its own crashes.
The limit is the operator's to raise (``max_payload`` up to 64 MiB), or the writer's to
respect (smaller transactions).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from patchsync.logs.payloads import PatchMessage
from patchsync.nats.nats_log import NatsLog
from patchsync.nats.url import StreamURL
from patchsync.options import Limits, PatchOptions
from patchsync.remote.errors import StreamUnavailable
from patchsync.remote.interface import Appended
from patchsync.remote.publish import PublishReport, StreamSettings, publish_patches
from patchsync.remote.writer import PatchWriter
from patchsync.terms import TermAdapter


def prepare(log: NatsLog, settings: StreamSettings | None) -> None:
    """Find the stream, creating it as ``settings`` say when it is missing."""
    settings = settings or StreamSettings()
    log.ensure_stream(
        create=settings.create,
        replicas=settings.replicas,
        max_age=settings.max_age,
        max_bytes=settings.max_bytes,
        max_msgs=settings.max_msgs,
        duplicate_window=settings.duplicate_window,
    )


def publish_logs(
    paths: Iterable[str | os.PathLike[str]],
    url: StreamURL | str | NatsLog,
    *,
    settings: StreamSettings | None = None,
    limits: Limits | None = None,
    on_published: Callable[[PatchMessage, Appended], None] | None = None,
) -> PublishReport:
    """Publish every complete patch of the logs, in order, continuing the stream's head.

    ``url`` is a stream address or an open :class:`NatsLog` (left open). The stream is
    created when missing (``settings``). See the module docstring for patches larger than a
    message, :func:`patchsync.remote.publish.publish_patches` for resuming.
    ``on_published`` is called after each patch the server acknowledged (progress reports).
    """
    own = not isinstance(url, NatsLog)
    log = NatsLog(url) if not isinstance(url, NatsLog) else url
    try:
        prepare(log, settings)
        return publish_patches(log, paths, limits=limits, on_published=on_published)
    finally:
        if own:
            log.close()


class StreamWriter(PatchWriter):
    """Where a recorder commits its patches when they go straight to a stream.

    A :class:`~patchsync.remote.writer.PatchWriter` (``Recorder(graph, StreamWriter(url))``,
    or simply ``Recorder(graph, "nats://HOST:PORT/STREAM")``). Each patch is published as
    one message on :meth:`commit`, appended only if it follows the stream's head; the head
    is read from the stream on opening. A failed commit raises (:class:`ChainError`,
    :class:`StreamUnavailable`, :class:`MessageTooLarge`) and the patch is not in the stream.
    """

    destination = "a stream"

    def __init__(
        self,
        url: StreamURL | str | NatsLog,
        options: PatchOptions | None = None,
        adapter: TermAdapter[Any] | None = None,
        *,
        settings: StreamSettings | None = None,
    ) -> None:
        own = not isinstance(url, NatsLog)
        log = NatsLog(url) if not isinstance(url, NatsLog) else url
        try:
            prepare(log, settings)
        except BaseException:
            if own:
                log.close()
            raise
        super().__init__(log, options, adapter, own=own)


def check_stream(source: str) -> None:
    """Refuse a stream ``source`` that does not exist (:class:`StreamNotFound`), before a replica
    of it is created; a server out of reach tells nothing yet (the daemon waits for it)."""
    try:
        with NatsLog(source, connect_timeout=1.0, request_timeout=2.0, reconnect_attempts=1) as log:
            log.ensure_stream(create=False)
    except StreamUnavailable:
        return


__all__ = ["PublishReport", "StreamSettings", "StreamWriter", "check_stream", "prepare", "publish_logs"]
