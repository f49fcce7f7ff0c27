"""Apply targets found by the scheme of their spec (``sqlite:///state.db``, ``file:out.nq``).

One table maps each scheme to a lazy ``"module:Class"`` loader, so naming a scheme imports
nothing heavy until a target of that kind is opened (SQLAlchemy, rdflib and pyoxigraph
load only when used). Third parties add schemes with :func:`register_target`. A loaded
class is called as ``cls(rest, **options)`` where ``rest`` is what follows ``scheme:``,
except for SQL targets, which take the whole URL (SQLAlchemy parses it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from patchsync._lazy import load
from patchsync.apply.target import Target
from patchsync.errors import ApplyError, UsageError


def _sqlite_file(spec: str) -> Path | None:
    """The database file a SQLite URL names (``None``: in memory); a URL SQLite reads
    otherwise than its writer meant is refused in one line."""
    scheme, _, rest = spec.partition(":")
    if rest == "//" or rest.startswith("///"):
        path = rest[3:].partition("?")[0]
        return None if path in ("", ":memory:") else Path(path)
    name = rest.lstrip("/") or "state.db"
    raise UsageError(
        f"cannot open target {spec!r}: a SQLite URL has three slashes before a relative path "
        f"({scheme}:///{name}) and four before an absolute one ({scheme}:////var/lib/{Path(name).name})"
    )


def _path_after_scheme(form: str) -> Callable[[str], Path | None]:
    """A ``locate`` for specs spelled ``form`` (``scheme:PATH``): the path, which may not be empty."""

    def locate(spec: str) -> Path | None:
        rest = spec.partition(":")[2]
        if not rest:
            raise UsageError(f"target {spec!r} names no path: write {form}")
        return Path(rest)

    return locate


def _nowhere(_spec: str) -> Path | None:
    return None


@dataclass(frozen=True, slots=True)
class TargetEntry:
    """One registered scheme: where its class lives and whether it wants the whole spec.

    ``locate`` checks a spec's form and returns the local path the target lives at
    (``None``: on a server or in memory), without opening it: read-only commands refuse a
    target whose path does not exist instead of creating an empty one.
    """

    loader: str
    whole_spec: bool = False
    locate: Callable[[str], Path | None] = _nowhere

    def load(self, spec: str | None = None) -> Callable[..., Target]:
        """Import and return the target class (the first call imports its module); a missing
        optional dependency is one line naming the target ``spec`` and the extra that installs it."""
        what = f"target {spec!r}" if spec is not None else self.loader
        return cast("Callable[..., Target]", load(self.loader, what))


_SQL = "patchsync.apply.targets.sql.target:SqlTarget"
_TARGETS: dict[str, TargetEntry] = {
    "sqlite": TargetEntry(_SQL, whole_spec=True, locate=_sqlite_file),
    "sqlite+pysqlite": TargetEntry(_SQL, whole_spec=True, locate=_sqlite_file),
    "postgresql": TargetEntry(_SQL, whole_spec=True),
    "postgresql+psycopg": TargetEntry(_SQL, whole_spec=True),
    "file": TargetEntry("patchsync.apply.targets.file:FileTarget", locate=_path_after_scheme("file:PATH.trig")),
    "oxigraph": TargetEntry(
        "patchsync.apply.targets.oxigraph:OxigraphTarget", locate=_path_after_scheme("oxigraph:DIR")
    ),
    "memory": TargetEntry("patchsync.apply.targets.memory:open_memory_target"),
    "sparql+http": TargetEntry("patchsync.apply.targets.sparql:SparqlTarget", whole_spec=True),
    "sparql+https": TargetEntry("patchsync.apply.targets.sparql:SparqlTarget", whole_spec=True),
}


def register_target(scheme: str, loader: str, *, whole_spec: bool = False) -> None:
    """Make ``scheme:…`` specs open targets of the class named by ``loader`` (``"module:Class"``).

    The class is imported on first use. With ``whole_spec`` it receives the whole spec
    (a URL), otherwise what follows ``scheme:``. Registering a scheme again replaces it.
    """
    module_name, sep, attr = loader.partition(":")
    if not scheme or ":" in scheme or not sep or not module_name or not attr:
        raise UsageError(f"register_target({scheme!r}, {loader!r}): expected a scheme and 'module:Class'")
    _TARGETS[scheme.lower()] = TargetEntry(loader, whole_spec)


def target_schemes() -> list[str]:
    """The registered schemes, sorted."""
    return sorted(_TARGETS)


def open_target(spec: str, *, existing: bool = False, **options: Any) -> Target:
    """Open the target named by ``spec`` (``scheme:rest``) through the registry.

    ``file:PATH`` (``.trig``, ``.nq``, ``.ttl``, ``.nt``) is a file target,
    ``oxigraph:DIR`` a pyoxigraph store, ``memory:`` a fresh in-memory target and
    ``sqlite:``/``postgresql[+psycopg]:`` URLs SQL databases. An unknown scheme fails with
    :class:`UsageError` listing the known ones. With ``existing`` a target stored in a local
    path that does not exist fails with :class:`UsageError` instead of being created (for
    readers: ``dump``, ``status``, ``snapshot``).
    """
    entry = _entry(spec)
    try:
        where = entry.locate(spec)
        if existing and where is not None and not where.exists():
            raise UsageError(f"target {spec!r}: {where} does not exist (only apply and tail create a target)")
        if where is not None:
            require_directory(where)
        cls = entry.load(spec)
        return cls(spec if entry.whole_spec else spec.partition(":")[2], **options)
    except ValueError as exc:
        # A value in the spec its backend or driver cannot parse (a URL option, a path):
        # the caller's, whichever library found it (backends translate the rest).
        raise UsageError(f"target {spec!r}: {exc}") from None


def require_directory(where: Path) -> None:
    """Refuse a target stored at the local path ``where`` whose directory does not exist
    (:class:`ApplyError`): the one rule of every command that creates a target (``apply``,
    ``tail``, whose state directory beside the target would make it), checked before anything
    is made, so that a mistyped path names the target rather than a log or a lock file."""
    if not where.parent.is_dir():
        raise ApplyError(f"{where}: cannot open the target: no such directory {where.parent}")


def check_target_directory(spec: str) -> None:
    """:func:`require_directory` of the target ``spec``, without opening it (a target on a
    server or in memory has no directory to check)."""
    where = target_path(spec)
    if where is not None:
        require_directory(where)


def target_path(spec: str) -> Path | None:
    """The local path the target ``spec`` lives at, without opening it (``None``: on a
    server or in memory); a malformed spec fails as :func:`open_target` would."""
    return _entry(spec).locate(spec)


def _entry(spec: str) -> TargetEntry:
    scheme, sep, _ = spec.partition(":")
    entry = _TARGETS.get(scheme.lower()) if sep else None
    if entry is None and sep and "+" in scheme:
        # A SQLAlchemy URL naming another driver of a known dialect (postgresql+psycopg2:).
        base = _TARGETS.get(scheme.lower().partition("+")[0])
        entry = base if base is not None and base.whole_spec else None
    if entry is None:
        raise UsageError(
            f"unknown target {spec!r}: the scheme must be one of {', '.join(s + ':' for s in target_schemes())} "
            "(sqlite:///state.db, postgresql+psycopg://..., file:PATH.trig|.nq|.ttl|.nt, oxigraph:DIR, memory:)"
        )
    return entry


__all__ = [
    "TargetEntry",
    "check_target_directory",
    "open_target",
    "register_target",
    "require_directory",
    "target_path",
    "target_schemes",
]
