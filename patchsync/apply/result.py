"""What one apply did: the counts the applier keeps and the command line reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ApplyResult:
    """What one apply did.

    ``units`` committed units, ``aborted`` units dropped by ``TA``; ``added``/``deleted``
    rows that changed the target and ``noop`` rows that did not (set semantics);
    ``patches`` patches applied, ``skipped`` patches skipped as re-delivered; ``replayed``
    events passed over because the checkpoint says they were applied before.
    """

    source: str = "<events>"
    units: int = 0
    aborted: int = 0
    added: int = 0
    deleted: int = 0
    noop: int = 0
    patches: int = 0
    skipped: int = 0
    replayed: int = 0

    @property
    def rows(self) -> int:
        return self.added + self.deleted + self.noop

    def merge(self, other: ApplyResult) -> None:
        """Add another result's counts to this one."""
        self.units += other.units
        self.aborted += other.aborted
        self.added += other.added
        self.deleted += other.deleted
        self.noop += other.noop
        self.patches += other.patches
        self.skipped += other.skipped
        self.replayed += other.replayed


__all__ = ["ApplyResult"]
