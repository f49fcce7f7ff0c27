"""The tail daemon's log lines (``patchsync tail``): progress lines are rate-limited per
source, and the last one a limit held back is still printed when the run ends, so a run's
final state is always said (a ``--once`` run over a served log commits a page at a time)."""

from __future__ import annotations

import pytest

from patchsync.cli.tail import TailLog


def applied(source: str, patches: int) -> dict[str, object]:
    return {"source": source, "state": "live", "patches": patches}


def test_progress_lines_are_rate_limited_and_the_last_held_one_is_flushed(capsys: pytest.CaptureFixture[str]) -> None:
    log = TailLog(interval=3600.0)
    for n in (1, 2, 3):
        log("applied", applied("a", n))
    log("applied", applied("b", 7))
    log("resume", {"source": "a", "from_version": 1})  # not a progress line: never held
    shown = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[1] for line in shown] == [
        "event=applied source=a state=live patches=1",
        "event=applied source=b state=live patches=7",
        "event=resume source=a from_version=1",
    ]
    log.flush()
    flushed = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[1] for line in flushed] == ["event=applied source=a state=live patches=3"]
    log.flush()  # nothing held twice
    assert capsys.readouterr().err == ""


def test_a_line_shown_after_the_interval_drops_what_was_held(capsys: pytest.CaptureFixture[str]) -> None:
    log = TailLog(interval=0.0)
    log("applied", applied("a", 1))
    log("applied", applied("a", 2))
    log.flush()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "event=applied source=a state=live patches=1",
        "event=applied source=a state=live patches=2",
    ]
