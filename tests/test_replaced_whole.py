"""``replaced_whole``: the one way an output file is written (snapshot, compact, the command
line's ``-o``, snapshots fetched from a server): whole or not at all, named as the user gave it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from patchsync.logs.files import replaced_whole


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_the_new_content_replaces_the_file_only_at_the_end(tmp_path: Path) -> None:
    out = tmp_path / "x.jellyp"
    out.write_bytes(b"old")
    with replaced_whole(out) as f:
        f.write(b"new")
        assert out.read_bytes() == b"old"  # readers see the old file until the end
    assert out.read_bytes() == b"new"
    assert _leftovers(tmp_path) == []


def test_a_failing_block_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "x.jellyp"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError), replaced_whole(out) as f:
        f.write(b"half")
        raise RuntimeError("stop")
    assert out.read_bytes() == b"old"
    assert _leftovers(tmp_path) == []


def test_a_missing_directory_is_the_outputs_error(tmp_path: Path) -> None:
    out = tmp_path / "nodir" / "x.jelly"
    with pytest.raises(OSError) as info, replaced_whole(out):
        pass
    assert info.value.filename == str(out) and "cannot write" in str(info.value)


def test_an_error_naming_another_file_is_left_as_it_is(tmp_path: Path) -> None:
    # An input the block reads is not the output: its error must not be reworded.
    missing = tmp_path / "input.jellyp"
    with pytest.raises(FileNotFoundError) as info, replaced_whole(tmp_path / "out") as f:
        f.write(missing.read_bytes())
    assert info.value.filename == str(missing)
    assert not (tmp_path / "out").exists() and _leftovers(tmp_path) == []


def test_the_mode_is_the_replaced_files_or_the_umasks(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_bytes(b"")
    kept.chmod(0o640)
    with replaced_whole(kept) as f:
        f.write(b"x")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o640
    mask = os.umask(0o027)
    try:
        with replaced_whole(tmp_path / "new") as f:
            f.write(b"x")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640
