"""The library raises only patchsync errors (docs/library.md, "Errors"): every entry point of the public API
given a path that names nothing, a directory instead of a file, a file that cannot be read, or
a target or log address it cannot use raises a :class:`PatchsyncError` naming what is wrong,
never an ``OSError`` or ``ValueError`` of the file system or a driver."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from rdflib import Dataset

import patchsync
from patchsync import (
    LogAppender,
    LogWriter,
    MemoryTarget,
    PatchsyncError,
    Recorder,
    apply_file,
    open_target,
    read_events,
    record,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "library.rdfp"


def _apply_example(spec: str) -> None:
    target = open_target(spec)
    try:
        apply_file(EXAMPLE, target)
    finally:
        target.close()


#: Each entry point, the suffix of the path it is given, and the bad inputs it can be given.
#: A directory is a valid log of segments for the writers, and a valid Oxigraph store.
ENTRY_POINTS: dict[str, tuple[str, Callable[[Path], object], set[str]]] = {
    "apply_file .jellyp": (".jellyp", lambda p: apply_file(p, MemoryTarget()), {"missing", "directory", "unreadable"}),
    "apply_file .rdfp": (".rdfp", lambda p: apply_file(p, MemoryTarget()), {"missing", "directory", "unreadable"}),
    "apply_file, snapshots": (
        ".jellyp",
        lambda p: apply_file(p, MemoryTarget(), snapshot_dir=p.parent / "snapshots"),
        {"missing", "directory", "unreadable"},
    ),
    "read_events .jellyp": (".jellyp", lambda p: list(read_events(p)), {"missing", "directory", "unreadable"}),
    "read_events .rdfp": (".rdfp", lambda p: list(read_events(p)), {"missing", "directory", "unreadable"}),
    "LogAppender": (".jellyp", lambda p: LogAppender(p).close(), {"missing", "directory", "unreadable"}),
    "LogWriter .jellyp": (".jellyp", lambda p: LogWriter(p).close(), {"missing", "unreadable"}),
    "LogWriter .rdfp": (".rdfp", lambda p: LogWriter(p).close(), {"missing", "unreadable"}),
    "LogWriter, segments": ("", lambda p: LogWriter(p, max_segment_patches=2).close(), {"missing"}),
    "Recorder": (".jellyp", lambda p: Recorder(Dataset(), p).close(), {"missing", "unreadable"}),
    "record": (".rdfp", lambda p: record(Dataset(), p).close(), {"missing", "unreadable"}),
    "open_target file:": (".nq", lambda p: _apply_example(f"file:{p}"), {"missing", "directory", "unreadable"}),
    "open_target sqlite:": (".db", lambda p: _apply_example(f"sqlite:///{p}"), {"missing", "directory", "unreadable"}),
    "open_target oxigraph:": ("", lambda p: _apply_example(f"oxigraph:{p}"), {"unreadable"}),
}


def _bad_path(tmp_path: Path, kind: str, suffix: str) -> Path:
    if kind == "missing":
        # A file in a directory that does not exist (in /proc, where none can be created).
        return Path("/proc/no-such-directory") / f"x{suffix}"
    path = tmp_path / f"bad{suffix}"
    if kind == "directory":
        path.mkdir()
    else:
        # Opens, but every read fails (EIO): the memory of the reading process at address 0.
        path.symlink_to("/proc/self/mem")
    return path


CASES = [(name, kind) for name, (_, _, kinds) in ENTRY_POINTS.items() for kind in sorted(kinds)]


@pytest.mark.parametrize(("entry", "kind"), CASES, ids=[f"{e}-{k}" for e, k in CASES])
def test_a_bad_path_raises_a_patchsync_error_naming_it(tmp_path: Path, entry: str, kind: str) -> None:
    suffix, call, _ = ENTRY_POINTS[entry]
    path = _bad_path(tmp_path, kind, suffix)
    with pytest.raises(PatchsyncError) as raised:
        call(path)
    assert path.name in str(raised.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_file_without_read_permission_raises_a_patchsync_error(tmp_path: Path) -> None:
    for suffix, call in ((".jellyp", lambda p: list(read_events(p))), (".rdfp", lambda p: LogWriter(p).close())):
        path = tmp_path / f"locked{suffix}"
        path.write_bytes(b"")
        path.chmod(0)
        with pytest.raises(PatchsyncError, match="Permission denied"):
            call(path)


BAD_TARGETS = [
    "",
    "nope:x",
    "memory:x",
    "file:x.unknown",
    "oxigraph:",
    "sqlite:///x.db?timeout=abc",
    "postgresql://127.0.0.1:abc/x",
    "postgresql://127.0.0.1:1/x",
]


@pytest.mark.parametrize("spec", BAD_TARGETS)
def test_a_bad_target_address_raises_a_patchsync_error(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PatchsyncError):
        _apply_example(spec)


@pytest.mark.parametrize("address", ["nats://", "grpc://", "http://", "grpc://127.0.0.1:1/x", "nats://127.0.0.1:1/x"])
def test_a_bad_log_address_raises_a_patchsync_error(address: str) -> None:
    with pytest.raises(PatchsyncError):
        Recorder(Dataset(), address).close()


def test_dir_shows_the_public_api_only() -> None:
    assert set(dir(patchsync)) == set(patchsync.__all__)
