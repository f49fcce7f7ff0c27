"""RDF Delta's patch log protocol, as functions of requests to answers (no I/O).

The HTTP door (:mod:`patchsync.serve.http_door`) parses a request, calls these, calls a
topic operation and writes the answer. What RDF Delta 1.1 sends and expects, and where we
differ, is written down in docs/decisions/0002-rdf-delta-http.md; the names below follow it:

- a *data source* is a topic; its id is a UUID derived from its name (:func:`datasource_id`),
  written ``id:UUID`` inside descriptions and bare in lists and in ``create_datasource``;
- ``{ref}`` in a path is a data source name, or its id when it has the shape of a UUID;
- a patch is fetched by version (decimal) or by id (a UUID), or ``init`` (the bootstrap
  snapshot) or ``changes`` (the change feed);
- the change feed's parameters are :func:`feed_query`'s.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from patchsync.errors import UsageError
from patchsync.serve.errors import UnsupportedMedia
from patchsync.serve.topics import TopicInfo

#: The namespace of data source ids: the same name has the same id on every server.
DATASOURCE_NAMESPACE = uuid.UUID("6f1a0f52-6d0e-5c2b-9a51-1d2f3c4b5a69")

#: RDF Patch text: RDF Delta's media type, its alternative, and Jelly-Patch's (the
#: Jelly-Patch specification's recommendation, delimited, one patch per request).
PATCH_TEXT = "application/rdf-patch"
PATCH_TEXT_ALT = "text/rdf-patch"
JELLY_PATCH = "application/x-jelly-rdf-patch"
#: RDF Delta's binary patch form: named by RDF Delta, with no published definition.
PATCH_THRIFT = "application/rdf-patch+thrift"
JSON = "application/json"
JELLY_RDF = "application/x-jelly-rdf"
NQUADS = "application/n-quads"

#: RDF Delta's patch log lock operations (answered by :mod:`patchsync.serve.delta_locks`).
LOCK_OPERATIONS = ("lock", "lock-refresh", "lock-read", "lock-grab", "unlock")
#: The RPC operations served.
OPERATIONS = (
    "ping",
    "list_datasource",
    "list_descriptions",
    "list_log_info",
    "describe_datasource",
    "describe_log",
    "create_datasource",
    "remove_datasource",
    *LOCK_OPERATIONS,
)
#: Operations that change the server (a write token). All the lock operations are: the
#: holder's session, which ``lock-read`` shows, is what grabs and releases the lock.
WRITE_OPERATIONS = frozenset({"create_datasource", "remove_datasource", *LOCK_OPERATIONS})

#: The change feed's default and largest ``limit``, and its longest ``wait`` (seconds).
FEED_LIMIT = 100
FEED_MAX_LIMIT = 10_000
FEED_MAX_WAIT = 60.0


#: Digits of the largest version a path may name (versions are 64-bit counts).
MAX_VERSION_DIGITS = 19


class BadRequest(UsageError):
    """A request RDF Delta answers with 400: the message is its one line."""


def shorten(text: str, most: int = 80) -> str:
    """A client's text as a refusal quotes it: at most ``most`` characters."""
    return text if len(text) <= most else text[:most] + "…"


def datasource_id(name: str) -> str:
    """The id of data source ``name`` (bare UUID)."""
    return str(uuid.uuid5(DATASOURCE_NAMESPACE, name))


def looks_like_uuid(text: str) -> bool:
    """RDF Delta's quick test for a UUID: 36 characters with ``-`` at index 8."""
    return len(text) == 36 and text[8] == "-"


def bare_id(text: str) -> str:
    """An id written ``id:X``, ``uuid:X``, ``urn:uuid:X`` or ``X``, as ``X``."""
    for prefix in ("id:", "urn:uuid:", "uuid:"):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def delta_patch_id(patch_id: str | None) -> str:
    """A patch id as RDF Delta writes it in a log description: ``id:UUID`` for a UUID
    (``uuid:``/``urn:uuid:`` IRIs), the id itself otherwise, ``""`` for none."""
    if not patch_id:
        return ""
    bare = bare_id(patch_id)
    return f"id:{bare}" if looks_like_uuid(bare) and bare != patch_id else patch_id


def patch_id_candidates(ref: str) -> list[str]:
    """The header texts a patch id from a request may stand for: RDF Delta ids are UUIDs
    that the patch's ``id`` header writes as ``<uuid:…>`` (or ``<urn:uuid:…>``)."""
    bare = bare_id(ref)
    return list(dict.fromkeys([ref, f"uuid:{bare}", f"urn:uuid:{bare}", bare, f'"{bare}"']))


# -- descriptions ------------------------------------------------------------------------


def describe_datasource(info: TopicInfo, uri: str = "") -> dict[str, Any]:
    """RDF Delta's data source description (``uri`` always present: the PyPI client needs it)."""
    return {"id": f"id:{datasource_id(info.name)}", "name": info.name, "uri": uri}


def describe_log(info: TopicInfo, uri: str = "") -> dict[str, Any]:
    """RDF Delta's log description: the data source's plus versions and the head patch."""
    return describe_datasource(info, uri) | {
        "min_version": 1 if info.version else 0,
        "max_version": info.version,
        "latest": delta_patch_id(info.head),
    }


def conflict_body(info: TopicInfo, uri: str = "") -> dict[str, Any]:
    """The JSON body of RDF Delta's 400 answer to a patch whose ``prev`` is not the head."""
    return {"error": "patch-conflict", "log_info": describe_log(info, uri)}


def appended_body(version: int, location: str) -> dict[str, Any]:
    """The JSON answer to an append."""
    return {"version": version, "location": location}


def ping_body(now: datetime.datetime | None = None) -> dict[str, Any]:
    """``{"value": xsd:dateTime}``."""
    now = now or datetime.datetime.now(datetime.UTC)
    return {"value": now.isoformat(timespec="milliseconds").replace("+00:00", "Z")}


# -- RPC ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RpcCall:
    """One parsed RPC request."""

    op: str
    arg: Mapping[str, Any]

    def string(self, field: str, *, required: bool = False) -> str | None:
        """The string field ``field`` of the argument (RDF Delta's one-line refusals)."""
        value = self.arg.get(field)
        if value is None:
            if required:
                raise BadRequest(f"{self.op}: missing field: {field}")
            return None
        if not isinstance(value, str):
            raise BadRequest(f"{self.op}: bad field '{field}': {json.dumps(value)}")
        return value


def parse_rpc(body: bytes) -> RpcCall:
    """The operation and argument of an RPC body (400 lines as RDF Delta words them)."""
    try:
        request = json.loads(body)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"Bad JSON request: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise BadRequest(f"Bad JSON request: not UTF-8 at byte {exc.start}") from None
    except RecursionError:
        raise BadRequest("Bad JSON request: nested too deeply") from None
    except ValueError:
        raise BadRequest("Bad JSON request: not JSON") from None
    if not isinstance(request, dict):
        raise BadRequest("Bad JSON request: not a JSON object")
    op = request.get("operation")
    if not isinstance(op, str) or not op:
        raise BadRequest("No op name: the request has no 'operation'")
    arg = request.get("arg")
    if not isinstance(arg, dict):
        raise BadRequest(f"No argument to RPC: {op} has no 'arg' object")
    if op not in OPERATIONS:
        raise BadRequest(f"Unknown operation: {op}")
    return RpcCall(op, arg)


def find_datasource(call: RpcCall, names: Iterable[str], uris: Mapping[str, str]) -> str | None:
    """The name of the data source ``describe_datasource`` asks for (first of ``datasource``
    (an id), ``name``, ``uri``), or ``None`` when there is no such data source."""
    ds, name, uri = call.string("datasource"), call.string("name"), call.string("uri")
    if ds is None and name is None and uri is None:
        raise BadRequest("No field: 'datasource' nor 'name' nor 'uri'")
    known = list(names)
    if ds is not None:
        return by_id(ds, known)
    if name is not None:
        return name if name in known else None
    return next((n for n in known if uris.get(n) == uri), None)


def by_id(ref: str, names: Iterable[str]) -> str | None:
    """The data source whose id is ``ref`` (``id:`` or bare), or ``None``."""
    wanted = bare_id(ref).lower()
    return next((n for n in names if datasource_id(n) == wanted), None)


def datasource_arg(call: RpcCall, names: Iterable[str]) -> str | None:
    """The data source named by the required ``datasource`` id of ``describe_log`` and
    ``remove_datasource``, or ``None`` when unknown."""
    ds = call.string("datasource")
    if ds is None:
        raise BadRequest(f"No field: 'datasource' in {call.op}")
    return by_id(ds, names)


# -- paths -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PatchRef:
    """What ``GET /{ref}/{x}`` asks for: a version, a patch id, ``init`` or ``changes``."""

    kind: str  # "version", "id", "init", "changes"
    version: int = 0
    patch_id: str = ""


def resolve_ref(ref: str, names: Iterable[str]) -> str | None:
    """The data source ``{ref}`` names: by name first, then by id when it looks like one."""
    known = list(names)
    if ref in known:
        return ref
    if looks_like_uuid(ref) or ref.startswith("id:"):
        return by_id(ref, known)
    return None


def parse_patch_ref(text: str) -> PatchRef:
    """The second path segment of a fetch (400 for anything else, as RDF Delta)."""
    if not text:
        raise BadRequest("Patch ref empty")
    if text in ("init", "changes"):
        return PatchRef(text)
    if looks_like_uuid(text) or text.startswith("id:"):
        return PatchRef("id", patch_id=bare_id(text))
    if text.isascii() and text.isdigit():
        if len(text) > MAX_VERSION_DIGITS:
            raise BadRequest(f"Bad patch reference: a version of {len(text)} digits (at most {MAX_VERSION_DIGITS})")
        return PatchRef("version", version=int(text))
    raise BadRequest(f"Bad patch reference {shorten(text)!r}: a version (decimal), a patch id (UUID), init or changes")


# -- media types -------------------------------------------------------------------------


def media_type(header: str | None) -> str:
    """The media type of a ``Content-Type`` value, lower case, without parameters."""
    return (header or "").partition(";")[0].strip().lower()


def body_format(content_type: str | None) -> str:
    """``"rdfp"`` or ``"jellyp"`` for an appended body; a missing type is text (Java's
    client sends none); anything else is refused (415)."""
    kind = media_type(content_type)
    if kind in ("", PATCH_TEXT, PATCH_TEXT_ALT, "text/plain", "application/octet-stream"):
        return "rdfp"
    if kind == JELLY_PATCH:
        return "jellyp"
    raise UnsupportedMedia(
        f"Content-Type {kind}: send {PATCH_TEXT} (RDF Patch text) or {JELLY_PATCH} (Jelly-Patch)"
        + ("; RDF Delta's thrift form has no published definition" if kind == PATCH_THRIFT else "")
    )


def accepts_jelly(accept: str | None) -> bool:
    """Whether an ``Accept`` header prefers Jelly-Patch to RDF Patch text (text by default)."""
    best, best_q = "", -1.0
    for item in (accept or "").split(","):
        kind, q = _media_q(item)
        if kind in (JELLY_PATCH, PATCH_TEXT, PATCH_TEXT_ALT) and q > best_q:
            best, best_q = kind, q
    return best == JELLY_PATCH and best_q > 0


def accepts_nquads(accept: str | None) -> bool:
    """Whether an ``Accept`` header prefers N-Quads to Jelly-RDF for a bootstrap snapshot
    (Jelly-RDF by default)."""
    best, best_q = "", -1.0
    for item in (accept or "").split(","):
        kind, q = _media_q(item)
        if kind in (NQUADS, JELLY_RDF) and q > best_q:
            best, best_q = kind, q
    return best == NQUADS and best_q > 0


def _media_q(item: str) -> tuple[str, float]:
    """One ``Accept`` item's media type (lower case) and quality."""
    kind, *params = (p.strip() for p in item.split(";"))
    q = 1.0
    for p in params:
        key, _, value = p.partition("=")
        if key.strip().lower() == "q":
            try:
                q = float(value)
            except ValueError:
                q = 0.0
    return kind.lower(), q


# -- the change feed ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FeedQuery:
    """``GET /{ref}/changes?after=V&limit=N&wait=S``: the patches after version ``after``,
    at most ``limit``; when there are none yet, wait up to ``wait`` seconds for one."""

    after: int = 0
    limit: int = FEED_LIMIT
    wait: float = 0.0


def feed_query(query: Mapping[str, str]) -> FeedQuery:
    """The change feed's parameters, checked (one 400 line each)."""
    unknown = sorted(set(query) - {"after", "limit", "wait"})
    if unknown:
        raise BadRequest(f"changes: unknown parameter {unknown[0]!r} (after, limit, wait)")

    def number(key: str, default: str) -> float:
        text = query.get(key, default)
        shown = shorten(text)
        try:
            if len(text) > MAX_VERSION_DIGITS + 1:
                raise ValueError
            value = float(text) if key == "wait" else int(text)
        except ValueError:
            raise BadRequest(
                f"changes: {key}={shown!r} is not a number of at most {MAX_VERSION_DIGITS} digits"
            ) from None
        if not value >= 0:
            raise BadRequest(f"changes: {key}={shown!r} must be a number, not negative")
        return value

    after, limit, wait = int(number("after", "0")), int(number("limit", str(FEED_LIMIT))), number("wait", "0")
    if not 1 <= limit <= FEED_MAX_LIMIT:
        raise BadRequest(f"changes: limit={limit} must be from 1 to {FEED_MAX_LIMIT}")
    if wait > FEED_MAX_WAIT:
        raise BadRequest(f"changes: wait={wait:g} is over {FEED_MAX_WAIT:g} seconds")
    return FeedQuery(after, limit, wait)


__all__ = [
    "FEED_LIMIT",
    "FEED_MAX_LIMIT",
    "FEED_MAX_WAIT",
    "JELLY_PATCH",
    "JELLY_RDF",
    "JSON",
    "LOCK_OPERATIONS",
    "MAX_VERSION_DIGITS",
    "NQUADS",
    "OPERATIONS",
    "PATCH_TEXT",
    "PATCH_TEXT_ALT",
    "PATCH_THRIFT",
    "WRITE_OPERATIONS",
    "BadRequest",
    "FeedQuery",
    "PatchRef",
    "RpcCall",
    "accepts_jelly",
    "accepts_nquads",
    "appended_body",
    "bare_id",
    "body_format",
    "by_id",
    "conflict_body",
    "datasource_arg",
    "datasource_id",
    "delta_patch_id",
    "describe_datasource",
    "describe_log",
    "feed_query",
    "find_datasource",
    "looks_like_uuid",
    "media_type",
    "parse_patch_ref",
    "parse_rpc",
    "patch_id_candidates",
    "ping_body",
    "resolve_ref",
    "shorten",
]
