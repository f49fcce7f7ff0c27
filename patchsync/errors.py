"""The patchsync exception tree.

Every error patchsync raises on purpose derives from :class:`PatchsyncError`, so a caller
(and the CLI) can catch one type. Third-party exceptions (protobuf, rdflib, SQLAlchemy,
psycopg, nats-py, OS errors) are translated at the boundary where they occur, each backend
by one :class:`ErrorTable` of :class:`ErrorRule` rows defined here, so every backend
translates the same way::

    PatchsyncError
    ├── DecodeError        the input broke a rule of its format (the peer's fault)
    ├── EncodeError        the caller asked the writer for something the format forbids
    ├── UsageError         bad arguments or an unsupported combination of options
    ├── FormatError        a file format could not be chosen or is not supported
    └── ApplyError         a patch could not be applied to a target (nothing half-applied)
        ├── ChainError         a patch's ``prev`` does not follow the target's last patch
        ├── CheckpointError    a target's checkpoint does not match the log (replaced log)
        ├── SourceBusy         another applier is applying the source (wait for its turn)
        └── TargetUnavailable  the target is out of reach for now (retrying may help)
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass


class PatchsyncError(Exception):
    """Root of all errors raised by patchsync.

    Messages speak of the library's parameters as ``name=value`` (``reset=True``,
    ``chain='ignore'``). :attr:`params` lists the ones a message names, so a front end can
    show its own spelling instead (the command line shows its flags, ``--reset``).
    """

    #: ``(name, value)`` of each parameter the message names as ``name=repr(value)``.
    params: tuple[tuple[str, object], ...] = ()

    def naming(self, *params: tuple[str, object]) -> PatchsyncError:
        """Record the parameters the message names; returns the error (``raise E(...).naming(...)``)."""
        self.params = params
        return self


def param(name: str, value: object) -> str:
    """How a message names a parameter setting: ``name=repr(value)``."""
    return f"{name}={value!r}"


class UsageError(PatchsyncError):
    """The caller passed arguments that cannot work together."""


class FormatError(PatchsyncError):
    """A file's format is unknown or unsupported for the requested operation."""


class EncodeError(PatchsyncError):
    """A writer was asked to produce something its format or options forbid."""


class DecodeError(PatchsyncError):
    """Input that breaks a rule of its format.

    ``source`` names the input (a path or ``<stdin>``), ``offset`` is the byte offset of
    the frame (Jelly) or line start (text) where the problem was found, ``frame`` and
    ``row`` locate the row inside binary streams (``line`` for text), ``message`` numbers
    the RDF Message of a message log (from 1) and ``rule`` quotes
    the rule that was broken. ``str(error)`` is a single line suitable for users.
    """

    def __init__(
        self,
        rule: str,
        *,
        source: str = "<stream>",
        offset: int | None = None,
        frame: int | None = None,
        row: int | None = None,
        line: int | None = None,
        message: int | None = None,
    ) -> None:
        self.rule = rule
        self.source = source
        self.offset = offset
        self.frame = frame
        self.row = row
        self.line = line
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = [self.source]
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.frame is not None:
            where.append(f"frame {self.frame}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.message is not None:
            where.append(f"message {self.message}")
        if self.line is not None:
            where.append(f"line {self.line}")
        return f"{', '.join(where)}: {self.rule}"

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments need help to survive pickling (Spark ships errors).
        return (
            _rebuild_decode_error,
            (self.rule, self.source, self.offset, self.frame, self.row, self.line, self.message),
        )


def _rebuild_decode_error(
    rule: str,
    source: str,
    offset: int | None,
    frame: int | None,
    row: int | None,
    line: int | None,
    message: int | None = None,
) -> DecodeError:
    return DecodeError(rule, source=source, offset=offset, frame=frame, row=row, line=line, message=message)


class ApplyError(PatchsyncError):
    """Applying patches to a target failed; the target keeps its last committed unit."""


class ChainError(ApplyError):
    """A patch's ``prev`` header differs from the target's last applied patch id (gap or fork)."""


class CheckpointError(ApplyError):
    """A target's checkpoint for a source does not match the log (the log was replaced)."""


class SourceBusy(ApplyError):
    """Another applier holds the source: one applier applies a source to a target at a time.

    ``progress`` changes each time that applier commits (the source's checkpoint version as
    it left it), so a caller waiting for its turn
    (:func:`patchsync.apply.turns.wait_for_turn`) tells an applier at work from a stalled one.
    """

    def __init__(self, message: str, *, progress: object = None) -> None:
        super().__init__(message)
        self.progress = progress


class TargetUnavailable(ApplyError):
    """The target is unreachable for now: connection lost, server restarting, database locked.

    The open database transaction is lost with everything it held (its checkpoint too), so
    reopening the target and resuming from its checkpoint applies nothing twice. The tail
    daemon does that with backoff; one-shot commands report it and exit.
    """


class TargetHeld(TargetUnavailable):
    """Another process holds the whole target (an Oxigraph store opens in one process at a
    time): it may let go, as an overlapping ``apply`` does when it is done
    (:func:`patchsync.apply.turns.open_in_turn` waits for that)."""


#: What drivers say when no retry can help, whatever type they give the error: a database,
#: role or user that does not exist, a failed authentication, a host name that does not
#: resolve. Drivers raise these as connection errors, like a server that is restarting
#: (psycopg gives them no SQLSTATE; the NATS client reports the cause beside its "no
#: servers"), so their words are what tells them apart.
PERMANENT_FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("the database or role does not exist", re.compile(r'\b(database|role|user) "[^"]*" does not exist')),
    (
        "authentication failed",
        re.compile(r"authentication failed|no pg_hba\.conf entry|authorization violation", re.IGNORECASE),
    ),
    (
        "the host name does not resolve",
        re.compile(
            r"failed to resolve host|could not translate host name|name or service not known|"
            r"nodename nor servname|no address associated with hostname",
            re.IGNORECASE,
        ),
    ),
)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what it wraps (a driver's ``orig``) and was raised from, each once."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for nxt in (getattr(current, "orig", None), current.__cause__, current.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def permanent_failure(exc: BaseException) -> BaseException | None:
    """The exception in ``exc``'s chain that shows a failure no retry can fix
    (:data:`PERMANENT_FAILURES`), or ``None``."""
    for current in causes(exc):
        text = str(current)
        if any(pattern.search(text) for _, pattern in PERMANENT_FAILURES):
            return current
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` means the target is out of reach for now, so that reopening it later
    may succeed: the one classification the tail daemon, its start and every backend use.

    True when ``exc`` or an exception it was raised from is a :class:`TargetUnavailable`
    (each backend translates its driver's transient errors to that), unless the chain shows
    a :func:`permanent_failure`.
    """
    if permanent_failure(exc) is not None:
        return False
    return any(isinstance(current, TargetUnavailable) for current in causes(exc))


#: The optional dependencies, by top-level module: the distribution that provides it and the
#: extra of ``pyproject.toml`` that installs it (``tests/test_extras.py`` holds the two together).
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "sqlalchemy": ("SQLAlchemy", "sql"),
    "alembic": ("Alembic", "sql"),
    "psycopg": ("psycopg", "postgres"),
    "pyoxigraph": ("pyoxigraph", "oxigraph"),
    "watchdog": ("watchdog", "watch"),
    "nats": ("nats-py", "nats"),
    "pyspark": ("pyspark", "spark"),
    "pyarrow": ("pyarrow", "spark"),
    "yaml": ("PyYAML", "yaml"),
    "grpc": ("grpcio", "serve"),
    "grpc_health": ("grpcio-health-checking", "serve"),
    "aiohttp": ("aiohttp", "serve"),
    "prometheus_client": ("prometheus-client", "serve"),
}


def missing_extra(exc: ImportError, what: str) -> UsageError | None:
    """``exc``, an import that failed for want of an optional dependency, as the one line saying
    that ``what`` needs it and which extra installs it; ``None`` when the missing module is no
    optional dependency (then it is a broken installation, not a choice of extras)."""
    known = OPTIONAL_MODULES.get((exc.name or "").partition(".")[0])
    if known is None:
        return None
    distribution, extra = known
    return UsageError(f"{what} needs {distribution}, which is not installed: pip install 'patchsync[{extra}]'")


#: errno values of a disk no retry can fix until someone acts: full, or over its quota.
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
#: errno values of a file system this process may not write: read-only, or no permission.
READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def errno_in(codes: frozenset[int]) -> Callable[[BaseException], bool]:
    """A rule condition: the error carries one of the errno ``codes``."""
    return lambda exc: getattr(exc, "errno", None) in codes


def cannot_write(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc``, a failed write of a file made beside ``path`` first (a temporary or ``.partial``
    file, renamed over it at the end), as the error of ``path`` as the user gave it: that other
    file's name is no business of theirs."""
    return OSError(exc.errno, f"cannot write: {exc.strerror}", os.fspath(path))


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (drivers add SQL, hints and links below it)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _always(_exc: BaseException) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """One row of a backend's translation table: errors that are instances of ``types`` and
    satisfy ``when`` become ``kind`` (:class:`TargetUnavailable` where retrying later may
    succeed, :class:`ApplyError` where a retry repeats the failure). ``say`` words the
    message after ``where:`` (default: the table's ``reason``, the driver's first line)."""

    name: str
    types: tuple[type[BaseException], ...]
    kind: type[PatchsyncError]
    when: Callable[[BaseException], bool] = _always
    say: Callable[[BaseException], str] | None = None

    def matches(self, exc: BaseException) -> bool:
        """Whether this row applies to ``exc``."""
        return isinstance(exc, self.types) and self.when(exc)


@dataclass(frozen=True, slots=True)
class ErrorTable:
    """How one backend's exceptions become patchsync errors: its rules, most specific first.

    With ``chain`` a rule also matches what the error wraps (a driver's ``orig``) and was
    raised from (:func:`causes`). An error no rule matches becomes ``default``, or, with no
    default, is not the backend's (:meth:`translate` returns ``None``).
    """

    rules: tuple[ErrorRule, ...]
    chain: bool = True
    default: type[PatchsyncError] | None = ApplyError
    reason: Callable[[BaseException], str] = first_line

    def rule_for(self, exc: BaseException) -> ErrorRule | None:
        """The first rule matching ``exc`` (or, with ``chain``, an error in its chain)."""
        candidates = list(causes(exc)) if self.chain else [exc]
        for rule in self.rules:
            if any(rule.matches(e) for e in candidates):
                return rule
        return None

    def classify(self, exc: BaseException) -> type[PatchsyncError] | None:
        """The patchsync error class ``exc`` translates to."""
        rule = self.rule_for(exc)
        return rule.kind if rule is not None else self.default

    def find(self, exc: BaseException, where: str) -> PatchsyncError | None:
        """``exc`` as the patchsync error saying ``where: <why>``, or ``None`` when it is not
        this backend's (no rule matches and there is no default). patchsync errors pass
        through unchanged."""
        if isinstance(exc, PatchsyncError):
            return exc
        rule = self.rule_for(exc)
        if rule is None:
            return None if self.default is None else self.default(f"{where}: {self.reason(exc)}")
        return rule.kind(f"{where}: {(rule.say or self.reason)(exc)}")

    def translate(self, exc: BaseException, where: str) -> PatchsyncError:
        """:meth:`find`, with an error no rule matches as ``default`` (else :class:`ApplyError`);
        raise the result ``from exc``."""
        found = self.find(exc, where)
        return found if found is not None else ApplyError(f"{where}: {self.reason(exc)}")
