"""The HTTP door's routes: a request's method, path and query to what it asks for (no I/O).

:func:`route` answers, before a byte of a body is read, everything the door must know to
refuse early: the kind of request, its topic, the access its token needs and the largest
body it may send (small for ``/$/rpc``, ``--max-message-bytes`` for an append, none for a
read). The door authenticates first (:func:`needs_token`: every path but three answers 401
without a token, so topic names cannot be probed), then routes, then checks the declared
body length, and only then reads. The paths are RDF Delta's (docs/decisions/0002-rdf-delta-http.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from patchsync.serve import delta_protocol as dp
from patchsync.serve.auth import Access
from patchsync.serve.errors import NotAllowed, NotFound, UnknownTopic

#: ``/$/`` paths served without a token: liveness, readiness, RDF Delta's ping.
OPEN_PATHS = frozenset({"/$/healthz", "/$/ready", "/$/ping"})
#: The ``/$/`` services.
SERVICES = ("rpc", "ping", "metrics", "healthz", "ready")
#: The largest ``/$/rpc`` body: an RDF Delta operation is a small JSON object.
RPC_MAX_BYTES = 64 << 10

#: Route kinds.
SERVICE, RPC, APPEND, FETCH, CHANGES, INIT = "service", "rpc", "append", "fetch", "changes", "init"
#: ``OPTIONS /NAME``: the methods the topic takes (a writer asks before writing).
ALLOW = "allow"


@dataclass(frozen=True, slots=True)
class Route:
    """What one request asks for (see the module docstring)."""

    kind: str
    #: The topic (data source) the request is about, ``""`` for services and RPC.
    topic: str = ""
    #: The service of ``/$/NAME``.
    service: str = ""
    #: What a fetch asks for.
    ref: dp.PatchRef | None = None
    #: The access the token must grant (an RPC operation may need more, known from its body).
    access: Access = Access.READ
    #: The largest body the request may send, in bytes.
    body_limit: int = 0


def needs_token(path: str) -> bool:
    """Whether a request for ``path`` must present a token (when the server has tokens)."""
    return path not in OPEN_PATHS


def route(method: str, path: str, query: Mapping[str, str], names: Iterable[str], max_message_bytes: int) -> Route:
    """The route of a request; one refusal (404, 405, 400) when it asks for nothing served."""
    if path.startswith("/$/"):
        service = path[3:]
        if service not in SERVICES:
            raise NotFound(f"{path}: not found (/$/rpc, /$/ping, /$/metrics, /$/healthz, /$/ready)")
        if service == "rpc":
            if method != "POST":
                raise NotAllowed(f"HTTP {method} not supported on /$/rpc (POST a JSON operation)")
            return Route(RPC, service=service, body_limit=RPC_MAX_BYTES)
        return Route(SERVICE, service=service)
    parts = path[1:].split("/")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()  # "/name/" is "/name"
    if len(parts) > 2:
        raise dp.BadRequest(f"{path}: URI path has too many components")
    if not parts[0]:
        raise NotFound(f"{path}: not found (POST /$/rpc, /NAME, GET /NAME/VERSION)")
    known = list(names)
    if parts == ["init-data"] and "datasource" in query and method in ("GET", "HEAD"):
        # RDF Delta's form of the bootstrap: /init-data?datasource=REF.
        wanted = query["datasource"]
        return Route(INIT, topic=_topic(wanted, known, f"{method} {path}"))
    name = _topic(parts[0], known, f"{method} {path}")
    if method in ("POST", "PATCH") and len(parts) == 1 and not query:
        return Route(APPEND, topic=name, access=Access.WRITE, body_limit=max_message_bytes)
    if method == "OPTIONS" and len(parts) == 1 and not query:
        return Route(ALLOW, topic=name)
    if method not in ("GET", "HEAD"):
        raise NotAllowed(f"HTTP {method} not supported on {path}")
    if len(parts) == 2:
        ref = dp.parse_patch_ref(parts[1])
    elif "version" in query:
        ref = dp.parse_patch_ref(query["version"])
    elif "patch" in query:
        ref = dp.PatchRef("id", patch_id=dp.bare_id(query["patch"]))
    else:
        raise dp.BadRequest(f"Not a log fetch or append operation: {method} {path}")
    if ref.kind in (CHANGES, INIT):
        return Route(ref.kind, topic=name)
    return Route(FETCH, topic=name, ref=ref)


def _topic(ref: str, names: list[str], what: str) -> str:
    found = dp.resolve_ref(ref, names)
    if found is None:
        raise UnknownTopic(f"{what}: No such datasource: '{ref[:200]}'")
    return found


__all__ = [
    "ALLOW",
    "APPEND",
    "CHANGES",
    "FETCH",
    "INIT",
    "OPEN_PATHS",
    "RPC",
    "RPC_MAX_BYTES",
    "SERVICE",
    "SERVICES",
    "Route",
    "needs_token",
    "route",
]
