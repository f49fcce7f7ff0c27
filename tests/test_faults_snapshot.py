"""Decoder snapshots of the tail daemon: plain validated data, never pickle.

A snapshot is only an accelerator: whatever sits in the state directory (corrupted,
truncated, taken for another log, an old pickle, a hostile pickle) the daemon either
resumes from it exactly or ignores it with one log line and decodes the log from its
start, and the target always ends equal to the reference.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import struct
from pathlib import Path
from typing import Any

import pytest

from patchsync.apply.targets.sql import SqlTarget
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.events import Add, Header, PatchEnd, TxCommit, TxStart
from patchsync.logs.patch_logs import LogAppender
from patchsync.logs.resume_point import MAGIC, VERSION, ResumePointError, decode_resume_point, encode_resume_point
from patchsync.options import Limits, PatchOptions, StatementType, StreamType
from patchsync.tail import Tailer, TailOptions
from patchsync.terms.ntriples import NTriplesTerms

from .apply_helpers import state
from .fault_helpers import frame_ends, reference
from .helpers import encode
from .test_tail import log_bytes, write_patches


def _tail_once(log: Path, url: str, state_dir: Path) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    records: list[tuple[str, dict[str, Any]]] = []
    with (
        SqlTarget(url) as target,
        Tailer([log], target, TailOptions(state_dir=state_dir, log=lambda e, f: records.append((e, f)))) as tailer,
    ):
        [report] = tailer.run_once()
    return report, records


def _forge(head: bytes, columns: bytes = b"", version: int = VERSION) -> bytes:
    """A snapshot of ``head`` (JSON) and lookup ``columns``, with a right header and checksum."""
    body = struct.pack("<I", len(head)) + head + columns
    return MAGIC + b" %d sha256=%s\n" % (version, hashlib.sha256(body).hexdigest().encode()) + body


def _split(blob: bytes) -> tuple[dict[str, Any], bytes]:
    """A snapshot's JSON head, parsed, and its lookup columns."""
    body = blob.split(b"\n", 1)[1]
    (size,) = struct.unpack_from("<I", body)
    return json.loads(body[4 : 4 + size]), body[4 + size :]


def _columns(*tables: tuple[list[tuple[int, int]], list[str]], count: int = 0) -> bytes:
    """Lookup columns of ``(runs, values)`` per table, as the format lays them out
    (``count``: added to the count of values said)."""
    out = b""
    for runs, values in tables:
        text = "\0".join(values).encode()
        numbers = [n for run in runs for n in run]
        out += struct.pack(f"<III{len(numbers)}I", len(runs), len(values) + count, len(text), *numbers) + text
    return out


def _snapshot_file(state_dir: Path) -> Path:
    [path] = state_dir.glob("*.snapshot")
    return path


@pytest.fixture
def resumable(tmp_path: Path, sqlite_url: str) -> tuple[Path, Path, bytes]:
    """A log applied in one run (leaving a snapshot) and the bytes still to append to it."""
    data = log_bytes(1, 60, tmp_path)
    cut = frame_ends(data)[30]
    log = tmp_path / "log.jellyp"
    log.write_bytes(data[:cut])
    state_dir = tmp_path / "state"
    report, _ = _tail_once(log, sqlite_url, state_dir)
    assert report.result.patches > 0
    assert _snapshot_file(state_dir).read_bytes().startswith(MAGIC + b" %d " % VERSION)
    return log, state_dir, data[cut:]


def _resume(log: Path, state_dir: Path, rest: bytes, url: str) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    with open(log, "ab") as f:
        f.write(rest)
    report, records = _tail_once(log, url, state_dir)
    with SqlTarget(url) as t:
        assert state(t) == reference(log)
    return report, records


def _ignored(records: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [f for e, f in records if e == "snapshot_ignored"]


def test_valid_snapshot_resumes_in_the_middle(resumable: tuple[Path, Path, bytes], sqlite_url: str) -> None:
    log, state_dir, rest = resumable
    size = log.stat().st_size
    report, records = _resume(log, state_dir, rest, sqlite_url)
    assert report.resumed_from == size and report.result.replayed == 0
    assert _ignored(records) == []


@pytest.mark.parametrize(
    "damage",
    [
        "flip_body_byte",
        "truncate",
        "empty",
        "garbage",
        "old_pickle_version",
        "old_json_version",
        "future_version",
        "bad_json_right_sum",
    ],
)
def test_damaged_snapshot_is_ignored_with_one_line(
    resumable: tuple[Path, Path, bytes], sqlite_url: str, damage: str
) -> None:
    log, state_dir, rest = resumable
    path = _snapshot_file(state_dir)
    data = path.read_bytes()
    header, body = data.split(b"\n", 1)
    if damage == "flip_body_byte":
        i = len(body) // 2
        new = header + b"\n" + body[:i] + bytes([body[i] ^ 0x01]) + body[i + 1 :]
    elif damage == "truncate":
        new = data[: len(data) * 2 // 3]
    elif damage == "empty":
        new = b""
    elif damage == "garbage":
        new = bytes(range(256)) * 4
    elif damage == "old_pickle_version":
        # What format 1 looked like: a pickled dict.
        new = pickle.dumps({"version": 1, "source": str(log.resolve()), "offset": 10, "decoder": None})
    elif damage == "future_version":
        new = data.replace(b" %d " % VERSION, b" 99 ", 1)
    elif damage == "old_json_version":
        # What format 2 looked like: the whole body JSON, with the same fields.
        doc, _ = _split(data)
        bad = json.dumps(doc).encode()
        new = MAGIC + b" 2 sha256=%s\n" % hashlib.sha256(bad).hexdigest().encode() + bad
    else:
        new = _forge(b'{"source": 1}')
    path.write_bytes(new)
    report, records = _resume(log, state_dir, rest, sqlite_url)
    assert report.resumed_from == 0  # decoded from the start; the checkpoint said where to apply
    [line] = _ignored(records)
    assert line["snapshot"] == str(path) and line["reason"]
    # The run wrote a fresh, valid snapshot in place of the damaged one.
    assert path.read_bytes().startswith(MAGIC + b" %d " % VERSION)


def test_snapshot_of_another_log_is_ignored(tmp_path: Path, sqlite_url: str) -> None:
    # Two logs with the same name in turn (the second replaces the first with --reset):
    # the first one's snapshot is for a different fingerprint.
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 30)
    state_dir = tmp_path / "state"
    _tail_once(log, sqlite_url, state_dir)
    old_snapshot = _snapshot_file(state_dir).read_bytes()
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    log.unlink()
    write_patches(log, 1, 40, seed=7)
    _tail_once(log, other_url, state_dir)
    _snapshot_file(state_dir).write_bytes(old_snapshot)  # the first log's snapshot is back
    write_patches(log, 41, 45, seed=7)
    report, records = _tail_once(log, other_url, state_dir)
    assert report.resumed_from == 0 and report.result.patches == 5
    [line] = _ignored(records)
    assert "another log" in line["reason"]
    with SqlTarget(other_url) as t:
        assert state(t) == reference(log)


def test_snapshot_with_a_pickle_payload_is_never_unpickled(tmp_path: Path, sqlite_url: str) -> None:
    log = tmp_path / "log.jellyp"
    write_patches(log, 1, 20)
    state_dir = tmp_path / "state"
    _tail_once(log, sqlite_url, state_dir)
    path = _snapshot_file(state_dir)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> tuple[Any, ...]:
            return (Path.touch, (marker,))

    evil = pickle.dumps(Payload(), protocol=pickle.HIGHEST_PROTOCOL)
    pickle.loads(evil)  # the payload works when unpickled ...
    assert marker.exists()
    marker.unlink()
    # ... as a bare file, and dressed up with a valid header and checksum.
    forged = MAGIC + b" %d sha256=%s\n" % (VERSION, hashlib.sha256(evil).hexdigest().encode()) + evil
    for first, data in ((21, evil), (23, forged)):
        path.write_bytes(data)
        write_patches(log, first, first + 1)
        report, records = _tail_once(log, sqlite_url, state_dir)
        assert not marker.exists()
        assert report.resumed_from == 0
        assert len(_ignored(records)) == 1
    with SqlTarget(sqlite_url) as t:
        assert state(t) == reference(log)


# -- the encoding itself -------------------------------------------------------------------


def _decode_all(data: bytes, decoder: PatchDecoder[Any]) -> list[Any]:
    decoder.feed(data)
    decoder.close()
    return list(decoder)


def _rich_log(tmp_path: Path) -> bytes:
    """A QUADS, RDF-star log whose later frames lean on lookups and repeated terms set earlier."""
    options = PatchOptions(
        stream_type=StreamType.PUNCTUATED,
        statement_type=StatementType.QUADS,
        rdf_star=True,
        generalized_statements=False,
    )
    path = tmp_path / "rich.jellyp"
    ex = "http://example.org/"
    # Patches with ids and no prev, written as given: the decoder's state is what is tested.
    with LogAppender(path, options, NTriplesTerms(), chain="ignore") as out:
        for n in range(12):
            g = f"<{ex}g{n % 2}>" if n % 3 else ""
            quoted = f"<< <{ex}s{n}> <{ex}p> <{ex}o> >>"
            out.write(
                [
                    Header("id", f"<urn:p:{n}>"),
                    TxStart(),
                    Add(f"<{ex}s{n}>", f"<{ex}p>", f'"v{n}"@en', g or None),
                    Add(f"<{ex}s{n}>", f"<{ex}q>", quoted, g or None),
                    Add("_:b1", f"<{ex}p>", f'"{n}"^^<http://www.w3.org/2001/XMLSchema#integer>', g or None),
                    TxCommit(),
                    PatchEnd(),
                ]
            )
    return path.read_bytes()


def test_round_trip_at_every_frame_boundary_equals_uninterrupted_decoding(tmp_path: Path) -> None:
    data = _rich_log(tmp_path)
    adapter = NTriplesTerms()
    whole = _decode_all(data, PatchDecoder(adapter, source="s"))
    ends = frame_ends(data)
    assert len(ends) >= 12
    checked = 0
    for cut in ends[1:-1]:
        first: PatchDecoder[Any] = PatchDecoder(adapter, source="s")
        first.feed(data[:cut])
        head = list(first)
        try:
            blob = encode_resume_point(
                first, source="s", fingerprint="f", checkpoint=(cut, 0), anchor=data[max(0, cut - 4096) : cut]
            )
        except ResumePointError:
            continue  # not between patches
        snap = decode_resume_point(blob, adapter, source="s", limits=Limits())
        assert snap.offset == cut and snap.fingerprint == "f"
        tail = _decode_all(data[cut:], snap.decoder)
        assert head + tail == whole
        checked += 1
    assert checked >= 10


def test_snapshot_head_is_plain_json_and_tables_are_columns(tmp_path: Path) -> None:
    data = _rich_log(tmp_path)
    decoder: PatchDecoder[Any] = PatchDecoder(NTriplesTerms(), source="s")
    decoder.feed(data[: frame_ends(data)[5]])
    list(decoder)
    blob = encode_resume_point(decoder, source="s", fingerprint="f", checkpoint=(1, 0), anchor=b"")
    header, body = blob.split(b"\n", 1)
    assert header == MAGIC + b" %d sha256=%s" % (VERSION, hashlib.sha256(body).hexdigest().encode())
    doc, columns = _split(blob)
    assert doc["options"] and doc["terms"]["last"]["s"] is not None
    state = decoder.export_state()
    assert state.terms is not None
    tables = [state.terms.names, state.terms.prefixes, state.terms.datatypes]
    assert state.terms.names.runs
    assert columns == _columns(*((list(t.runs), list(t.values)) for t in tables))
    assert [doc["terms"][k]["size"] for k in ("names", "prefixes", "datatypes")] == [t.size for t in tables]


def test_decoder_not_between_patches_is_not_snapshotted(tmp_path: Path) -> None:
    data = _rich_log(tmp_path)
    decoder: PatchDecoder[Any] = PatchDecoder(NTriplesTerms(), source="s")
    decoder.feed(data[: frame_ends(data)[3] + 3])  # a partial frame is buffered
    list(decoder)
    with pytest.raises(ResumePointError):
        encode_resume_point(decoder, source="s", fingerprint="f", checkpoint=(1, 0), anchor=b"")


def test_decoder_inside_a_big_frame_is_not_snapshotted() -> None:
    # A PUNCTUATED frame may hold many patches; one of more than ROW_BATCH rows is decoded
    # a batch at a time. Between batches the decoder can stand after a patch end with an
    # empty queue while the frame's remaining rows wait: its offset is already past the
    # frame, so a snapshot there would resume after patches never decoded.
    from patchsync.codec.driver import ROW_BATCH, Signal
    from patchsync.codec.framing import encode_varint, read_varint

    nt = NTriplesTerms()
    options = PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES)
    data = encode(
        [
            e
            for n in range(ROW_BATCH)
            for e in (Add(f"<http://x/{n}>", "<http://x/p>", f'"{n}"', None, 0, 0, 0), PatchEnd(0, 0, 0))
        ],
        options,
        nt,
    )
    payload, pos = b"", 0  # every frame's rows in one frame (rows are a repeated field)
    while pos < len(data):
        h = read_varint(data, pos, len(data))
        assert h is not None
        payload += data[h[1] : h[1] + h[0]]
        pos = h[1] + h[0]
    decoder: PatchDecoder[Any] = PatchDecoder(nt, source="s")
    decoder.feed(encode_varint(len(payload)) + payload)
    checked = 0
    while not isinstance(event := decoder.next_event(), Signal):
        if type(event) is PatchEnd and not decoder._queue and decoder._rows is not None:
            checked += 1
            with pytest.raises(ResumePointError):
                encode_resume_point(decoder, source="s", fingerprint="f", checkpoint=(1, 0), anchor=b"")
    assert checked >= 1 and decoder.frames == 1


def _entries_of(decoder: PatchDecoder[Any]) -> list[tuple[list[tuple[int, int]], list[str]]]:
    terms = decoder.export_state().terms
    assert terms is not None
    return [(list(t.runs), list(t.values)) for t in (terms.names, terms.prefixes, terms.datatypes)]


def _state_of_a_rich_log(tmp_path: Path) -> tuple[PatchDecoder[Any], dict[str, Any], bytes]:
    """A decoder five frames into a rich log, and its saved state: the JSON head and the columns."""
    data = _rich_log(tmp_path)
    decoder: PatchDecoder[Any] = PatchDecoder(NTriplesTerms(), source="s")
    decoder.feed(data[: frame_ends(data)[5]])
    list(decoder)
    blob = encode_resume_point(decoder, source="s", fingerprint="f", checkpoint=(1, 0), anchor=b"")
    doc, columns = _split(blob)
    return decoder, doc, columns


@pytest.mark.parametrize(
    "columns",
    [
        lambda t: _columns((t[0][0] + [(10**9, 1)], t[0][1] + ["x"]), t[1], t[2]),  # an id out of range
        lambda t: _columns(([(0, 1)], ["x"]), t[1], t[2]),  # id 0
        lambda t: _columns(([(2, 1), (1, 1)], ["x", "y"]), t[1], t[2]),  # runs out of order
        lambda t: _columns(([(1, 2), (2, 1)], ["x", "y", "z"]), t[1], t[2]),  # runs overlapping
        lambda t: _columns(([(1, 3)], ["x", "y"]), t[1], t[2]),  # more ids than values
        lambda t: _columns(([(1, 1)], ["x", "y"]), t[1], t[2]),  # more values than ids
        lambda t: _columns(t[0], t[1]),  # a table missing
        lambda t: _columns(*t) + b"\0",  # bytes after the tables
        lambda t: _columns(*t)[:-1],  # cut short
        lambda t: _columns(*t).replace(b"http", b"\xff\xfetp", 1),  # not UTF-8
        lambda t: _columns(*t, count=1),  # a count of values not the text's
    ],
)
def test_invalid_lookup_columns_are_rejected_not_trusted(tmp_path: Path, columns: Any) -> None:
    decoder, doc, good = _state_of_a_rich_log(tmp_path)
    entries = _entries_of(decoder)
    assert good == _columns(*entries)
    decode_resume_point(_forge(json.dumps(doc).encode(), good), NTriplesTerms(), source="s", limits=Limits())
    with pytest.raises(ResumePointError):
        forged = _forge(json.dumps(doc).encode(), columns(entries))
        decode_resume_point(forged, NTriplesTerms(), source="s", limits=Limits())


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["terms"]["names"].update(last_id=-1),
        lambda d: d["terms"].update(last_name=10**9),
        lambda d: d["terms"]["last"].update(s=["iri"]),
        lambda d: d["terms"]["last"].update(o=["triple", ["iri", "a"], None, ["iri", "b"]]),
        lambda d: d["terms"]["last"].update(s=_nested(200)),
        lambda d: d.update(options="%%%"),
        lambda d: d.update(options="CAEQAhgBIAAoACgAMAA4AEAA"),  # a valid message with illegal values
        lambda d: d.update(offset="12"),
        lambda d: d.update(checkpoint=[1]),
        lambda d: d.update(source="elsewhere"),
        lambda d: d["terms"]["prefixes"].update(size=5),
    ],
)
def test_invalid_fields_are_rejected_not_trusted(tmp_path: Path, edit: Any) -> None:
    _, doc, columns = _state_of_a_rich_log(tmp_path)
    edit(doc)
    forged = _forge(json.dumps(doc).encode(), columns)
    with pytest.raises(ResumePointError):
        decode_resume_point(forged, NTriplesTerms(), source="s", limits=Limits())


def _nested(depth: int) -> Any:
    term: Any = ["iri", "http://example.org/x"]
    for _ in range(depth):
        term = ["triple", term, ["iri", "http://example.org/p"], ["iri", "http://example.org/o"]]
    return term


def test_deep_json_nesting_is_rejected(tmp_path: Path) -> None:
    forged = _forge(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ResumePointError):
        decode_resume_point(forged, NTriplesTerms(), source="s", limits=Limits())


def test_rdflib_terms_round_trip(tmp_path: Path) -> None:
    # The daemon snapshots with the target's adapter: rdflib terms for rdflib/file targets.
    from patchsync.terms.rdflib_adapter import RdflibTerms

    data = _rich_log(tmp_path)
    adapter = RdflibTerms()
    whole = _decode_all(data, PatchDecoder(adapter, source="s"))
    cut = frame_ends(data)[6]
    first: PatchDecoder[Any] = PatchDecoder(adapter, source="s")
    first.feed(data[:cut])
    head = list(first)
    snap = decode_resume_point(
        encode_resume_point(
            first, source="s", fingerprint="f", checkpoint=(cut, 0), anchor=data[max(0, cut - 4096) : cut]
        ),
        adapter,
        source="s",
        limits=Limits(),
    )
    assert head + _decode_all(data[cut:], snap.decoder) == whole


def test_a_lookup_value_with_nul_is_not_snapshotted(tmp_path: Path) -> None:
    # The format joins a table's values with U+0000 (no IRI holds it); a decoder whose
    # lookups hold one anyway is not snapshotted, never written as a state read back otherwise.
    import dataclasses

    from patchsync.codec.decoder_state import LookupState

    data = _rich_log(tmp_path)
    decoder: PatchDecoder[Any] = PatchDecoder(NTriplesTerms(), source="s")
    decoder.feed(data[: frame_ends(data)[5]])
    list(decoder)
    state = decoder.export_state()
    assert state.terms is not None
    names = state.terms.names
    for values in ((*names.values[:-1], "a\0b"), (*names.values[:-1], "\0")):
        terms = dataclasses.replace(state.terms, names=LookupState(names.size, names.last_id, names.runs, values))
        odd = PatchDecoder.from_state(dataclasses.replace(state, terms=terms), NTriplesTerms(), source="s")
        with pytest.raises(ResumePointError, match="U\\+0000"):
            encode_resume_point(odd, source="s", fingerprint="f", checkpoint=(1, 0), anchor=b"")
