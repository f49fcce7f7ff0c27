"""A ``patchsync serve`` process on a free loopback port, and gRPC clients of it, for the serve tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from patchsync._proto import patch_service_pb2, patch_service_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]


class ServeProcess:
    """``patchsync serve --listen 127.0.0.1:0 ARGS``; :attr:`port` (and :attr:`http_port` with
    ``--http``) once it serves."""

    def __init__(
        self,
        args: Sequence[str],
        cwd: Path,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.args = list(args)
        self.cwd = cwd
        self.env = {**os.environ, **(env or {})}
        #: Run in the child before it starts (a lower resource limit, say).
        self.preexec = preexec
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        #: The HTTP door's port, when ``--http`` is among the arguments.
        self.http_port = 0

    def start(self, timeout: float = 60.0) -> ServeProcess:
        listen = [] if "--listen" in self.args else ["--listen", f"127.0.0.1:{self.port}"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "patchsync", "serve", *listen, *self.args],
            cwd=self.cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=self.preexec,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.proc.stdout.readline()
        if not line.startswith("serving grpc on "):
            _, err = self.proc.communicate(timeout=timeout)
            raise AssertionError(f"serve did not start: {line!r} {err}")
        assert time.monotonic() < deadline
        self.port = int(line.rsplit(":", 1)[1])
        if "--http" in self.args:
            line = self.proc.stdout.readline()
            if not line.startswith("serving http on "):
                _, err = self.proc.communicate(timeout=timeout)
                raise AssertionError(f"serve did not start its HTTP door: {line!r} {err}")
            self.http_port = int(line.rsplit(":", 1)[1])
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        """The HTTP door's ``HOST:PORT``."""
        return f"127.0.0.1:{self.http_port}"

    def url(self, topic: str) -> str:
        return f"grpc://127.0.0.1:{self.port}/{topic}"

    def kill(self) -> None:
        """``kill -9``."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.communicate()

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM; the exit code, stdout and stderr."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def channel(port: int) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{port}")


def patch_stub(port: int) -> Any:
    return patch_service_pb2_grpc.PatchServiceStub(channel(port))


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


def publish(stub: Any, topic: str, payloads: Sequence[bytes], token: str | None = None) -> Any:
    def requests() -> Iterator[Any]:
        for p in payloads:
            yield patch_service_pb2.PublishPatchRequest(topic=topic, patch=p)

    return stub.PublishPatch(requests(), metadata=bearer(token), timeout=30)


def subscribe(stub: Any, topic: str, *, token: str | None = None, after: int = 0, follow: bool = False) -> Any:
    request = patch_service_pb2.SubscribePatchRequest(
        topic=topic, start=patch_service_pb2.PatchStart(after_version=after), stop_at_head=not follow
    )
    return stub.SubscribePatch(request, metadata=bearer(token), timeout=60)


def cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "patchsync", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"patchsync {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done
