"""The ``sparql+http(s)://`` target URL: endpoints, options and credentials (sans I/O).

``sparql+http://HOST[:PORT]/PATH?layout=…&…`` (docs/decisions/0019-sparql-stores.md, "The
URL"). Without ``layout``, ``PATH`` is one SPARQL service taking queries and updates and no
Graph Store is used. ``layout=fuseki|oxigraph|virtuoso`` names the usual endpoints relative to
``PATH``; ``query=``, ``update=``, ``store=`` (a path after ``PATH``, or an absolute
``http(s)://`` URL) override any of them. Credentials are never part of the URL (it is shown
in messages and ``status``): ``user=NAME`` with ``password-file=``/``password-env=`` for HTTP
Basic, or ``token-file=``/``token-env=`` for a bearer token.
"""

from __future__ import annotations

import base64
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from patchsync.errors import UsageError

#: The prefix of the state graphs by default (checkpoints, guards, applied patch ids).
DEFAULT_STATE = "urn:x-patchsync:state"
#: Where skolem IRIs of blank nodes start by default (RDF 1.1 Concepts §3.5 "Replacing Blank
#: Nodes with IRIs": ``/.well-known/genid/``). It is fixed rather than taken from the store's
#: address, so that the same blank node maps to the same IRI however the store is reached.
DEFAULT_GENID = "https://patchsync.invalid/.well-known/genid/"

#: How a patch's blank nodes are written: as skolem IRIs, or the patch is refused.
BNODE_POLICIES = ("skolem", "refuse")
#: How RDF-star quoted triples are written: refused, or as RDF 1.2 triple terms ``<<( s p o )>>``
#: (objects only), or as RDF-star ``<< s p o >>`` (Jena).
STAR_POLICIES = ("refuse", "rdf12", "rdfstar")
#: What the added/deleted/no-op counts of an apply say: what the store held (``exact``: a
#: presence lookup for every row whose presence is not known from this applier's own writes),
#: or what was asked of it (``requested``: no lookups for the rows one commit group touches
#: once; each counts as a change). The store ends in the same state either way.
COUNT_POLICIES = ("exact", "requested")


@dataclass(frozen=True, slots=True)
class Layout:
    """The usual endpoints of one store, as paths relative to the URL's path, and its quirks.

    ``default_graph``: the IRI standing for RDF Patch's default graph where the store has none
    of its own (Virtuoso). ``system_graphs``: the store's own graphs, never the replica's.
    ``dataset_post``: the Graph Store takes a whole dataset (N-Quads) without ``graph=``.
    ``bulk_query``: a Graph Store query string that runs the store's bulk loader.
    ``values_rows``: presence lookups per query. ``op_triples``/``request_triples``: the most
    triples one ``INSERT DATA``/``DELETE DATA`` operation and one request may hold.
    ``misread_star``: ``star=`` values the store takes but reads as something else, each with
    what it would write instead (refused when the URL is read).
    """

    query: str
    update: str
    store: str | None
    default_graph: str | None = None
    system_graphs: tuple[str, ...] = ()
    dataset_post: bool = False
    bulk_query: str = ""
    star: str = "refuse"
    misread_star: tuple[tuple[str, str], ...] = ()
    values_rows: int = 5_000
    op_triples: int = 50_000
    request_triples: int = 1_000_000
    request_ops: int = 100_000
    max_request: int = 32 << 20


LAYOUTS: dict[str, Layout] = {
    "": Layout("", "", None),
    "fuseki": Layout("/sparql", "/update", "/data", star="rdfstar"),
    "oxigraph": Layout(
        "/query",
        "/update",
        "/store",
        dataset_post=True,
        bulk_query="no_transaction",
        star="rdf12",
        # RDF 1.2 Turtle's reifying triple (0019, tests/test_sparql_servers.py pins it).
        misread_star=(("rdfstar", "the Oxigraph server reads << s p o >> as a new blank reifier each time"),),
    ),
    "virtuoso": Layout(
        "/sparql",
        "/sparql",
        "/sparql-graph-crud",
        default_graph="urn:x-patchsync:default",
        system_graphs=(
            "http://www.openlinksw.com/schemas/virtrdf#",
            "http://www.w3.org/ns/ldp#",
            "http://localuriqaserver/sparql",
        ),
        # Measured limits (0019): ~4,990 triples an INSERT DATA, ~10,000 a request.
        values_rows=500,
        op_triples=4_000,
        request_triples=10_000,
        # Each operation adds SQL code; a request's is bounded (SP031, 10,000 lines).
        request_ops=16,
        max_request=8 << 20,
    ),
}

_KNOWN = {
    "layout",
    "query",
    "update",
    "store",
    "state",
    "default-graph",
    "bnodes",
    "star",
    "counts",
    "genid",
    "max-request",
    "timeout",
    "ca",
    "user",
    "password-file",
    "password-env",
    "token-file",
    "token-env",
}


@dataclass(frozen=True, slots=True)
class SparqlConfig:
    """Everything a ``sparql+http(s)://`` URL says, checked. ``url`` is the URL as shown."""

    url: str
    query: str
    update: str
    store: str | None
    layout: Layout
    state: str = DEFAULT_STATE
    default_graph: str | None = None
    bnodes: str = "skolem"
    star: str = "refuse"
    counts: str = "exact"
    genid: str = DEFAULT_GENID
    max_request: int = 32 << 20
    timeout: float = 300.0
    ca: Path | None = None
    #: The ``Authorization`` header value, or None; never shown.
    authorization: str | None = field(default=None, repr=False)


def _secret(spec: str, what: str, file: str | None, env: str | None) -> str | None:
    if file and env:
        raise UsageError(f"{spec}: give {what}-file or {what}-env, not both")
    if file:
        try:
            return Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"{spec}: cannot read the {what} file {file}: {exc.strerror}") from None
    if env:
        value = os.environ.get(env)
        if value is None:
            raise UsageError(f"{spec}: the environment variable {env} (the {what}) is not set")
        return value.strip()
    return None


#: The HTTP authentication schemes sent (RFC 7617 Basic, RFC 6750 Bearer): one header, sent
#: with every request, no challenge answered; a store asking for another (Virtuoso's Digest) is
#: refused naming it.
AUTH_SCHEMES = ("basic", "bearer")


def _authorization(spec: str, options: dict[str, str]) -> str | None:
    password = _secret(spec, "password", options.get("password-file"), options.get("password-env"))
    token = _secret(spec, "token", options.get("token-file"), options.get("token-env"))
    user = options.get("user")
    if token is not None:
        if user is not None or password is not None:
            raise UsageError(f"{spec}: give a bearer token or a user and password, not both")
        return "Bearer " + token
    if (user is None) != (password is None):
        raise UsageError(f"{spec}: HTTP Basic needs both user= and password-file= (or password-env=)")
    if user is None or password is None:
        return None
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _endpoint(spec: str, base: str, path: str, value: str | None) -> str:
    if value is not None:
        if value.startswith(("http://", "https://")):
            return value
        if not value.startswith("/"):
            raise UsageError(f"{spec}: an endpoint is a path after the URL's (/query) or an http(s):// URL: {value!r}")
        return base + value
    return base + path


def parse_url(spec: str) -> SparqlConfig:
    """Check ``spec`` (``sparql+http(s)://…``) and return what it says; :class:`UsageError` if it
    cannot work. A password or token in the URL itself is refused without showing it."""
    scheme, sep, _ = spec.partition("://")
    if not sep or scheme.lower() not in ("sparql+http", "sparql+https"):
        raise UsageError(f"target {spec!r}: write sparql+http://HOST:PORT/PATH or sparql+https://…")
    parts = urllib.parse.urlsplit(spec)
    if parts.username is not None or parts.password is not None:
        shown = f"{parts.scheme}://…@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        raise UsageError(
            f"target {shown}{parts.path}: credentials are never written in the URL (it is shown in logs and status); "
            "use user= with password-file= or password-env=, or token-file= or token-env="
        )
    if not parts.hostname:
        raise UsageError(f"target {spec!r} names no host")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"target {spec!r}: the port is not a number") from None
    options: dict[str, str] = {}
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key not in _KNOWN:
            raise UsageError(f"target {spec!r}: unknown option {key!r} (known: {', '.join(sorted(_KNOWN))})")
        if key in options:
            raise UsageError(f"target {spec!r}: option {key!r} given twice")
        options[key] = value
    layout_name = options.get("layout", "")
    layout = LAYOUTS.get(layout_name)
    if layout is None:
        raise UsageError(f"target {spec!r}: unknown layout {layout_name!r} (fuseki, oxigraph or virtuoso)")
    http = parts.scheme.lower().partition("+")[2]
    host = f"{http}://{parts.hostname}" + (f":{port}" if port is not None else "")
    path = parts.path.rstrip("/")
    base = host + path
    shown = f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?layout={layout_name}" if layout_name else "")
    store = options.get("store")
    bnodes = options.get("bnodes", "skolem")
    bnodes = "skolem" if bnodes == "skolemize" else bnodes
    if bnodes not in BNODE_POLICIES:
        raise UsageError(f"target {spec!r}: bnodes= is skolem or refuse, not {bnodes!r}")
    star = options.get("star", layout.star)
    if star not in STAR_POLICIES:
        raise UsageError(f"target {spec!r}: star= is one of {', '.join(STAR_POLICIES)}, not {star!r}")
    misread = dict(layout.misread_star)
    if star in misread:
        kept = " or ".join(f"star={s}" for s in STAR_POLICIES if s not in misread)
        raise UsageError(f"target {spec!r}: star={star} cannot be kept: {misread[star]} (use {kept})")
    counts = options.get("counts", "exact")
    if counts not in COUNT_POLICIES:
        raise UsageError(f"target {spec!r}: counts= is exact or requested, not {counts!r}")
    return SparqlConfig(
        url=shown,
        query=_endpoint(spec, base, layout.query, options.get("query")),
        update=_endpoint(spec, base, layout.update, options.get("update")),
        store=_endpoint(spec, base, layout.store or "", store) if (store or layout.store) else None,
        layout=layout,
        state=options.get("state", DEFAULT_STATE).rstrip("/"),
        default_graph=options.get("default-graph", layout.default_graph),
        bnodes=bnodes,
        star=star,
        counts=counts,
        genid=options.get("genid", DEFAULT_GENID),
        max_request=int(_number(spec, options, "max-request", layout.max_request, int)),
        timeout=_number(spec, options, "timeout", 300.0, float),
        ca=Path(options["ca"]) if options.get("ca") else None,
        authorization=_authorization(spec, options),
    )


def _number(spec: str, options: dict[str, str], key: str, default: float, kind: type[float] | type[int]) -> float:
    text = options.get(key)
    if text is None:
        return default
    try:
        value: float = kind(text)
    except ValueError:
        raise UsageError(f"target {spec!r}: {key}= is a number, not {text!r}") from None
    if value <= 0:
        raise UsageError(f"target {spec!r}: {key}= must be positive")
    return value
