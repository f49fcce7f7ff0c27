"""``patchsync convert --messages`` and ``patchsync inspect`` on RDF Message Logs, run for real.

Rules cited from the RDF Messages draft, https://w3c-cg.github.io/rsp/spec/messages, by section.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchsync.logs.messages import MessageReader

DATA = Path(__file__).parent / "data" / "messages"


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patchsync", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def messages(path: Path) -> list[list[tuple[str, str, str, str | None]]]:
    fmt = path.suffix.lstrip(".")
    return [sorted(m, key=str) for m in MessageReader(path.read_bytes(), fmt, source=str(path))]


def test_convert_keeps_message_boundaries_through_a_chain_of_formats(tmp_path: Path) -> None:
    """§3.1: messages written to a log come back in the same order; the chain goes through every
    format (text formats with --messages; .ndjsonld and .yamlld are always message logs)."""
    source = tmp_path / "log.ttl"
    source.write_bytes((DATA / "draft-log.ttl").read_bytes())
    chain = ["log.nq", "log.jelly", "log.ndjsonld", "log.yamlld", "log.trig", "log.nt", "back.ttl"]
    previous = source
    for name in chain:
        done = run("convert", previous, name, "--messages", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        previous = tmp_path / name
    assert messages(previous) == messages(source)
    assert [len(m) for m in messages(previous)] == [2, 3, 0, 3]


def test_text_formats_need_messages_and_json_lines_do_not(tmp_path: Path) -> None:
    """§2.1: message mode is something the reader is told ("When the content-type flagged the
    support for messages"); without --messages a text file is one dataset, one message."""
    (tmp_path / "log.nq").write_text("<a:s> <a:p> _:x .\n# @message\n<a:s> <a:p> _:x .\n")
    assert run("convert", "log.nq", "one.ndjsonld", cwd=tmp_path).returncode == 0
    assert len(messages(tmp_path / "one.ndjsonld")) == 1
    assert run("convert", "log.nq", "two.ndjsonld", "--messages", cwd=tmp_path).returncode == 0
    assert [len(m) for m in messages(tmp_path / "two.ndjsonld")] == [1, 1]
    # Back to a plain file: the messages merge, their blank nodes kept apart (§1.4 note).
    assert run("convert", "two.ndjsonld", "plain.nq", cwd=tmp_path).returncode == 0
    assert len(set((tmp_path / "plain.nq").read_text().split())) == 5  # <a:s> <a:p> . and two nodes


def test_inspect_reports_messages_and_their_sizes(tmp_path: Path) -> None:
    """§1.4: the draft's example log, four messages of 2, 3, 0 and 3 statements."""
    done = run("inspect", DATA / "draft-log.ttl", "--messages", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["messages"], summary["statements"], summary["empty_messages"]) == (4, 8, 1)
    assert summary["message_size"] == {"min": 0, "median": 2.5, "max": 3}
    done = run("inspect", DATA / "draft-products.yamlld", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "messages:     2 (0 empty)" in done.stdout
    assert "message size: min 3, median 3.0, max 3 statements" in done.stdout


BAD = {
    "bad.nt": ("<a:s> <a:p> <a:o> .\n# @message\n<a:s> <a:p> .\n", "message 2, line 3"),
    "bad.nq": ("# @message\n<a:s> <a:p> <a:o> .\n# @message\n# @message\n<a:s> <a:p> <a:o> <a:g> <a:h> .\n", "message 3, line 5"),
    "bad.ttl": ("@prefix ex: <http://e/> .\n# @message\nex:a ex:b ex:c .\n# @message\nex:a ex:b .\n", "message 2, line 5"),
    "bad.trig": ("<a:g> { <a:s> <a:p> <a:o> }\n# @message\n<a:g> { <a:s> <a:p> }\n", "message 2, line 3"),
    "bad.ndjsonld": ('{"@id": "a:s"}\n{"@id": "a:s"}\n{"@id": \n', "message 3, line 3"),
    "bad.yamlld": ('"@id": a:s\n---\n"@id": [a:s\n', "message 2, line 4"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_malformed_message_is_one_line_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    """§2.1 message mode: the error names file, message number and line; exit non-zero, no
    traceback, and the output is not written (the input is validated first)."""
    text, where = BAD[name]
    (tmp_path / name).write_text(text)
    done = run("convert", name, "out.jelly", "--messages", cwd=tmp_path)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"patchsync: {name}, {where}: "), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out.jelly").exists() and list(tmp_path.iterdir()) == [tmp_path / name]
    done = run("inspect", name, "--messages", cwd=tmp_path)
    assert done.returncode != 0 and done.stderr.strip().splitlines() == lines


def test_messages_with_a_format_that_has_none_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "log.nq").write_text("<a:s> <a:p> <a:o> .\n")
    done = run("convert", "log.nq", "out.rt", "--messages", cwd=tmp_path)
    assert done.returncode == 2 and "cannot hold an RDF Message Log" in done.stderr
    assert "Traceback" not in done.stderr


def test_input_built_to_exhaust_the_parser_is_one_line(tmp_path: Path) -> None:
    """§2.2: a line nested past Python's recursion limit is refused like any malformed message."""
    (tmp_path / "deep.ndjsonld").write_text('{"@id": "a:s"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    done = run("convert", "deep.ndjsonld", "out.nq", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "patchsync: deep.ndjsonld, message 2, line 2: nested too deeply"
