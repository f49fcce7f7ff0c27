"""Whether a patch continues a log, and which patches of a run a destination already holds
(docs/design.md §4 and §6).

Every writer of a log (``append`` into a file, ``publish`` to a stream or a served topic,
``ingest``) and the applier follow the same rule, written here once:

- :func:`follows`: a patch continues a log whose last patch is ``head`` when its ``prev`` is
  that head (no ``prev``: the log is empty) and it is not the head itself.
- :func:`held_prefix`: of the patches a run would write, in order, the destination already
  holds every one up to and including the last whose id it is known to hold (a log file
  knows every id it holds, a stream or topic its head). Those are skipped and counted, so a
  rerun writes nothing twice; the rest must continue the head.
- :class:`ChainCheck`: the rest, checked one by one against the head as the patches before
  them leave it. A first patch without ``prev`` onto a log that is not empty, and a patch
  whose ``prev`` is not the head, are refused with one :class:`ChainError` line naming the
  source, the patch, the destination and its head. A patch without an id is not checked
  (nothing can name it as its ``prev``), and an empty destination takes any first patch: a
  log may start anywhere in a chain (the segments after a snapshot).

Sans-I/O: ids in, decisions out; the callers read the logs.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from itertools import chain, islice
from typing import TypeVar

from patchsync.errors import ChainError, param

T = TypeVar("T")

#: A patch's ``(id, prev)``, as the caller reads them from its headers.
ChainIds = tuple[str | None, str | None]


def follows(patch_id: str | None, prev: str | None, head: str | None) -> bool:
    """Whether a patch with ``prev`` continues a log whose last patch is ``head``."""
    return prev == head and patch_id != head


def held_prefix(
    patches: Callable[[], Iterator[T]],
    ids: Callable[[T], ChainIds],
    head: str | None,
    holds: Container[str] = (),
) -> tuple[int, Iterator[T]]:
    """How many leading patches of ``patches()`` the destination already holds, and an
    iterator of the others (from the first one it does not hold).

    ``head`` is the destination's last patch id (``None``: empty), ``holds`` the other ids
    it is known to hold. ``patches`` is called once more only when the patches must be read
    again from the start: reading stops at the head, or at a patch that follows it, since no
    later patch can be held without a fork.
    """
    if head is None and not holds:
        return 0, patches()
    found = 0
    it = patches()
    for i, patch in enumerate(it):
        patch_id, prev = ids(patch)
        if patch_id is not None and (patch_id == head or patch_id in holds):
            found = i + 1
            if patch_id == head:
                return found, it
        elif head is not None and follows(patch_id, prev, head):
            if found == i:
                return found, chain([patch], it)
            break
    return found, islice(patches(), found, None)


class ChainCheck:
    """The patches a writer appends after the held ones, checked against the running head.

    ``destination`` names the log in messages, ``refused`` says what became of the writer's
    patches when one is refused. :meth:`check` refuses a patch that does not continue the
    head (:class:`ChainError`) and moves the head onto each one that does.
    """

    def __init__(self, head: str | None, destination: str, *, refused: str = "the patch was not appended") -> None:
        self.head = head
        self.destination = destination
        self.refused = refused

    def check(self, patch_id: str | None, prev: str | None, where: str | None = None) -> None:
        """Take the next patch (``where``: its source, for the message), or refuse it."""
        if patch_id is None:
            return
        head = self.head
        if head is not None and not follows(patch_id, prev, head):
            if prev is None:
                why = f"has no prev (a first patch) but {self.destination} is not empty: its head is <{head}>"
            else:
                why = f"has prev <{prev}> but the head of {self.destination} is <{head}> (a gap or a fork)"
            raise ChainError(
                f"{where + ': ' if where else ''}patch <{patch_id}> {why}; {self.refused} "
                f"(use {param('chain', 'ignore')} to append it anyway)"
            ).naming(("chain", "ignore"))
        self.head = patch_id
