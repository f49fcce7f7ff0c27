"""The patchsync exception tree.

Every error patchsync raises on purpose derives from :class:`PatchsyncError`, so a caller
(and the CLI) can catch one type. Third-party exceptions (protobuf, rdflib, SQLAlchemy,
OS errors) are translated at the boundary where they occur::

    PatchsyncError
    ├── DecodeError        the input broke a rule of its format (the peer's fault)
    ├── EncodeError        the caller asked the writer for something the format forbids
    ├── UsageError         bad arguments or an unsupported combination of options
    ├── FormatError        a file format could not be chosen or is not supported
    └── ApplyError         a patch could not be applied to a target (nothing half-applied)
        ├── ChainError         a patch's ``prev`` does not follow the target's last patch
        ├── CheckpointError    a target's checkpoint does not match the log (replaced log)
        └── TargetUnavailable  the target is out of reach for now (retrying may help)
"""

from __future__ import annotations


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
    ``row`` locate the row inside binary streams (``line`` for text) and ``rule`` quotes
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
    ) -> None:
        self.rule = rule
        self.source = source
        self.offset = offset
        self.frame = frame
        self.row = row
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        where = [self.source]
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        if self.frame is not None:
            where.append(f"frame {self.frame}")
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.line is not None:
            where.append(f"line {self.line}")
        return f"{', '.join(where)}: {self.rule}"

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only arguments need help to survive pickling (Spark ships errors).
        return (_rebuild_decode_error, (self.rule, self.source, self.offset, self.frame, self.row, self.line))


def _rebuild_decode_error(
    rule: str,
    source: str,
    offset: int | None,
    frame: int | None,
    row: int | None,
    line: int | None,
) -> DecodeError:
    return DecodeError(rule, source=source, offset=offset, frame=frame, row=row, line=line)


class ApplyError(PatchsyncError):
    """Applying patches to a target failed; the target keeps its last committed unit."""


class ChainError(ApplyError):
    """A patch's ``prev`` header differs from the target's last applied patch id (gap or fork)."""


class CheckpointError(ApplyError):
    """A target's checkpoint for a source does not match the log (the log was replaced)."""


class TargetUnavailable(ApplyError):
    """The target is unreachable for now: connection lost, server restarting, database locked.

    The open database transaction is lost with everything it held (its checkpoint too), so
    reopening the target and resuming from its checkpoint applies nothing twice. The tail
    daemon does that with backoff; one-shot commands report it and exit.
    """
