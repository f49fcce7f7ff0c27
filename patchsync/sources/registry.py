"""Patch sources found by name: a log file, a directory of log segments, or a network address.

This module is the one place that decides what a source name is. A name with ``SCHEME://``
is looked up by its scheme (``nats://HOST:PORT/STREAM``); any other name is a path, a
directory standing for its ``.jellyp`` segments in file-name order (docs/design.md §6).

Each kind is registered once, with what it can do (:data:`READ_AT`, :data:`FOLLOW`,
:data:`APPEND`, :data:`LAG`) and, for network kinds, the parts that fill its roles
(:class:`~patchsync.sources.roles.Roles`, each role a typed protocol in
:mod:`patchsync.sources.roles`: ``connect`` gives the :class:`~patchsync.remote.interface.RemoteLog`
every reading, following, lag and publishing rule is written on). Commands ask a resolved
:class:`Source` for a capability or a role instead of testing schemes, so a new transport
plugs in by one call to :func:`register_source`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from patchsync._lazy import load, require
from patchsync.errors import UsageError
from patchsync.sources.roles import (
    Check,
    CheckpointAfter,
    Connect,
    FetchSnapshot,
    Publish,
    Roles,
    TopicFactory,
    Writer,
)

#: The source can be read from a stored position (a checkpoint) instead of its start.
READ_AT = "read_at"
#: The source can be followed live: new patches arrive after the reader caught up.
FOLLOW = "follow"
#: Patches can be appended to the source, with the chain checked by the writer.
APPEND = "append"
#: How far a reader is behind the source can be told (bytes or messages).
LAG = "lag"

CAPABILITIES = frozenset({READ_AT, FOLLOW, APPEND, LAG})

#: The suffix of the log files a directory source stands for.
LOG_SUFFIX = ".jellyp"


@dataclass(frozen=True, slots=True)
class SourceKind:
    """One kind of source: its name, what it can do and, for addresses, how to read them.

    ``scheme`` is set for network kinds (the part before ``://``); ``parse`` is a
    ``"module:function"`` that turns an address into its parsed form, raising
    :class:`UsageError` for a malformed one, and whose ``stream`` attribute names the log at
    the server (the same log may be reached through several host names); ``roles`` names the
    ``"module:attr"`` that fills each of its roles (:class:`~patchsync.sources.roles.Roles`). ``requires`` names the optional modules the
    roles import when they first connect: they are imported with the first role asked for, so
    a missing one is named, with its extra, before anything is opened or created. ``form`` is
    how an address is written, for help texts (``nats://HOST:PORT/STREAM``).
    """

    name: str
    capabilities: frozenset[str]
    scheme: str | None = None
    parse: str | None = None
    roles: Roles = field(default_factory=Roles)
    requires: tuple[str, ...] = ()
    form: str = ""

    def can(self, capability: str) -> bool:
        """Whether sources of this kind have ``capability``."""
        return capability in self.capabilities


def _role(kind: SourceKind, name: str, role: str) -> Any:
    """What serves ``role`` for ``kind`` (the source ``name``), with the modules it requires."""
    loader = getattr(kind.roles, role, None)
    if loader is None:
        raise UsageError(f"{name}: a {kind.name} source has no {role}")
    require(kind.requires, name)
    return load(loader, name)


@dataclass(frozen=True, slots=True)
class Source:
    """A resolved source name: its kind, the name as given and its parsed address.

    ``address`` is a :class:`~pathlib.Path` for files and directories, and what the kind's
    ``parse`` returned for an address (``StreamURL`` for ``nats://``).
    """

    kind: SourceKind
    name: str
    address: Any

    @property
    def is_path(self) -> bool:
        """Whether the source is a file or directory on this machine (not an address)."""
        return self.kind.scheme is None

    @property
    def path(self) -> Path:
        """The source's path; an address has none (:class:`UsageError`)."""
        if not self.is_path:
            raise UsageError(f"{self.name}: a {self.kind.name} source is an address, not a file or directory")
        return Path(self.address)

    def require(self, capability: str, command: str) -> Source:
        """This source, if it has ``capability``; else one line saying ``command`` cannot use it."""
        if not self.kind.can(capability):
            raise UsageError(f"{self.name}: {command} cannot use a {self.kind.name} source (it cannot {capability})")
        return self

    def has(self, role: str) -> bool:
        """Whether this source's kind fills ``role``."""
        return self.kind.roles.has(role)

    # Each role typed by its protocol (patchsync.sources.roles); loaded on first use, so the
    # loaded object is the kind's word for it.
    def connect(self) -> Connect:
        """How to open a :class:`~patchsync.remote.interface.RemoteLog` to this source."""
        return cast(Connect, _role(self.kind, self.name, "connect"))

    def writer(self) -> Writer:
        """A recorder's writer to this source."""
        return cast(Writer, _role(self.kind, self.name, "writer"))

    def publish(self) -> Publish:
        """Publish log files to this source."""
        return cast(Publish, _role(self.kind, self.name, "publish"))

    def snapshot(self) -> FetchSnapshot:
        """Fetch the snapshot this source serves."""
        return cast(FetchSnapshot, _role(self.kind, self.name, "snapshot"))

    def checkpoint_after(self) -> CheckpointAfter:
        """A replica's checkpoint just past a patch of this source."""
        return cast(CheckpointAfter, _role(self.kind, self.name, "checkpoint_after"))

    def check(self) -> Check:
        """Refuse this source if it does not exist."""
        return cast(Check, _role(self.kind, self.name, "check"))

    def topic(self) -> TopicFactory:
        """What makes a served log topic of this source."""
        return cast(TopicFactory, _role(self.kind, self.name, "topic"))

    def log_files(self) -> list[Path]:
        """The log files this source stands for, in log order (none for an address).

        A directory stands for its ``.jellyp`` files by file name; a file for itself,
        whether or not it exists yet.
        """
        if not self.is_path:
            return []
        path = Path(self.address)
        if path.is_dir():
            return directory_logs(path)
        return [path]


def directory_logs(directory: Path, suffixes: tuple[str, ...] = (LOG_SUFFIX,)) -> list[Path]:
    """The files of ``directory`` whose names end with one of ``suffixes`` (lower case, matched
    in any case, ``.nq.gz`` included), by file name: the rule for every directory of logs."""
    return sorted(f for f in directory.iterdir() if f.name.lower().endswith(suffixes) and f.is_file())


#: A log served by ``patchsync serve`` from this machine: the server is its one writer.
_FILE_TOPIC = Roles(topic="patchsync.serve.file_topic:file_topic")
FILE = SourceKind("file", frozenset({READ_AT, FOLLOW, APPEND, LAG}), roles=_FILE_TOPIC)
DIRECTORY = SourceKind("directory", frozenset({READ_AT, FOLLOW, APPEND, LAG}), roles=_FILE_TOPIC)

_SCHEMES: dict[str, SourceKind] = {
    "nats": SourceKind(
        "nats",
        frozenset({READ_AT, FOLLOW, APPEND, LAG}),
        scheme="nats",
        parse="patchsync.nats.url:parse_stream_url",
        roles=Roles(
            connect="patchsync.nats.nats_log:connect",
            writer="patchsync.nats.publish:StreamWriter",
            publish="patchsync.nats.publish:publish_logs",
            check="patchsync.nats.publish:check_stream",
            topic="patchsync.serve.nats_topic:nats_topic",
        ),
        requires=("nats",),
        form="nats://HOST:PORT/STREAM",
    ),
    # A topic of `patchsync serve` (its gRPC door): read, followed and appended to there.
    "grpc": SourceKind(
        "grpc",
        frozenset({READ_AT, FOLLOW, APPEND, LAG}),
        scheme="grpc",
        parse="patchsync.remote.grpc_client:parse_grpc_url",
        roles=Roles(
            connect="patchsync.remote.grpc_client:connect",
            writer="patchsync.remote.grpc_client:GrpcWriter",
            publish="patchsync.remote.grpc_client:publish_logs",
            snapshot="patchsync.remote.grpc_client:fetch_snapshot",
            checkpoint_after="patchsync.tail.network_follower:checkpoint_after",
        ),
        requires=("grpc",),
        form="grpc://HOST:PORT/TOPIC",
    ),
}
# A log of `patchsync serve` through its HTTP door (the change feed, RDF Delta's append).
for _scheme in ("http", "https"):
    _SCHEMES[_scheme] = SourceKind(
        _scheme,
        frozenset({READ_AT, FOLLOW, APPEND, LAG}),
        scheme=_scheme,
        parse="patchsync.remote.http_client:parse_http_url",
        roles=Roles(
            connect="patchsync.remote.http_client:connect",
            publish="patchsync.remote.http_client:publish_logs",
            writer="patchsync.remote.http_client:HttpWriter",
            snapshot="patchsync.remote.http_client:fetch_snapshot",
            checkpoint_after="patchsync.tail.network_follower:checkpoint_after",
        ),
        form=f"{_scheme}://HOST:PORT/NAME",
    )


def register_source(kind: SourceKind) -> None:
    """Make ``SCHEME://…`` names resolve to sources of ``kind`` (replacing any kind of that scheme)."""
    if not kind.scheme or not kind.scheme.isascii() or ":" in kind.scheme or "/" in kind.scheme:
        raise UsageError(f"register_source({kind.name!r}): a source kind needs a scheme (the part before ://)")
    unknown = kind.capabilities - CAPABILITIES
    if unknown:
        raise UsageError(f"register_source({kind.name!r}): unknown capabilities {sorted(unknown)}")
    _SCHEMES[kind.scheme.lower()] = kind


def source_schemes() -> list[str]:
    """The registered address schemes, sorted."""
    return sorted(_SCHEMES)


def address_forms(capability: str) -> list[str]:
    """How the registered address kinds that have ``capability`` are written, by scheme: what
    help texts list, so that a kind registered here is named there."""
    return [kind.form or f"{scheme}://…" for scheme, kind in sorted(_SCHEMES.items()) if kind.can(capability)]


def scheme_of(name: str) -> str | None:
    """The scheme of ``name`` if it is written as an address (``SCHEME://…``), else ``None``."""
    scheme, sep, _ = name.partition("://")
    if not sep or not scheme or not all(c.isalnum() or c in "+.-" for c in scheme):
        return None
    return scheme.lower()


def is_address(name: str | os.PathLike[str]) -> bool:
    """Whether ``name`` is a network address rather than a path."""
    return scheme_of(os.fspath(name)) is not None


def resolve_source(name: str | os.PathLike[str]) -> Source:
    """The source ``name`` stands for; an unknown scheme or a malformed address is one line."""
    text = os.fspath(name)
    scheme = scheme_of(text)
    if scheme is None:
        path = Path(text)
        return Source(DIRECTORY if path.is_dir() else FILE, text, path)
    kind = _SCHEMES.get(scheme)
    if kind is None:
        known = ", ".join(f"{s}://" for s in source_schemes())
        raise UsageError(f"{text}: unknown source scheme {scheme}:// (known: {known}, or a file or directory)")
    parse: Callable[[str], Any] = load(kind.parse, text) if kind.parse else str
    return Source(kind, text, parse(text))


def address_snapshot(name: str) -> FetchSnapshot:
    """What fetches the snapshot served at address ``name``, found by its scheme alone (the
    address names a snapshot, ``…/NAME/init``, not a log; the role parses it). A path, an
    unknown scheme or a kind without snapshots is one line."""
    scheme = scheme_of(name)
    kind = _SCHEMES.get(scheme) if scheme is not None else None
    if kind is None:
        raise UsageError(f"{name}: not an address of a known source kind (known: {', '.join(source_schemes())})")
    return cast(FetchSnapshot, _role(kind, name, "snapshot"))


def kinds_with_role(role: str) -> list[str]:
    """The names of the kinds that have ``role`` (paths first, then schemes as ``SCHEME://``),
    for a line saying which kinds would have done."""
    paths = [kind.name for kind in (FILE, DIRECTORY) if kind.roles.has(role)]
    return paths + [f"{scheme}://" for scheme in source_schemes() if _SCHEMES[scheme].roles.has(role)]


def resolve_sources(names: Iterable[str | os.PathLike[str]]) -> list[Source]:
    """:func:`resolve_source` of each name, in order."""
    return [resolve_source(n) for n in names]


def log_files(names: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The log files of ``names`` in order: a directory stands for its ``.jellyp`` files by name.

    Addresses are left out (a stream's position is its checkpoint, not a file).
    """
    return [f for source in resolve_sources(names) for f in source.log_files()]


__all__ = [
    "APPEND",
    "CAPABILITIES",
    "DIRECTORY",
    "FILE",
    "FOLLOW",
    "LAG",
    "LOG_SUFFIX",
    "READ_AT",
    "Source",
    "SourceKind",
    "address_forms",
    "address_snapshot",
    "directory_logs",
    "is_address",
    "kinds_with_role",
    "log_files",
    "register_source",
    "resolve_source",
    "resolve_sources",
    "scheme_of",
    "source_schemes",
]
