"""Hostile inputs through the real CLI (issue #8, item 2).

Each case runs ``patchsync apply`` / ``inspect`` / ``convert`` / ``dump`` as a subprocess and
checks the user's contract: a bad input gets one clear line (file, byte offset, rule), a
non-zero exit and no traceback, and nothing of it is half-applied (the complete units
before it are applied, docs/design.md §2); a legal input is stored and dumps back identical.

Memory limits (docs/design.md §1, ``patchsync.options.Limits``), measured as the peak RSS of the
child process (``os.wait4``):

* an input rejected for a size limit (length prefix, lookup sizes, a 100 MB literal, a
  header flood) costs the interpreter's baseline (~40-60 MB) plus one 1 MiB read chunk and
  one frame or line under the 16 MiB limit, as protobuf parses it: ``REJECT_RSS_MB``. A
  frame is parsed whole, and protobuf's parse of tiny rows is the worst case (about 35
  bytes of memory per byte of frame for 4-byte rows, ~600 MB for a 16 MiB frame of them);
  lowering ``Limits.max_frame_bytes`` lowers it in proportion;
* the largest legal literal (just under the 16 MiB frame limit) applied into SQLite and
  dumped back: ``LEGAL_RSS_MB``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from patchsync._proto import patch_pb2, rdf_pb2
from patchsync.apply.api import open_target
from patchsync.codec.framing import encode_varint
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder
from patchsync.codec.rdfp import RdfPatchTextReader, read_rdfp
from patchsync.errors import DecodeError
from patchsync.events import Add, Event, Header, PatchEnd, PrefixAdd, TxCommit, TxStart
from patchsync.options import Limits, PatchOptions, StreamType
from patchsync.terms.ntriples import NTriplesTerms, scan_term

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024
LIMITS = Limits()
FRAME_LIMIT = LIMITS.max_frame_bytes  # 16 MiB
REJECT_RSS_MB = 300
LEGAL_RSS_MB = 400
NT = NTriplesTerms()

# -- running the CLI -------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: bytes
    err: str
    rss_mb: float
    seconds: float


# A small parent for the CLI process: it reports the child's peak RSS. The test process
# itself cannot measure it, since a child's ru_maxrss starts from the high-water mark of
# the address space it was forked (or vforked) from, here pytest's hundreds of MB.
_MEASURE = """
import os, sys
pid = os.posix_spawn(sys.executable, [sys.executable, "-m", "patchsync", *sys.argv[2:]], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


def cli(*args: str, timeout: float = 120) -> Run:
    """Run ``patchsync ARGS``; its exit code, output and peak RSS (``ru_maxrss``, KiB on Linux)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        rss_file = Path(tmp, "rss")
        proc = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(rss_file), *args],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
        rss_kib = int(rss_file.read_text())
    return Run(
        proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"), rss_kib / 1024, time.monotonic() - started
    )


def assert_clean_error(run: Run, *needles: str) -> None:
    """One ``patchsync: ...`` line naming what ``needles`` name, non-zero exit, no traceback."""
    assert run.code != 0, run
    assert "Traceback" not in run.err, run.err
    lines = run.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("patchsync: "), run.err
    print(f"rss {run.rss_mb:.0f} MB, {run.seconds:.1f} s: {lines[0][:160]}")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def dump(target: str) -> list[str]:
    run = cli("dump", "--target", target)
    assert run.code == 0, run.err
    return sorted(run.out.decode("utf-8").splitlines())


# -- building hostile Jelly-Patch bytes ------------------------------------------------


def ld(field: int, payload: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(payload)) + payload


def frame(*rows: bytes) -> bytes:
    """A delimited frame of already serialized ``RdfPatchRow`` bodies."""
    body = b"".join(ld(1, row) for row in rows)
    return encode_varint(len(body)) + body


def row(**fields: Any) -> bytes:
    return bytes(patch_pb2.RdfPatchRow(**fields).SerializeToString())


def encode(events: Sequence[Event], options: PatchOptions | None = None) -> bytes:
    encoder = PatchEncoder(options or PatchOptions(), NT)
    for event in events:
        encoder.send(event)
    encoder.finish()
    return encoder.take()


def after_good(events: Sequence[Event]) -> bytes:
    """GOOD's patch, then ``events`` in the same stream (their frame starts at ``len(GOOD)``)."""
    data = encode([*GOOD_EVENTS, *events])
    assert data.startswith(GOOD)
    return data


GOOD_QUAD = ("<http://ex/good>", "<http://ex/p>", '"1"', "")
GOOD_LINE = '<http://ex/good> <http://ex/p> "1" .'
# One committed patch; hostile frames are appended after it (default options: QUADS,
# PUNCTUATED, 4000 names, 150 prefixes, 32 datatypes).
GOOD_EVENTS: list[Event] = [TxStart(0, 0, 0), Add(*GOOD_QUAD, 0, 0, 0), TxCommit(0, 0, 0), PatchEnd(0, 0, 0)]
GOOD = encode(GOOD_EVENTS)
GOOD_TEXT = f"TX .\nA {GOOD_LINE}\nTC .\nZ .\n"

IRI_ROW = rdf_pb2.RdfIri(prefix_id=0, name_id=1)
NAME_ROW = row(name=rdf_pb2.RdfNameEntry(id=1, value="http://ex/n"))
PUNCT = row(punctuation=patch_pb2.RdfPatchPunctuation())


def options_row(**overrides: Any) -> bytes:
    fields: dict[str, Any] = dict(
        statement_type=2,
        stream_type=3,
        max_name_table_size=4000,
        max_prefix_table_size=150,
        max_datatype_table_size=32,
        version=1,
    )
    fields.update(overrides)
    return row(options=patch_pb2.RdfPatchOptions(**fields))


# -- 1. huge length prefixes -------------------------------------------------------------


@pytest.mark.parametrize("command", ["apply", "inspect", "convert"])
def test_length_prefix_near_2_63_is_refused_before_allocating(command: str, tmp_path: Path) -> None:
    log = tmp_path / "huge.jellyp"
    log.write_bytes(GOOD + encode_varint((1 << 63) - 1) + b"\x0a\x02\x32\x00")
    target = f"sqlite:///{tmp_path / 'state.db'}"
    args = {"apply": ["apply", str(log), "--target", target], "inspect": ["inspect", str(log)]}
    run = cli(*args.get(command, ["convert", str(log), str(tmp_path / "out.rdfp")]))
    assert_clean_error(run, str(log), f"byte {len(GOOD)}", f"exceeds the limit of {FRAME_LIMIT} bytes")
    assert run.rss_mb < REJECT_RSS_MB
    if command == "apply":
        assert dump(target) == [GOOD_LINE]  # the complete patch before it, nothing else
    if command == "convert":
        assert not (tmp_path / "out.rdfp").exists()


def test_overlong_varint_and_jelly_length_prefix(tmp_path: Path) -> None:
    log = tmp_path / "overlong.jellyp"
    log.write_bytes(GOOD + b"\xff" * 11)
    assert_clean_error(cli("inspect", str(log)), str(log), f"byte {len(GOOD)}", "varint longer than 10 bytes")
    rdf = tmp_path / "huge.jelly"
    rdf.write_bytes(encode_varint((1 << 63) - 1) + b"\x0a")
    run = cli("convert", str(rdf), str(tmp_path / "out.nq"))
    assert_clean_error(run, str(rdf), "byte 0", "exceeds the limit")


# -- 2. huge lookup sizes ----------------------------------------------------------------


@pytest.mark.parametrize("field", ["max_name_table_size", "max_prefix_table_size", "max_datatype_table_size"])
def test_huge_lookup_table_sizes_are_refused(field: str, tmp_path: Path) -> None:
    log = tmp_path / "tables.jellyp"
    log.write_bytes(frame(options_row(**{field: 2**32 - 1}), PUNCT))
    run = cli("inspect", str(log))
    assert_clean_error(run, str(log), "byte 0", f"{field} 4294967295 exceeds this reader's limit")
    assert run.rss_mb < REJECT_RSS_MB
    rdf = tmp_path / "tables.jelly"
    opts = rdf_pb2.RdfStreamOptions(physical_type=1, max_name_table_size=8, version=1)
    setattr(opts, field, 2**32 - 1)
    body = ld(1, ld(1, opts.SerializeToString()))
    rdf.write_bytes(encode_varint(len(body)) + body)
    assert_clean_error(cli("convert", str(rdf), str(tmp_path / "out.nq")), str(rdf), "lookup size too large")


# -- 3. deep RDF-star nesting ------------------------------------------------------------


def nested_statement(depth: int) -> bytes:
    """An ``RdfQuad`` whose subject is ``depth`` quoted triples deep (hand-encoded: protobuf's
    own encoder refuses depths past its recursion limit)."""
    iri = bytes(IRI_ROW.SerializeToString())
    inner = ld(1, iri) + ld(5, iri) + ld(9, iri)
    for _ in range(depth):
        inner = ld(4, inner) + ld(5, iri) + ld(9, iri)
    return inner + ld(15, b"")  # default graph


@pytest.mark.parametrize(("depth", "rule"), [(65, "nested deeper than the limit of 64"), (10_000, "depth limit")])
def test_deep_quoted_triples_in_jelly_patch(depth: int, rule: str, tmp_path: Path) -> None:
    log = tmp_path / "deep.jellyp"
    star = options_row(rdf_star=True)
    log.write_bytes(frame(star, NAME_ROW, ld(2, nested_statement(depth)), PUNCT))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert_clean_error(cli("apply", str(log), "--target", target), str(log), "byte 0", rule)
    assert dump(target) == []


def test_deep_quoted_triples_in_text_and_jelly_rdf(tmp_path: Path) -> None:
    deep = "<< " * 10_000 + "<http://ex/s> <http://ex/p> <http://ex/o>" + " >> <http://ex/p> <http://ex/o>" * 10_000
    log = tmp_path / "deep.rdfp"
    log.write_text(GOOD_TEXT + f"A {deep} .\n")
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert_clean_error(cli("apply", str(log), "--target", target), str(log), "line 5", "nest")
    assert dump(target) == [GOOD_LINE]
    rdf = tmp_path / "deep.jelly"
    opts = rdf_pb2.RdfStreamOptions(physical_type=1, max_name_table_size=8, version=1, rdf_star=True)
    name = rdf_pb2.RdfStreamRow(name=rdf_pb2.RdfNameEntry(id=1, value="http://ex/n")).SerializeToString()
    body = ld(1, ld(1, opts.SerializeToString())) + ld(1, name) + ld(1, ld(2, nested_statement(10_000)[:-2]))
    rdf.write_bytes(encode_varint(len(body)) + body)
    assert_clean_error(cli("convert", str(rdf), str(tmp_path / "out.nq")), str(rdf), "depth limit")


def test_quoted_triples_at_the_nesting_limit_are_stored_and_dumped_back(tmp_path: Path) -> None:
    term = "<http://ex/s> <http://ex/p> <http://ex/o>"
    for _ in range(LIMITS.max_nesting):
        term = f"<< {term} >> <http://ex/p> <http://ex/o>"
    log = tmp_path / "deep64.rdfp"
    log.write_text(f"A {term} .\n")
    target = f"sqlite:///{tmp_path / 'state.db'}"
    run = cli("apply", str(log), "--target", target)
    assert run.code == 0, run.err
    assert dump(target) == [f"{term} ."]


# -- 4. header floods ----------------------------------------------------------------------


def test_a_million_header_rows_are_refused_at_the_limit(tmp_path: Path) -> None:
    log = tmp_path / "headers.rdfp"
    with log.open("w") as f:
        f.write(GOOD_TEXT)
        f.writelines(f'H k{i} "v" .\n' for i in range(1_000_000))
        f.write(f"A {GOOD_LINE.replace('good', 'never')}\n")
    target = f"sqlite:///{tmp_path / 'state.db'}"
    run = cli("apply", str(log), "--target", target)
    line = 4 + LIMITS.max_headers + 1
    assert_clean_error(run, str(log), f"line {line}", f"more than {LIMITS.max_headers} H rows in one patch")
    assert run.rss_mb < REJECT_RSS_MB and run.seconds < 20
    assert dump(target) == [GOOD_LINE]

    binary = tmp_path / "headers.jellyp"
    header = row(header=patch_pb2.RdfPatchHeader(key="k", h_bnode="b"))
    binary.write_bytes(GOOD + frame(*[header] * 1_000_000))
    run = cli("apply", str(binary), "--target", target)
    assert_clean_error(run, str(binary), f"byte {len(GOOD)}", f"row {LIMITS.max_headers}", "header rows")
    assert run.rss_mb < REJECT_RSS_MB


def test_header_rows_up_to_the_limit_are_kept(tmp_path: Path) -> None:
    events: list[Event] = [Header(f"k{i}", NT.literal(f"v{i}"), 0, 0, 0) for i in range(LIMITS.max_headers)]
    log = tmp_path / "many.jellyp"
    log.write_bytes(encode([*events, Add(*GOOD_QUAD, 0, 0, 0), PatchEnd(0, 0, 0)]))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert cli("apply", str(log), "--target", target).code == 0
    with open_target(target) as t:
        (record,) = t.history()
    assert len(record.headers) == LIMITS.max_headers and record.headers[-1] == ("k1023", '"v1023"')


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_a_very_long_header_value_is_refused(fmt: str, tmp_path: Path) -> None:
    value = "x" * MiB
    log = tmp_path / f"long.{fmt}"
    if fmt == "rdfp":
        log.write_text(GOOD_TEXT + f'H note "{value}" .\n')
        where = "line 5"
    else:
        log.write_bytes(after_good([Header("note", NT.literal(value), 0, 0, 0), PatchEnd(0, 0, 0)]))
        where = f"byte {len(GOOD)}"
    target = f"sqlite:///{tmp_path / 'state.db'}"
    run = cli("apply", str(log), "--target", target)
    assert_clean_error(run, str(log), where, f"exceeds this reader's limit of {LIMITS.max_header_bytes} bytes")
    assert dump(target) == [GOOD_LINE]


# -- 5. repeated transactions --------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_tx_tx_tx_is_refused_and_applies_nothing_of_its_patch(fmt: str, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'state.db'}"
    log = tmp_path / f"txtx.{fmt}"
    if fmt == "rdfp":
        # The A row is inside the first TX, so the second TX leaves it uncommitted.
        log.write_text(GOOD_TEXT + f"TX .\nA {GOOD_LINE.replace('good', 'lost')}\n" + "TX .\n" * 100_000)
        where = "line 7"
    else:
        start = row(transaction_start=patch_pb2.RdfPatchTransactionStart())
        log.write_bytes(GOOD + frame(*[start] * 100_000))
        where = f"byte {len(GOOD)}, frame 1, row 1"
    run = cli("apply", str(log), "--target", target)
    assert_clean_error(run, str(log), where, "TX while")
    assert dump(target) == [GOOD_LINE]


def test_a_hundred_thousand_transactions_apply_one_unit_each(tmp_path: Path) -> None:
    log = tmp_path / "many-tx.rdfp"
    with log.open("w") as f:
        for i in range(100_000):
            f.write(f'TX .\nA <http://ex/s> <http://ex/p> "{i}" .\nTC .\n' if i % 1000 == 0 else "TX .\nTC .\n")
    run = cli("apply", "--no-progress", str(log), "--target", "memory:")
    assert run.code == 0, run.err
    assert "100000 units (100 added, 0 deleted" in run.out.decode()
    # Into SQLite too (fewer: each unit is its own savepoint there, ~3,000 units/s), dumped back.
    small = tmp_path / "tx.rdfp"
    small.write_text("".join(f'TX .\nA <http://ex/s> <http://ex/p> "{i}" .\nTC .\n' for i in range(2_000)))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert cli("apply", "--no-progress", str(small), "--target", target).code == 0
    assert dump(target) == sorted(f'<http://ex/s> <http://ex/p> "{i}" .' for i in range(2_000))


# -- 6. a 100 MB literal -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_a_100_mb_literal_is_over_the_frame_limit(fmt: str, tmp_path: Path) -> None:
    # docs/design.md §1: a frame (a line of text) is at most 16 MiB, so a 100 MB literal is refused
    # with the limit named, as soon as the limit is passed: not after reading 100 MB.
    log = tmp_path / f"big.{fmt}"
    lex = "x" * (100 * 1000 * 1000)
    if fmt == "rdfp":
        log.write_text(GOOD_TEXT + f'A <http://ex/s> <http://ex/p> "{lex}" .\n')
        rule, where = f"line longer than the limit of {FRAME_LIMIT} bytes", "line 5"
    else:
        log.write_bytes(
            after_good([Add("<http://ex/s>", "<http://ex/p>", NT.literal(lex), "", 0, 0, 0), PatchEnd(0, 0, 0)])
        )
        rule, where = f"exceeds the limit of {FRAME_LIMIT} bytes", f"byte {len(GOOD)}"
    del lex
    target = f"sqlite:///{tmp_path / 'state.db'}"
    for args in (["apply", str(log), "--target", target], ["inspect", str(log)]):
        run = cli(*args)
        assert_clean_error(run, str(log), where, rule)
        assert run.rss_mb < REJECT_RSS_MB and run.seconds < 20, run
    assert dump(target) == [GOOD_LINE]


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_the_largest_legal_literal_is_stored_and_dumped_back(fmt: str, tmp_path: Path) -> None:
    lex = "\u00e9'x\\" * ((FRAME_LIMIT - 4096) // 20)  # just under the limit once escaped / framed
    quad = ("<http://ex/s>", "<http://ex/p>", NT.literal(lex), "")
    log = tmp_path / f"legal.{fmt}"
    if fmt == "rdfp":
        log.write_text(f"A {quad[0]} {quad[1]} {quad[2]} .\n")
    else:
        log.write_bytes(encode([Add(*quad, 0, 0, 0), PatchEnd(0, 0, 0)]))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    run = cli("apply", str(log), "--target", target)
    assert run.code == 0, run.err
    assert run.rss_mb < LEGAL_RSS_MB and run.seconds < 20, run
    assert dump(target) == [f"{quad[0]} {quad[1]} {quad[2]} ."]


# -- 7. invalid UTF-8 --------------------------------------------------------------------

BAD = b"\xff\xfe\xc3\x28\x80\xbf\xed"  # same length as the placeholder it replaces
MARK = "@@BAD@@"


def with_invalid_utf8(data: bytes) -> bytes:
    assert data.count(MARK.encode()) == 1
    return data.replace(MARK.encode(), BAD)


LIT = rdf_pb2.RdfLiteral
# Every string field of a Jelly-Patch stream, each as a frame after GOOD's.
UTF8_ROWS = {
    "name entry": [row(name=rdf_pb2.RdfNameEntry(id=1, value=MARK))],
    "prefix entry": [row(prefix=rdf_pb2.RdfPrefixEntry(id=1, value=MARK))],
    "datatype entry": [row(datatype=rdf_pb2.RdfDatatypeEntry(id=1, value=MARK))],
    "blank node": [row(statement_add=rdf_pb2.RdfQuad(s_bnode=MARK, p_iri=IRI_ROW, o_bnode="o", g_bnode="g"))],
    "graph blank node": [row(statement_add=rdf_pb2.RdfQuad(s_bnode="s", p_iri=IRI_ROW, o_bnode="o", g_bnode=MARK))],
    "literal": [row(statement_add=rdf_pb2.RdfQuad(s_bnode="s", p_iri=IRI_ROW, o_literal=LIT(lex=MARK), g_bnode="g"))],
    "language tag": [
        row(
            statement_add=rdf_pb2.RdfQuad(s_bnode="s", p_iri=IRI_ROW, o_literal=LIT(lex="x", langtag=MARK), g_bnode="g")
        )
    ],
    "header key": [row(header=patch_pb2.RdfPatchHeader(key=MARK, h_bnode="b"))],
    "header value": [row(header=patch_pb2.RdfPatchHeader(key="k", h_literal=LIT(lex=MARK)))],
    "prefix name": [row(namespace_add=patch_pb2.RdfPatchNamespace(name=MARK, value=IRI_ROW, g_bnode="g"))],
}


@pytest.mark.parametrize("field", list(UTF8_ROWS))
def test_invalid_utf8_in_every_jelly_patch_string_field(field: str, tmp_path: Path) -> None:
    log = tmp_path / "bad.jellyp"
    log.write_bytes(GOOD + with_invalid_utf8(frame(NAME_ROW, *UTF8_ROWS[field], PUNCT)))
    assert_clean_error(cli("inspect", str(log)), str(log), f"byte {len(GOOD)}", "invalid UTF-8")


# Every position a string can take in RDF Patch text.
UTF8_LINES = {
    "IRI": f"A <http://ex/{MARK}> <http://ex/p> <http://ex/o> .",
    "blank node": f"A _:b{MARK} <http://ex/p> <http://ex/o> .",
    "literal": f'A <http://ex/s> <http://ex/p> "{MARK}" .',
    "language tag": f'A <http://ex/s> <http://ex/p> "x"@en-{MARK} .',
    "datatype": f'A <http://ex/s> <http://ex/p> "x"^^<http://ex/{MARK}> .',
    "graph": f"A <http://ex/s> <http://ex/p> <http://ex/o> <http://ex/{MARK}> .",
    "header key": f'H "{MARK}" "v" .',
    "header value": f'H k "{MARK}" .',
    "prefix name": f'PA "{MARK}" <http://ex/ns#> .',
    "prefix IRI": f'PA "p" <http://ex/{MARK}#> .',
}


@pytest.mark.parametrize("field", list(UTF8_LINES))
def test_invalid_utf8_in_every_rdf_patch_text_position(field: str, tmp_path: Path) -> None:
    log = tmp_path / "bad.rdfp"
    log.write_bytes(GOOD_TEXT.encode() + with_invalid_utf8(UTF8_LINES[field].encode() + b"\n"))
    assert_clean_error(cli("inspect", str(log)), str(log), f"byte {len(GOOD_TEXT)}", "line 5", "invalid UTF-8 at byte")


@pytest.mark.parametrize("fmt", ["rdfp", "jellyp"])
def test_invalid_utf8_applies_only_the_units_before_it(fmt: str, tmp_path: Path) -> None:
    log = tmp_path / f"bad.{fmt}"
    if fmt == "rdfp":
        log.write_bytes(
            GOOD_TEXT.encode() + with_invalid_utf8(f"TX .\nA {GOOD_LINE}\n{UTF8_LINES['literal']}\n".encode())
        )
    else:
        lost = row(statement_add=rdf_pb2.RdfQuad(s_bnode="lost", p_iri=IRI_ROW, o_bnode="o", g_bnode="g"))
        log.write_bytes(GOOD + with_invalid_utf8(frame(NAME_ROW, lost, *UTF8_ROWS["literal"], PUNCT)))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert_clean_error(cli("apply", str(log), "--target", target), str(log), "invalid UTF-8")
    assert dump(target) == [GOOD_LINE]
    convert = cli("convert", str(log), str(tmp_path / "out.rdfp"))
    assert_clean_error(convert, str(log), "invalid UTF-8")
    assert not (tmp_path / "out.rdfp").exists()


# -- 8. IRIs with control characters, spaces, '>' and NUL ------------------------------------

ODD_IRIS = ["http://ex/a b", "http://ex/a>b", "http://ex/nul\x00", "http://ex/ctl\x01\x1f\x7f", 'http://ex/"{|}^`\\']


def test_odd_iris_in_jelly_patch_are_stored_escaped_and_read_back_exactly(tmp_path: Path) -> None:
    # Jelly lookup entries may hold any string; N-Quads writes what IRIREF excludes as \u escapes.
    events: list[Event] = [Add(NT.iri(iri), "<http://ex/p>", NT.iri(iri), NT.iri(iri), 0, 0, 0) for iri in ODD_IRIS]
    log = tmp_path / "odd.jellyp"
    log.write_bytes(encode([*events, PatchEnd(0, 0, 0)]))
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert cli("apply", str(log), "--target", target).code == 0
    lines = dump(target)
    assert len(lines) == len(ODD_IRIS)
    back = set()
    for line in lines:
        assert "\x00" not in line and " b" not in line  # escaped, so the line parses
        term, _ = scan_term(line, 0, NT)
        back.add(NT.unpack(term)[1])
    assert back == set(ODD_IRIS)
    trig = cli("dump", "--target", target, "--format", "trig")
    # rdflib cannot write these IRIs as TriG: a clear error, not rdflib's traceback.
    assert_clean_error(trig, "trig output through rdflib cannot write this data", "dump as nq")


TEXT_IRI_CHARS = [" ", ">", "\x00", "\x01", '"', "{", "\\"]


@pytest.mark.parametrize("raw", TEXT_IRI_CHARS)
def test_odd_characters_in_text_iris_are_refused(raw: str, tmp_path: Path) -> None:
    log = tmp_path / "odd.rdfp"
    log.write_bytes(GOOD_TEXT.encode() + f"A <http://ex/a{raw}b> <http://ex/p> <http://ex/o> .\n".encode())
    # '>' ends the IRI early and leaves "b>" where a term should be; '\\' starts an escape.
    rule = {">": "expected an RDF term, found 'b>", "\\": "bad escape in IRI"}.get(raw, "is not allowed in an IRI")
    assert_clean_error(cli("inspect", str(log)), str(log), f"byte {len(GOOD_TEXT)}", "line 5", rule)


def test_odd_characters_in_text_iris_apply_nothing_unless_escaped(tmp_path: Path) -> None:
    log = tmp_path / "odd.rdfp"
    log.write_text(
        GOOD_TEXT
        + "TX .\nA <http://ex/lost> <http://ex/p> <http://ex/o> .\nA <http://ex/a b> <http://ex/p> <http://ex/o> .\n"
    )
    target = f"sqlite:///{tmp_path / 'state.db'}"
    assert_clean_error(cli("apply", str(log), "--target", target), str(log), "line 7", "U+0020")
    assert dump(target) == [GOOD_LINE]
    # Written as \u escapes they are legal; DEL (not excluded by IRIREF) may stay raw.
    lines = [f"<http://ex/a\\u{ord(raw):04X}b> <http://ex/p> <http://ex/o> ." for raw in TEXT_IRI_CHARS]
    lines.append("<http://ex/a\x7fb> <http://ex/p> <http://ex/o> .")
    escaped = tmp_path / "escaped.rdfp"
    escaped.write_text("".join(f"A {line}\n" for line in lines))
    assert cli("apply", str(escaped), "--target", target).code == 0
    assert dump(target) == sorted([GOOD_LINE, *lines])


# -- 9. SQL metacharacters in every string that reaches SQL ----------------------------------

META = "'\";--\\%?$1\x00"
# Strings the SQL target stores as they are rather than as N-Triples terms (prefix names,
# header keys, the patch id): NUL is tested on its own below, since PostgreSQL refuses it.
RAW_META = META.replace("\x00", "")
FILE_META = "it's \"; --%?$1\\"  # a file name cannot hold NUL or '/'


def meta_events(raw: str = RAW_META) -> list[Event]:
    g = NT.iri("http://ex/g" + META)
    return [
        Header("id", NT.iri("urn:x:" + raw), 0, 0, 0),
        Header("k" + raw, NT.literal("v" + META), 0, 0, 0),
        PrefixAdd("p" + raw, NT.iri("http://ex/ns" + META), g, 0, 0, 0),
        PrefixAdd("q" + raw, NT.iri("http://ex/ns2" + META), "", 0, 0, 0),
        TxStart(0, 0, 0),
        Add(NT.iri("http://ex/s" + META), NT.iri("http://ex/p" + META), NT.literal("lit" + META), g, 0, 0, 0),
        Add(
            NT.bnode("b" + META),
            NT.iri("http://ex/p"),
            NT.literal("x" + META, datatype="http://ex/dt" + META),
            NT.bnode("g" + META),
            0,
            0,
            0,
        ),
        Add(NT.bnode("b1"), NT.iri("http://ex/p"), NT.literal(META, lang="en-x-q"), "", 0, 0, 0),
        TxCommit(0, 0, 0),
        PatchEnd(0, 0, 0),
    ]


@pytest.mark.parametrize("fmt", ["jellyp", "rdfp"])
def test_sql_metacharacters_everywhere_round_trip(fmt: str, sql_url: str, tmp_path: Path) -> None:
    events = meta_events()
    log = tmp_path / f"{FILE_META}.{fmt}"
    jellyp = encode(events)
    if fmt == "jellyp":
        log.write_bytes(jellyp)
    else:
        (tmp_path / "m.jellyp").write_bytes(jellyp)
        assert cli("convert", str(tmp_path / "m.jellyp"), str(log)).code == 0
    run = cli("apply", str(log), "--target", sql_url)
    assert run.code == 0, run.err
    adds = [e for e in events if type(e) is Add]
    assert dump(sql_url) == sorted(f"{e.s} {e.p} {e.o} {e.g} ." if e.g else f"{e.s} {e.p} {e.o} ." for e in adds)
    with open_target(sql_url) as target:
        assert target.namespaces() == {
            (NT.iri("http://ex/g" + META), "p" + RAW_META): NT.iri("http://ex/ns" + META),
            ("", "q" + RAW_META): NT.iri("http://ex/ns2" + META),
        }
        (record,) = target.history()
        assert record.patch_id == "urn:x:" + RAW_META
        assert ("k" + RAW_META, NT.literal("v" + META)) in record.headers
        (status,) = target.sources()
        assert status.source == str(log.resolve())
    again = cli("apply", str(log), "--target", sql_url)  # resumes at the checkpoint: nothing twice
    assert again.code == 0 and "0 patches applied" in again.out.decode()


NUL_CASES = {
    "prefix name": [PrefixAdd("p\x00", NT.iri("http://ex/ns#"), "", 0, 0, 0)],
    "header key": [Header("k\x00", NT.literal("v"), 0, 0, 0)],
    "patch id": [Header("id", NT.iri("urn:x:\x00"), 0, 0, 0)],
}


@pytest.mark.parametrize("field", list(NUL_CASES))
def test_nul_in_strings_stored_or_refused_cleanly(field: str, sql_url: str, tmp_path: Path, request: Any) -> None:
    log = tmp_path / "nul.jellyp"
    log.write_bytes(encode([*NUL_CASES[field], Add(*GOOD_QUAD, 0, 0, 0), PatchEnd(0, 0, 0)]))
    run = cli("apply", str(log), "--target", sql_url)
    if "postgres" in request.node.callspec.id and field != "header key":
        # PostgreSQL text cannot hold U+0000, and prefix names and patch ids are stored as
        # they are (terms are N-Triples, which escapes it; header keys go into JSON, which
        # escapes it too). A decision, not an accident: refused in one line, nothing applied.
        assert run.code != 0
        assert_clean_error(run, str(log), "NUL")
        assert dump(sql_url) == []
        return
    assert run.code == 0, run.err
    with open_target(sql_url) as target:
        (record,) = target.history()
        if field == "prefix name":
            assert target.namespaces() == {("", "p\x00"): NT.iri("http://ex/ns#")}
        elif field == "header key":
            assert record.headers == (("k\x00", '"v"'),)
        else:
            assert record.patch_id == "urn:x:\x00"


@pytest.mark.parametrize("lang", ["en'--", 'en";', "en\\", "en%?", "en$1", "en\x00"])
def test_sql_metacharacters_in_language_tags_are_refused(lang: str, tmp_path: Path) -> None:
    # A language tag is [a-zA-Z]+(-[a-zA-Z0-9]+)*: metacharacters make it no tag at all.
    quad = rdf_pb2.RdfQuad(s_bnode="s", p_iri=IRI_ROW, o_literal=LIT(lex="x", langtag=lang), g_default_graph={})
    log = tmp_path / "lang.jellyp"
    log.write_bytes(GOOD + frame(NAME_ROW, row(statement_add=quad), PUNCT))
    assert_clean_error(cli("inspect", str(log)), str(log), f"byte {len(GOOD)}", "language tag")
    if lang == "en'--":
        target = f"sqlite:///{tmp_path / 'state.db'}"
        assert_clean_error(cli("apply", str(log), "--target", target), str(log), f"byte {len(GOOD)}", "language tag")
        assert dump(target) == [GOOD_LINE]


# -- regressions for the defects these cases found (fast, in process) -----------------------


def test_text_line_limit_holds_when_the_whole_line_arrives_at_once() -> None:
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT, limits=Limits(max_frame_bytes=64))
    reader.feed(b'A <http://ex/s> <http://ex/p> "' + b"x" * 100 + b'" .\n')
    with pytest.raises(DecodeError, match="line longer than the limit of 64 bytes"):
        list(reader)


def test_a_bare_frame_over_the_limit_fails_before_the_input_ends() -> None:
    decoder: PatchDecoder[str] = PatchDecoder(NT, limits=Limits(max_frame_bytes=1024), framing="single")
    decoder.feed(frame(options_row(), PUNCT)[1:] + b"\x0a\x00" * 600)  # not closed: more may come
    with pytest.raises(DecodeError, match="non-delimited frame"):
        decoder.next_event()


def test_a_frame_of_many_tiny_rows_is_handed_out_in_batches() -> None:
    from patchsync.codec.driver import ROW_BATCH

    rows = [row(statement_add=rdf_pb2.RdfQuad(s_bnode="s", p_iri=IRI_ROW, o_bnode="o", g_bnode="g"))]
    rows += [row(statement_add=rdf_pb2.RdfQuad())] * (5 * ROW_BATCH)  # repeated terms: 4 bytes a row
    decoder: PatchDecoder[str] = PatchDecoder(NT)
    decoder.feed(frame(options_row(), NAME_ROW, *rows, PUNCT))
    decoder.close()
    held = []
    count = 0
    for _ in decoder:
        held.append(len(decoder._queue))
        count += 1
    assert count == 1 + 5 * ROW_BATCH + 1 + 1  # options, adds, patch end
    assert max(held) < ROW_BATCH + 3


def test_header_limits_in_process() -> None:
    text = "".join(f'H k{i} "v" .\n' for i in range(3)) + "Z .\n" + "".join(f'H k{i} "v" .\n' for i in range(4))
    small = Limits(max_headers=3)
    reader: RdfPatchTextReader[str] = RdfPatchTextReader(NT, limits=small)
    reader.feed(text.encode())
    reader.close()
    with pytest.raises(DecodeError, match="line 8: more than 3 H rows in one patch"):
        list(reader)  # the count restarts at Z: the first patch's three are fine
    assert len(read_rdfp(text)) == 9
    events = [Header(f"k{i}", NT.literal("v"), 0, 0, 0) for i in range(3)]
    data = encode(
        [*events, PatchEnd(0, 0, 0), *events, events[0], PatchEnd(0, 0, 0)],
        PatchOptions(stream_type=StreamType.PUNCTUATED),
    )
    decoder: PatchDecoder[str] = PatchDecoder(NT, limits=small)
    decoder.feed(data)
    decoder.close()
    with pytest.raises(DecodeError, match="more than 3 header rows in one patch"):
        list(decoder)
