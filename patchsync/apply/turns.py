"""Taking turns with the other appliers of a source (docs/guarantees.md, "Overlapping runs").

One applier applies a source to a target at a time: the first read of the source's
checkpoint takes the source's lock, which a SQL target holds until it closes, and a second
applier gets :class:`SourceBusy` (other targets let writers take turns per transaction, or
wait for their own lock). :func:`wait_for_turn` waits for the lock while the applier holding
it makes progress, and returns the checkpoint as that applier left it, so that what it
applied is not applied again.

The wait is bounded by progress, not by the clock: it ends once the other applier commits
nothing for ``wait`` seconds (a stalled or idle holder, such as a ``tail`` daemon waiting
for input), however long a holder at work takes. A loaded machine slows both alike.

A target another process holds whole (an Oxigraph store, one process at a time) cannot even
be opened: :func:`open_in_turn` waits for it to be let go, for ``wait`` seconds of the clock
(what the holder does is not to be seen from outside).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from patchsync.apply.target import Checkpoint, Target
from patchsync.errors import SourceBusy, TargetHeld, param

#: Seconds :func:`wait_for_turn` waits for an applier that commits nothing, by default.
DEFAULT_WAIT = 60.0
#: Seconds between two attempts to take the turn.
POLL = 0.2

_UNSEEN = object()
_T = TypeVar("_T")
_Held = TypeVar("_Held", SourceBusy, TargetHeld)


def wait_for_turn(
    target: Target,
    source: str,
    wait: float = DEFAULT_WAIT,
    *,
    waiting: Callable[[SourceBusy], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Checkpoint | None:
    """Take the turn to apply ``source`` to ``target``; the source's checkpoint then.

    While another applier holds the source, try again every :data:`POLL` seconds as long as
    it made progress in the last ``wait`` seconds; then raise its :class:`SourceBusy`,
    saying how long it made none (``wait=0``: at once). ``waiting`` is called once, when the
    first attempt finds the source held. ``clock`` and ``sleep`` measure and spend the time.
    """

    def given_up(busy: SourceBusy) -> SourceBusy:
        text = f"{busy}; it made no progress in {wait:g} s of waiting ({param('wait', wait)} to wait longer)"
        return SourceBusy(text, progress=busy.progress)

    return _in_turn(
        lambda: target.checkpoint(source), SourceBusy, wait, waiting, clock, sleep,
        progress=lambda busy: busy.progress, given_up=given_up,
    )  # fmt: skip


def open_in_turn(
    open_target: Callable[[], Target],
    wait: float = DEFAULT_WAIT,
    *,
    waiting: Callable[[TargetHeld], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Target:
    """``open_target()``, waiting while another process holds the whole target
    (:class:`TargetHeld`: an Oxigraph store opens in one process at a time).

    Tries again every :data:`POLL` seconds; raises the last :class:`TargetHeld` once the
    target was held for ``wait`` seconds (``wait=0``: at once). A store held whole shows no
    progress to another process, so this wait is bounded by the clock. ``waiting`` is called
    once, when the first attempt finds the target held.
    """

    def given_up(held: TargetHeld) -> TargetHeld:
        return TargetHeld(f"{held}; still held after {wait:g} s of waiting ({param('wait', wait)} to wait longer)")

    return _in_turn(open_target, TargetHeld, wait, waiting, clock, sleep, progress=None, given_up=given_up)


def _in_turn(
    attempt: Callable[[], _T],
    held: type[_Held],
    wait: float,
    waiting: Callable[[_Held], None] | None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    progress: Callable[[_Held], object] | None,
    given_up: Callable[[_Held], _Held],
) -> _T:
    """``attempt()``, tried again every :data:`POLL` seconds while it raises ``held``, until
    ``wait`` seconds passed without progress (a new ``progress(error)``; ``None``: none can be
    seen, so the clock since the start bounds the wait); then ``given_up(error)`` is raised."""
    seen: object = _UNSEEN
    since = clock()
    told = False
    while True:
        try:
            return attempt()
        except held as exc:
            now = clock()
            if progress is not None and (mark := progress(exc)) != seen:
                seen, since = mark, now
            if now - since >= wait:
                if not wait:
                    raise
                raise given_up(exc).naming(("wait", wait)) from None
            if not told and waiting is not None:
                waiting(exc)
                told = True
        sleep(POLL)


__all__ = ["DEFAULT_WAIT", "POLL", "open_in_turn", "wait_for_turn"]
