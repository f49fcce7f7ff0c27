"""Appending to patch logs on disk (docs/design.md §6): lock, options, chain head, crash leftovers."""

from __future__ import annotations

from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from patchsync import Add, DecodeError, Header, PatchEnd, PatchOptions, StatementType, TxCommit, TxStart, UsageError
from patchsync.logs.patch_logs import LogAppender, read_events

from .helpers import patches

OPTS = PatchOptions(statement_type=StatementType.TRIPLES, max_name_table_size=8)


def patch(n: int, prev: int | None = None) -> list[object]:
    rows: list[object] = [Header("id", URIRef(f"uuid:{n}"))]
    if prev is not None:
        rows.append(Header("prev", URIRef(f"uuid:{prev}")))
    rows += [
        TxStart(),
        *(Add(URIRef(f"http://x/s{n}-{i}"), URIRef("http://x/p"), Literal(i)) for i in range(10)),
        TxCommit(),
    ]
    return rows


def test_append_creates_then_continues_a_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    with LogAppender(log, OPTS) as out:
        assert out.head is None
        out.write([*patch(1), PatchEnd()])
    with LogAppender(log, OPTS) as out:
        assert out.head == "uuid:1"  # the chain continues from the log's head
        out.write([*patch(2, 1), PatchEnd(), *patch(3, 2), PatchEnd()])
    with LogAppender(log) as out:  # options are read from the log when not given
        assert out.options == OPTS and out.head == "uuid:3"
    assert patches(read_events(log)) == [patch(1), patch(2, 1), patch(3, 2)]


def test_second_writer_is_refused_while_the_lock_is_held(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    with LogAppender(log, OPTS), pytest.raises(UsageError, match="another writer holds"):
        LogAppender(log, OPTS)


def test_appending_with_other_options_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    with LogAppender(log, OPTS) as out:
        out.write([*patch(1), PatchEnd()])
    with pytest.raises(UsageError, match="different options"):
        LogAppender(log, PatchOptions())


def test_partial_frame_left_by_a_crashed_writer_is_cut_before_appending(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    with LogAppender(log, OPTS) as out:
        out.write([*patch(1), PatchEnd()])
    whole = log.read_bytes()
    with open(log, "ab") as f:
        f.write(b"\x40\x0a\x05")  # a length prefix and a few bytes of a frame that never finished
    with LogAppender(log, OPTS) as out:
        out.write([*patch(2, 1), PatchEnd()])
    assert log.read_bytes().startswith(whole)
    assert patches(read_events(log)) == [patch(1), patch(2, 1)]


def test_log_ending_inside_a_transaction_is_not_appended_to(tmp_path: Path) -> None:
    log = tmp_path / "log.jellyp"
    out = LogAppender(log, OPTS)
    out.write([TxStart(), Add(URIRef("http://x/s"), URIRef("http://x/p"), Literal(1))])
    out.encoder._flush_frame()  # simulate a frame flushed by size inside the transaction
    out.flush()
    out._file.close()
    with pytest.raises(DecodeError, match="ends inside a transaction"):
        LogAppender(log, OPTS)
