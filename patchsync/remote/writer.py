"""A recorder's writer to a remote log: one patch in a sink, committed as one message.

A :class:`patchsync.capture.PatchLog` that sends each patch away whole on commit, to any
:class:`~patchsync.remote.interface.RemoteLog` (:class:`~patchsync.nats.publish.StreamWriter` to a
NATS stream, :class:`~patchsync.remote.grpc_client.GrpcWriter` to a gRPC topic,
:class:`~patchsync.remote.http_client.HttpWriter` to a log served over HTTP):
:attr:`~PatchWriter.sink` (an encoder the recorder writes one patch into),
:attr:`~PatchWriter.options`, :attr:`~PatchWriter.head` (the next patch's ``prev``, read
from the log on opening), :meth:`~PatchWriter.commit`, :meth:`~PatchWriter.abandon` and
:meth:`~PatchWriter.close`. The log appends a patch only if it follows the head
(:meth:`~patchsync.remote.interface.RemoteLog.append`), and a refused or failed commit raises with
the patch not in the log; a patch the log holds already, but not at its head, is a
:class:`~patchsync.errors.ChainError` (the next patches would not follow it).
"""

from __future__ import annotations

from typing import Any

from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.errors import ChainError, UsageError
from patchsync.logs.payloads import PatchMessage, message_options
from patchsync.options import PatchOptions, StreamType
from patchsync.remote.interface import RemoteLog
from patchsync.terms import TermAdapter, default_adapter


class PatchWriter:
    """Where a recorder commits its patches when each goes to a remote log as one message.

    ``log`` is closed with the writer when ``own`` (the writer opened it).
    """

    #: What the patches are committed to, as the refusal of a patch without an id says.
    destination = "a log"

    def __init__(
        self, log: RemoteLog, options: PatchOptions | None, adapter: TermAdapter[Any] | None, *, own: bool = True
    ) -> None:
        self.log = log
        self._own = own
        try:
            if options is not None and options.stream_type is StreamType.FLAT:
                raise UsageError("a recorded log needs patch boundaries: use a PUNCTUATED or FRAME stream")
            log.writable()
            #: The id of the log's last patch: the next patch's ``prev``.
            self.head: str | None = log.head().patch_id
        except BaseException:
            self.close()
            raise
        self.options = message_options(options)
        self.adapter: TermAdapter[Any] = adapter if adapter is not None else default_adapter()
        self.patches = 0
        #: The position (sequence or version) of the last patch committed through this writer.
        self.last_seq = 0
        self.sink: PatchEncoder[Any] = PatchEncoder(self.options, self.adapter)

    def commit(self, patch_id: str | None) -> None:
        """Send the patch the sink holds as one message; the sink starts afresh."""
        if patch_id is None:
            raise UsageError(f"a patch committed to {self.destination} needs an id")
        encoder, self.sink = self.sink, PatchEncoder(self.options, self.adapter)
        encoder.finish()
        self._send(patch_id, encoder.take())
        self.head = patch_id
        self.patches += 1

    def _send(self, patch_id: str, payload: bytes) -> None:
        """Append one patch (a whole one-patch Jelly-Patch stream) following :attr:`head`."""
        message = PatchMessage(patch_id, self.head, payload, str(self.log.url), self.patches + 1)
        result = self.log.append(message)
        if result.duplicate and self.log.head().patch_id != patch_id:
            raise ChainError(f"{self.log.url}: patch {patch_id} is in the log already, not at its head")
        self.last_seq = result.seq

    @property
    def path(self) -> None:
        """The log has no file here (the recorder's log writers report theirs here)."""
        return None

    def abandon(self) -> None:
        """Drop what the sink holds and disconnect (after a failure)."""
        self.close()

    def close(self) -> None:
        """Disconnect (every patch was appended whole by its commit)."""
        if self._own:
            self.log.close()


__all__ = ["PatchWriter"]
