"""A client of ``patchsync serve``'s gRPC door: ``grpc://HOST:PORT/TOPIC`` as a patch source.

The topic's patches arrive one message each (``patchsync.v1.PatchService``), every message
a self-contained one-patch Jelly-Patch stream with its version, so a reader checkpoints the
version exactly as a NATS reader checkpoints a stream sequence. Publishing resumes as
:func:`patchsync.nats.publish.publish_logs` does: the server's head says how far a
previous run got, and the server acknowledges a patch it holds already without appending
it again.

Credentials come from the environment, so that every command taking a source takes them
the same way: ``PATCHSYNC_TOKEN`` (the token itself) or ``PATCHSYNC_TOKEN_FILE`` (a file
holding it), and ``PATCHSYNC_TLS_CA`` (a PEM file of the CA to trust: the connection then
uses TLS). The command line's ``--token-file`` and ``--tls-ca`` set the latter two.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from patchsync.errors import PatchsyncError, UsageError
from patchsync.logs.files import replaced_whole
from patchsync.logs.payloads import MSG_ID, PatchMessage, StreamMessage
from patchsync.options import Limits, PatchOptions
from patchsync.remote import connect_errors as remote
from patchsync.remote.interface import Appended, LogHead, RemoteLog
from patchsync.remote.publish import PublishReport, StreamSettings, publish_patches
from patchsync.remote.statuses import RETRYABLE_KEY, read_only, refusal
from patchsync.remote.writer import PatchWriter
from patchsync.terms import TermAdapter

#: The environment variables credentials come from.
TOKEN_ENV = "PATCHSYNC_TOKEN"
TOKEN_FILE_ENV = "PATCHSYNC_TOKEN_FILE"
TLS_CA_ENV = "PATCHSYNC_TLS_CA"
#: Largest message the client takes (the server's own limit decides what it sends).
MAX_MESSAGE_BYTES = 64 << 20
#: Patches a subscriber asks for per response (``max_batch``).
BATCH = 256


@dataclass(frozen=True, slots=True)
class GrpcURL:
    """``grpc://HOST:PORT/TOPIC``."""

    host: str
    port: int
    topic: str

    @property
    def stream(self) -> str:
        """The log's name at the server (the same topic may be reached by several host names)."""
        return self.topic

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"grpc://{self.target}/{self.topic}"


def parse_grpc_url(text: str) -> GrpcURL:
    """Parse ``grpc://HOST:PORT/TOPIC``; a malformed address is one :class:`UsageError` line."""
    parts = urlsplit(text)
    if parts.scheme.lower() != "grpc" or parts.query or parts.fragment:
        raise UsageError(f"{text}: not a gRPC topic address (expected grpc://HOST:PORT/TOPIC)")
    try:
        port = parts.port
    except ValueError:
        port = None
    topic = parts.path[1:] if parts.path.startswith("/") else parts.path
    if not parts.hostname or port is None or not topic or "/" in topic:
        raise UsageError(f"{text}: expected grpc://HOST:PORT/TOPIC")
    return GrpcURL(parts.hostname, port, topic)


def client_token() -> str | None:
    """The token from ``PATCHSYNC_TOKEN`` or the file ``PATCHSYNC_TOKEN_FILE`` names."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        return token.strip()
    path = os.environ.get(TOKEN_FILE_ENV)
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the token file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: the token file is not UTF-8 text (byte {exc.start})") from None


#: How the gRPC core reports a connection that failed (not a request the server refused):
#: the last address's error, after the address.
_CONNECT_FAILED = re.compile(r"failed to connect to all addresses; last error: \w+: (?:ipv[46]:\S+?: )?(.*)$", re.S)
#: The connection was taken and closed again by the server, as a TLS server does with plaintext.
_CLOSED = re.compile(r"Socket closed|reset by peer|Connection reset", re.IGNORECASE)
_UNTRUSTED = re.compile(r"CERTIFICATE_VERIFY_FAILED:?\s*([^:]*)")


def client_ca() -> bytes | None:
    """The PEM certificates of the CA named by ``PATCHSYNC_TLS_CA`` (``None``: no TLS asked for)."""
    path = os.environ.get(TLS_CA_ENV)
    if not path:
        return None
    try:
        pem = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the CA certificate ({exc.strerror or exc})") from None
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise UsageError(f"{path}: not a PEM certificate ({remote.CA_NAMES} names the CA's certificate file)")
    return pem


def _grpc() -> Any:
    """The grpc module, its core told to log errors only: a failed TLS handshake is otherwise
    logged on stderr beside the one line this client reports for it."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import grpc

    return grpc


class GrpcLog(RemoteLog):
    """A connection to one topic of a ``patchsync serve`` process (synchronous): a
    :class:`~patchsync.remote.interface.RemoteLog` whose positions are the topic's versions."""

    url: GrpcURL

    def __init__(self, url: GrpcURL | str, *, timeout: float = 10.0) -> None:
        grpc = _grpc()

        from patchsync._proto import grpc_pb2_grpc, patch_service_pb2_grpc

        self.url = url if isinstance(url, GrpcURL) else parse_grpc_url(url)
        self.timeout = timeout
        token = client_token()
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        ca = client_ca()
        self.tls = ca is not None
        if ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=ca)
            self.channel = grpc.secure_channel(self.url.target, credentials, options=options)
        else:
            self.channel = grpc.insecure_channel(self.url.target, options=options)
        self.patches = patch_service_pb2_grpc.PatchServiceStub(self.channel)
        self.rdf = grpc_pb2_grpc.RdfStreamServiceStub(self.channel)

    def error(self, exc: BaseException) -> PatchsyncError:
        """The patchsync error for an exception of a call to this topic's server."""
        grpc = _grpc()
        where = str(self.url)
        code = exc.code() if isinstance(exc, grpc.Call) else None
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        failed = _CONNECT_FAILED.search(details or "")
        if failed is not None:
            return self._connect_error(failed.group(1).strip())
        trailing = exc.trailing_metadata() if isinstance(exc, grpc.Call) else None
        retryable = any(key == RETRYABLE_KEY for key, _ in trailing or ())
        name = code.name if code is not None else "UNKNOWN"
        return refusal(f"{where}: {details}", name, retryable=retryable, token_sent=bool(self.metadata))

    def _connect_error(self, why: str) -> PatchsyncError:
        """What a connection that failed (``why``: the core's words for it) means."""
        where, address = str(self.url), self.url.target
        untrusted_why = _UNTRUSTED.search(why)
        if untrusted_why is not None:
            return remote.untrusted(where, untrusted_why.group(1).strip() or "verification failed")
        if "http1.x server" in why:
            return remote.wrong_protocol(
                where,
                address,
                expected="gRPC",
                answered="in HTTP/1.1",
                fix=f"read an HTTP door as http://{address}/{self.url.topic}, or name the gRPC port (serve --listen)",
            )
        if self.tls and "WRONG_VERSION_NUMBER" in why:
            return remote.tls_mismatch(where, address, server_tls=False, fix=f"reach it without {remote.CA_NAMES}")
        if not self.tls and _CLOSED.search(why) and remote.speaks_tls(self.url.host, self.url.port):
            return remote.tls_mismatch(
                where, address, server_tls=True, fix=f"give {remote.CA_SETTING} with the CA that signed its certificate"
            )
        return remote.unreachable(where, address, why.removeprefix("Failed to connect to remote host: "))

    def describe(self) -> Any:
        """The topic's ``TopicDescription`` (kind, head, version)."""
        from patchsync._proto import patch_service_pb2

        try:
            return self.patches.Describe(
                patch_service_pb2.DescribeRequest(topic=self.url.topic), timeout=self.timeout, metadata=self.metadata
            )
        except Exception as exc:
            raise self.error(exc) from None

    def subscribe_call(self, after_version: int, *, follow: bool, batch: int = 1, timeout: float | None = None) -> Any:
        """The ``SubscribePatch`` call (iterate it; ``cancel()`` ends it from any thread).

        With ``batch`` above 1 each response holds up to that many patches in ``batch``;
        ``timeout`` is the call's deadline (none: it lasts until cancelled or at the head).
        """
        from patchsync._proto import patch_service_pb2

        request = patch_service_pb2.SubscribePatchRequest(
            topic=self.url.topic,
            start=patch_service_pb2.PatchStart(after_version=after_version),
            stop_at_head=not follow,
            max_batch=batch,
        )
        return self.patches.SubscribePatch(request, metadata=self.metadata, timeout=timeout)

    def head(self) -> LogHead:
        info = self.describe()
        return LogHead(int(info.version), info.head or None)

    def writable(self) -> None:
        kind = self.describe().kind
        if kind != "log":
            raise read_only(str(self.url), kind)

    def read(self, after: int, limit: int, wait: float) -> list[StreamMessage]:
        # One response of a subscription: up to the head, or (waiting) the first patches to
        # come within its deadline.
        call = self.subscribe_call(after, follow=wait > 0, batch=limit, timeout=wait if wait > 0 else self.timeout)
        try:
            response = next(iter(call), None)
        except Exception as exc:
            grpc = _grpc()
            if wait > 0 and isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return []  # nothing came within the wait
            raise self.error(exc) from None
        finally:
            call.cancel()
        return [] if response is None else [_message(m) for m in response.batch]

    def pages(self, after: int, wait: float) -> Generator[list[StreamMessage]]:
        """The topic's patches after ``after``, one server response a page; following the
        topic when ``wait`` is above 0 (one ``SubscribePatch`` call, kept open), up to its
        head otherwise."""
        call = self.subscribe_call(after, follow=wait > 0, batch=BATCH)
        try:
            for response in call:
                yield [_message(m) for m in response.batch]
        except Exception as exc:
            raise self.error(exc) from None
        finally:
            call.cancel()

    def append(self, message: PatchMessage) -> Appended:
        response = self._publish([message])
        return Appended(int(response.version), duplicate=int(response.duplicates) > 0)

    def append_all(
        self,
        messages: Iterable[PatchMessage],
        on_appended: Callable[[PatchMessage, Appended], None] | None = None,
    ) -> tuple[int, int]:
        """Send the patches in one ``PublishPatch`` stream, answered once at its end
        (``on_appended`` is not called)."""
        del on_appended
        pending = iter(messages)
        first = next(pending, None)
        if first is None:  # an empty stream would still be one call
            return 0, 0
        response = self._publish(chain([first], pending))
        return int(response.appended), int(response.duplicates)

    def _publish(self, messages: Iterable[PatchMessage]) -> Any:
        from patchsync._proto import patch_service_pb2

        topic = self.url.topic

        def requests() -> Iterator[Any]:
            for message in messages:
                yield patch_service_pb2.PublishPatchRequest(topic=topic, patch=message.payload)

        try:
            return self.patches.PublishPatch(requests(), metadata=self.metadata)
        except PatchsyncError:
            raise
        except Exception as exc:
            raise self.error(exc) from None

    def snapshot_frames(self) -> Iterator[bytes]:
        """A target topic's snapshot: its serialized Jelly-RDF frames (``SubscribeRdf``)."""
        from patchsync._proto import grpc_pb2

        call = self.rdf.SubscribeRdf(grpc_pb2.RdfStreamSubscribe(topic=self.url.topic), metadata=self.metadata)
        try:
            for frame in call:
                yield frame.SerializeToString()
        except Exception as exc:
            raise self.error(exc) from None
        finally:
            call.cancel()

    def patch_id_at(self, version: int) -> str | None:
        """The id of the patch at ``version`` (``None`` if there is none)."""
        call = self.subscribe_call(version - 1, follow=False)
        try:
            first = next(iter(call), None)
        except Exception as exc:
            raise self.error(exc) from None
        finally:
            call.cancel()
        return str(first.patch_id) if first is not None and first.version == version else None

    def position_of(self, patch_id: str) -> int | None:
        """The version of patch ``patch_id`` in the topic's log, or ``None`` if it holds no such patch."""
        from patchsync._proto import patch_service_pb2

        info = self.describe()
        if info.head == patch_id:
            return int(info.version)
        request = patch_service_pb2.SubscribePatchRequest(
            topic=self.url.topic, start=patch_service_pb2.PatchStart(after_id=patch_id), stop_at_head=True
        )
        call = self.patches.SubscribePatch(request, metadata=self.metadata, timeout=self.timeout)
        try:
            following = next(iter(call), None)
        except Exception as exc:
            grpc = _grpc()
            if isinstance(exc, grpc.Call) and exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
                return None  # the service's answer to an unknown id
            raise self.error(exc) from None
        finally:
            call.cancel()
        return None if following is None else int(following.version) - 1

    def close(self) -> None:
        self.channel.close()


def _message(patch: Any) -> StreamMessage:
    """A ``PatchMessage`` of the service as a remote log's message."""
    return StreamMessage(int(patch.version), 0.0, {MSG_ID: patch.patch_id}, patch.patch)


def connect(url: GrpcURL | str, *, timeout: float | None = None, follow: bool = False) -> GrpcLog:
    """A connection to a topic (the source kind's ``connect`` role; ``timeout``: 10 s by default)."""
    del follow
    return GrpcLog(url, timeout=10.0 if timeout is None else timeout)


def fetch_snapshot(url: GrpcURL | str, path: str | os.PathLike[str]) -> None:
    """Write a target topic's snapshot (``SubscribeRdf``) to ``path`` as a delimited Jelly-RDF
    file: the file ``patchsync snapshot`` writes at the server, its position in the first
    frame's metadata. ``path`` appears only once the whole snapshot arrived."""
    from patchsync.codec.framing import encode_varint

    with GrpcLog(url) as log:
        info = log.describe()
        if info.kind != "target":
            raise UsageError(f"{log.url}: a {info.kind} topic has no snapshot; name a target topic")
        with replaced_whole(path) as f:
            for frame in log.snapshot_frames():
                f.write(encode_varint(len(frame)))
                f.write(frame)


class GrpcWriter(PatchWriter):
    """Where a recorder commits its patches when they go straight to a served topic.

    A :class:`~patchsync.remote.writer.PatchWriter` (``Recorder(graph,
    "grpc://HOST:PORT/TOPIC")``, the source registry's ``writer`` role, as
    :class:`patchsync.nats.StreamWriter` is for a NATS stream). Each patch is one
    ``PublishPatch`` call, appended by the server only if it follows the topic's head; a
    refused or failed commit raises (:class:`ChainError`, :class:`StreamUnavailable`,
    :class:`UsageError`) and the patch is not in the topic.
    """

    destination = "a served topic"

    def __init__(
        self, url: GrpcURL | str, options: PatchOptions | None = None, adapter: TermAdapter[Any] | None = None
    ) -> None:
        super().__init__(GrpcLog(url), options, adapter)


def publish_logs(
    paths: Iterable[str | os.PathLike[str]],
    url: GrpcURL | str,
    *,
    settings: StreamSettings | None = None,
    limits: Limits | None = None,
) -> PublishReport:
    """Publish every complete patch of the logs to the topic, continuing its head
    (:func:`patchsync.remote.publish.publish_patches`).

    ``settings`` (how a NATS stream is created) do not apply to a served topic.
    """
    del settings
    with GrpcLog(url) as log:
        return publish_patches(log, paths, limits=limits)


__all__ = [
    "RETRYABLE_KEY",
    "GrpcLog",
    "GrpcURL",
    "GrpcWriter",
    "connect",
    "client_token",
    "fetch_snapshot",
    "parse_grpc_url",
    "publish_logs",
]
