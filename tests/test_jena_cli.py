"""Jena's RDF Thrift and RDF Protobuf through the command line: convert and dump.

Both directions are checked against N-Quads written by patchsync's own N-Quads writer
(labels kept, docs/design.md §1), on data with blank nodes, a named graph and RDF-star.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DATA = """\
<http://example.org/s> <http://example.org/p> "v"@en .
<http://example.org/s> <http://example.org/p> _:b1 <http://example.org/g> .
_:b1 <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
<< <http://example.org/s> <http://example.org/p> "v"@en >> <http://example.org/q> "x" .
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchsync", *args], cwd=cwd, capture_output=True, text=True)


def lines(path: Path) -> list[str]:
    return sorted(path.read_text().splitlines())


@pytest.mark.parametrize("suffix", [".rt", ".rpb"])
def test_convert_round_trip_keeps_every_statement(tmp_path: Path, suffix: str) -> None:
    (tmp_path / "in.nq").write_text(DATA)
    assert cli("convert", "in.nq", f"mid{suffix}", cwd=tmp_path).returncode == 0
    done = cli("convert", f"mid{suffix}", "out.nq", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert lines(tmp_path / "out.nq") == sorted(DATA.splitlines())


@pytest.mark.parametrize(("fmt", "suffix"), [("rdf-thrift", ".rt"), ("rdf-protobuf", ".rpb")])
def test_dump_writes_what_convert_reads_back(tmp_path: Path, fmt: str, suffix: str) -> None:
    (tmp_path / "log.rdfp").write_text(
        'TX .\nPA "ex" <http://example.org/> .\n'
        + "".join(f"A {line[:-2]} .\n" for line in DATA.splitlines())
        + "TC .\n"
    )
    target = "sqlite:///t.db"
    assert cli("apply", "--no-progress", "log.rdfp", "--target", target, cwd=tmp_path).returncode == 0
    by_suffix = cli("dump", "--target", target, "-o", f"d{suffix}", cwd=tmp_path)
    by_flag = cli("dump", "--target", target, "--format", fmt, "-o", "flag.bin", cwd=tmp_path)
    assert by_suffix.returncode == 0 and by_flag.returncode == 0, by_suffix.stderr + by_flag.stderr
    assert (tmp_path / f"d{suffix}").read_bytes() == (tmp_path / "flag.bin").read_bytes()
    assert cli("convert", f"d{suffix}", "back.nq", cwd=tmp_path).returncode == 0
    assert cli("dump", "--target", target, "-o", "direct.nq", cwd=tmp_path).returncode == 0
    assert lines(tmp_path / "back.nq") == lines(tmp_path / "direct.nq") == sorted(DATA.splitlines())


def test_a_truncated_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "in.nq").write_text(DATA)
    assert cli("convert", "in.nq", "mid.rt", cwd=tmp_path).returncode == 0
    data = (tmp_path / "mid.rt").read_bytes()
    (tmp_path / "cut.rt").write_bytes(data[: len(data) - 3])
    done = cli("convert", "cut.rt", "out.nq", cwd=tmp_path)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("patchsync: cut.rt, byte ") and "Traceback" not in done.stderr
    assert not (tmp_path / "out.nq").exists()
