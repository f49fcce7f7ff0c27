"""What the HTTP door answers, as values (no I/O): a status, headers and a body.

The pure parts of the server (:mod:`.rpc`, :mod:`.feed`, :mod:`.http_routes`,
:mod:`.delta_protocol`) answer a parsed request with an :class:`Answer`; the door
(:mod:`.http_door`) only writes it out. A streamed answer (the change feed) is framed by
:mod:`.feed` a few patches at a time, which the door writes as they are read. This is
httpcore driving h11: the protocol's rules answer, the adapter moves bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from patchsync.serve import delta_protocol as dp
from patchsync.serve.topics import TopicInfo


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: ``status``, ``headers`` and ``body``."""

    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


def json_answer(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    """A JSON answer typed exactly ``application/json``: Java's RDF Delta client compares the
    whole header to recognise a conflict body (a charset parameter would hide it)."""
    return Answer(status, {"Content-Type": dp.JSON, **(headers or {})}, json.dumps(body).encode())


def line_answer(status: int, text: str) -> Answer:
    """A refusal (or a short text answer): ``text/plain``, one line."""
    return Answer(status, {"Content-Type": "text/plain; charset=utf-8"}, (" ".join(text.split()) + "\n").encode())


def ready_answer(stopping: bool, errors: Mapping[str, str], *, tokens_required: bool) -> Answer:
    """``/$/ready``: 200 while the server serves every topic, else 503 with the first reason
    (without tokens only the fact: topic names are not told to anyone who asks)."""
    if stopping:
        return line_answer(503, "the server is stopping")
    for name, error in errors.items():
        return line_answer(503, "a topic is unavailable" if tokens_required else f"topic {name}: {error}")
    return line_answer(200, "ready")


def appended_answer(path: str, version: int, *, duplicate: bool) -> Answer:
    """The answer to an append to ``path``: the version, its ``Location``; a patch the log
    held already says so (``Patchsync-Duplicate``)."""
    location = f"{path}?version={version}"
    headers = {"Location": location} | ({"Patchsync-Duplicate": "true"} if duplicate else {})
    return json_answer(dp.appended_body(version, location), headers=headers)


def conflict_answer(info: TopicInfo, uri: str, message: str) -> Answer:
    """RDF Delta's answer to a patch whose ``prev`` is not the head: 400 with the log's
    description in a JSON body (how its clients tell a conflict from another 400)."""
    return json_answer(dp.conflict_body(info, uri) | {"message": message}, status=400)


def patch_answer(version: int, body: bytes, *, jelly: bool) -> Answer:
    """One fetched patch: Jelly-Patch as stored (``jelly``) or its RDF Patch text, and the
    version it stands at."""
    media = dp.JELLY_PATCH if jelly else dp.PATCH_TEXT
    return Answer(200, {"Content-Type": media, "Patchsync-Version": str(version)}, body)


def service_answer(name: str, stopping: bool, errors: Mapping[str, str], *, tokens_required: bool) -> Answer:
    """The answer of ``/$/healthz``, ``/$/ready`` or ``/$/ping`` (``/$/metrics`` is the
    metrics registry's own rendering)."""
    if name == "healthz":
        return line_answer(200, "ok")
    if name == "ready":
        return ready_answer(stopping, errors, tokens_required=tokens_required)
    if name == "ping":
        return json_answer(dp.ping_body())
    raise ValueError(f"no service {name}")


__all__ = [
    "Answer",
    "appended_answer",
    "conflict_answer",
    "json_answer",
    "line_answer",
    "patch_answer",
    "ready_answer",
    "service_answer",
]
