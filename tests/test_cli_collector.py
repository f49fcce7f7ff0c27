"""The command line paces the garbage collector while a command runs, and restores it after."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from patchsync.apply import apply_file, open_target
from patchsync.cli.common import COMMAND_GC_THRESHOLD, paced_collector
from patchsync.cli.main import main
from patchsync.events import Add, Event, TxCommit, TxStart
from patchsync.terms.ntriples import NTriplesTerms

from .helpers import write_log


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever the test process had
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*before)


def young_passes(run: Callable[[], object]) -> int:
    """Collections of the youngest generation while ``run()`` runs."""
    count = 0

    def callback(phase: str, info: dict[str, int]) -> None:
        nonlocal count
        if phase == "start" and info["generation"] == 0:
            count += 1

    gc.callbacks.append(callback)
    try:
        run()
    finally:
        gc.callbacks.remove(callback)
    return count


def one_transaction(rows: int) -> list[Event]:
    """A transaction adding ``rows`` statements."""
    adds = [Add(f"<http://example.org/s{i}>", "<http://example.org/p>", f'"v{i}"', None) for i in range(rows)]
    return [TxStart(), *adds, TxCommit()]


def test_paced_collector_raises_the_first_threshold_and_restores_it(default_thresholds: tuple[int, int, int]) -> None:
    with paced_collector():
        assert gc.get_threshold() == (COMMAND_GC_THRESHOLD, 10, 10)
    assert gc.get_threshold() == default_thresholds
    with pytest.raises(RuntimeError), paced_collector():
        raise RuntimeError("a command failed")
    assert gc.get_threshold() == default_thresholds


def test_paced_collector_never_lowers_a_higher_threshold(default_thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(COMMAND_GC_THRESHOLD * 2, 5, 5)
    with paced_collector():
        assert gc.get_threshold() == (COMMAND_GC_THRESHOLD * 2, 5, 5)
    assert gc.get_threshold() == (COMMAND_GC_THRESHOLD * 2, 5, 5)


def test_apply_command_collects_less_often_than_the_library_at_defaults(
    tmp_path: Path, default_thresholds: tuple[int, int, int]
) -> None:
    log = tmp_path / "rows.rdfp"
    write_log(log, one_transaction(40_000), adapter=NTriplesTerms())

    def library() -> None:
        target = open_target(f"sqlite:///{tmp_path / 'lib.db'}")
        try:
            apply_file(log, target)
        finally:
            target.close()

    codes: list[int] = []
    cli = young_passes(lambda: codes.append(main(["apply", str(log), "--target", f"sqlite:///{tmp_path / 'cli.db'}"])))
    at_defaults = young_passes(library)
    assert codes == [0]
    assert gc.get_threshold() == default_thresholds
    # Same rows, same target: the command runs far fewer passes (the thresholds differ 28-fold;
    # importing the command modules on the first run costs it a few).
    assert at_defaults >= 20, at_defaults
    assert cli * 5 <= at_defaults, (cli, at_defaults)
