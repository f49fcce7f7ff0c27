"""The compiled Jelly-Patch core against the pure-Python reference decoder (issue #13).

Both decoders get identical bytes, whole and split at arbitrary points, and must hand out
identical events or fail with identical errors (type, rule, offset, frame, row):

* every file of the Jelly-Patch conformance suite, of the vendored Jelly-RDF conformance suite
  and of the fuzz seed corpus;
* random patch streams (the round-trip strategies of test_properties) and corruptions of them;
* frames the core leaves to protobuf (fields repeated or unknown), to show the hand-over;
* lookup entries redefined mid-stream (Jelly-RDF spec, "Prefix, name, and datatype lookup
  entries": a later entry with the same id replaces the earlier one), which the term caches
  must notice;
* a state exported from a native decoder and restored into a new one (the tail daemon's
  snapshots).

The compiled module is imported directly, not through codec/backend.py, so these tests
exercise it even where ``PATCHSYNC_PURE=1`` is set; they fail if it was not built.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef

from patchsync import Add, Header, PatchEnd, PatchOptions, StatementType, StreamType, TxCommit, TxStart
from patchsync.codec import _native
from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
from patchsync.codec.wire import (
    ENTRY_ID,
    ENTRY_VALUE,
    IRI_NAME,
    IRI_PREFIX,
    LIT_DATATYPE,
    LIT_LEX,
    O_TAGS,
    ROW_ADD,
    ROW_DATATYPE,
    ROW_NAME,
    ROW_PREFIX,
    S_TAGS,
    ld,
    ld_str,
    varint,
)
from patchsync.terms.ntriples import NTriplesTerms
from tests.fuzz.corpus import PATCH_SUITE, RDF_SUITE, seeds
from tests.fuzz.targets import compare_native, native_decoder, outcome, pure_decoder

from .helpers import encode
from .test_properties import VALID, stream_case

NT = NTriplesTerms()
SUITE = sorted(PATCH_SUITE.glob("**/*.jellyp"))
RDF_FILES = sorted(RDF_SUITE.glob("**/*.jelly"))


def splits(data: bytes, count: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [0, len(data), *(rng.randrange(len(data) + 1) for _ in range(count))]


def native_frames(data: bytes, *, rdf: bool = False) -> int:
    """How many frames of a decodable stream the compiled core accepted."""
    decoder = native_decoder(NT, rdf=rdf)
    accepted = 0
    scan = _native.scan

    class Counting:
        Frame = _native.Frame

        @staticmethod
        def scan(payload: bytes, rdf: bool = False) -> Any:
            nonlocal accepted
            frame = scan(payload, rdf)
            accepted += frame is not None
            return frame

        decode_rows = staticmethod(_native.decode_rows)
        decode_rdf_rows = staticmethod(_native.decode_rdf_rows)

    decoder._native = Counting
    outcome(decoder, [data])
    return accepted


@pytest.mark.parametrize("path", SUITE, ids=lambda p: str(p.relative_to(PATCH_SUITE)))
def test_conformance_file_decodes_the_same(path: Path) -> None:
    data = path.read_bytes()
    for point in splits(data, 3, hash(path.name)):
        compare_native(data, point)


@pytest.mark.parametrize("path", RDF_FILES, ids=lambda p: str(p.relative_to(RDF_SUITE)))
def test_rdf_conformance_file_decodes_the_same(path: Path) -> None:
    data = path.read_bytes()
    for point in splits(data, 2, hash(path.name)):
        compare_native(data, point, rdf=True)


@pytest.mark.parametrize("rdf", [False, True], ids=["patch", "rdf"])
def test_the_core_takes_the_suites_frames(rdf: bool) -> None:
    # A differential test would pass trivially if the core handed every frame to protobuf:
    # every positive case's frames are plainly encoded, so the core must take them all.
    positive = [p for p in (RDF_FILES if rdf else SUITE) if "/pos_" in str(p)]
    assert len(positive) > 50
    for path in positive:
        data = path.read_bytes()
        frames = pure_decoder(NT, rdf=rdf)
        outcome(frames, [data])
        assert native_frames(data, rdf=rdf) == frames.frames, path


def test_fuzz_seeds_decode_the_same() -> None:
    found = seeds("native")
    assert len(found) > 100
    for data in found:
        point = int.from_bytes(data[:2], "little") % (len(data) - 1)
        compare_native(data[2:], point)
        compare_native(data[2:], point, rdf=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_case(), st.integers(0, 1 << 16))
def test_random_streams_decode_the_same(case: tuple[PatchOptions, list[list[object]], int], point: int) -> None:
    options, groups, frame_rows = case
    stream: list[object] = []
    for group in groups:
        stream += [*group, PatchEnd()]
    data = encode(stream, options, max_frame_rows=frame_rows)
    events, error = compare_native(data, point % (len(data) + 1))
    assert error is None and events  # a valid stream decodes


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, 1 << 16),
)
def test_corrupted_streams_fail_the_same(mutations: list[tuple[int, int, str]], point: int) -> None:
    data = bytearray(VALID)
    for pos, value, how in mutations:
        pos = min(pos, len(data) - 1)
        if how == "set":
            data[pos] = value
        elif how == "insert":
            data.insert(pos, value)
        elif len(data) > 1:
            del data[pos]
    compare_native(bytes(data), point % (len(data) + 1))


RDF_VALID = (RDF_SUITE / "from_jelly" / "quads_rdf_star" / "pos_001" / "in.jelly").read_bytes()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1 << 16), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, 1 << 16),
)
def test_corrupted_rdf_streams_fail_the_same(mutations: list[tuple[int, int, str]], point: int) -> None:
    data = bytearray(RDF_VALID)
    for pos, value, how in mutations:
        pos = pos % len(data)
        if how == "set":
            data[pos] = value
        elif how == "insert":
            data.insert(pos, value)
        elif len(data) > 1:
            del data[pos]
    compare_native(bytes(data), point % (len(data) + 1), rdf=True)


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"PATCHSYNC_PURE": "1"}, ""),
        # An install without a compiler has no extension module: simulated by blocking it.
        ({"PATCHSYNC_PURE": ""}, "import sys; sys.modules['patchsync.codec._native'] = None; "),
    ],
    ids=["PATCHSYNC_PURE", "not-built"],
)
def test_the_pure_codec_is_the_fallback(env: dict[str, str], code: str) -> None:
    root = Path(__file__).resolve().parents[1]

    def chosen(prefix: str, extra: dict[str, str]) -> list[str]:
        script = (
            prefix + "from patchsync.codec.patch_decoder import PatchDecoder; "
            "from patchsync.codec.rdf_decoder import RdfDecoder; "
            "from patchsync.codec.patch_encoder import PatchEncoder; "
            "from patchsync.codec.rdf_encoder import RdfEncoder; "
            "from patchsync.codec.backend import native; "
            "print(*(getattr(m, '__name__', m) for m in "
            "(PatchDecoder._native, RdfDecoder._native, PatchEncoder._native, RdfEncoder._native, native())))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root), **extra},
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert chosen(code, env) == ["None"] * 5
    # ...while by default the compiled core is chosen.
    assert chosen("", {"PATCHSYNC_PURE": ""}) == ["patchsync.codec._native"] * 5


def _frame(*rows: bytes) -> bytes:
    body = b"".join(ld(b"\x0a", row) for row in rows)
    return varint(len(body)) + body


def _options_frame() -> bytes:
    return encode([], PatchOptions(stream_type=StreamType.FLAT, statement_type=StatementType.TRIPLES))


def test_frames_left_to_protobuf_decode_the_same() -> None:
    # A name entry then a statement whose subject RdfIri appears twice: protobuf merges the
    # two messages (name_id from the second), which the core does not attempt.
    entry = ld(ROW_NAME, ENTRY_ID + varint(1) + ld_str(ENTRY_VALUE, "http://example.org/a"))
    entry2 = ld(ROW_NAME, ENTRY_ID + varint(2) + ld_str(ENTRY_VALUE, "http://example.org/b"))
    iri1 = ld(S_TAGS[0], IRI_NAME + varint(1))
    iri2 = ld(S_TAGS[0], IRI_NAME + varint(2))
    p = ld(b"\x2a", IRI_NAME + varint(1))
    o = ld(b"\x4a", IRI_NAME + varint(2))
    merged = ld(ROW_ADD, iri1 + iri2 + p + o)
    plain = ld(ROW_ADD, iri1 + p + o)
    data = _options_frame() + _frame(entry, entry2, merged) + _frame(plain)
    body = b"".join(ld(b"\x0a", row) for row in (entry, entry2, merged))
    assert _native.scan(body) is None  # the merged frame goes to protobuf
    assert _native.scan(_frame(plain)[1:]) is not None
    events, error = compare_native(data, len(data) // 2)
    assert error is None
    adds = [e for e in events if type(e) is Add]
    # (compare_native answers the rdflib adapter's outcome)
    assert [a.s for a in adds] == [URIRef("http://example.org/b"), URIRef("http://example.org/a")]


def test_redefined_lookup_entries_are_seen_by_the_term_caches() -> None:
    # Jelly-RDF spec, "Prefix, name, and datatype lookup entries": an entry may be replaced
    # by a later one with the same id; terms built from the old value must not be reused.
    def entry(value: str) -> bytes:
        return ld(ROW_NAME, ENTRY_ID + varint(1) + ld_str(ENTRY_VALUE, value))

    spo = ld(S_TAGS[0], IRI_NAME + varint(1)) + ld(b"\x2a", IRI_NAME + varint(1)) + ld(b"\x4a", IRI_NAME + varint(1))
    statement = ld(ROW_ADD, spo)
    data = (
        _options_frame()
        + _frame(entry("urn:a"), statement, entry("urn:b"), statement)
        + _frame(entry("urn:c"), statement)
    )
    for decoder in (native_decoder(NT), PurePatchDecoder(NT)):
        events, error = outcome(decoder, [data])
        assert error is None
        assert [e.s for e in events if type(e) is Add] == ["<urn:a>", "<urn:b>", "<urn:c>"]
    compare_native(data, 7)


def test_redefined_prefixes_and_datatypes_are_seen_by_the_term_caches() -> None:
    # The same rule for the prefix and datatype lookups: a cached IRI built from a replaced
    # prefix, or a literal of a replaced datatype, must not be handed out again.
    def entry(tag: bytes, entry_id: int, value: str) -> bytes:
        return ld(tag, ENTRY_ID + varint(entry_id) + ld_str(ENTRY_VALUE, value))

    iri = IRI_PREFIX + varint(1) + IRI_NAME + varint(1)
    literal = ld(O_TAGS[2], ld_str(LIT_LEX, "5") + LIT_DATATYPE + varint(1))
    statement = ld(ROW_ADD, ld(S_TAGS[0], iri) + ld(b"\x2a", iri) + literal)
    rows = [entry(ROW_NAME, 1, "x"), entry(ROW_PREFIX, 1, "urn:a:"), entry(ROW_DATATYPE, 1, "urn:t1"), statement]
    rows += [entry(ROW_PREFIX, 1, "urn:b:"), statement, entry(ROW_DATATYPE, 1, "urn:t2"), statement]
    rows += [entry(ROW_PREFIX, 1, "urn:b:"), statement]  # an equal value, a new entry
    data = _options_frame() + _frame(*rows)
    for decoder in (native_decoder(NT), pure_decoder(NT)):
        events, error = outcome(decoder, [data])
        assert error is None
        assert [(e.s, e.o) for e in events if type(e) is Add] == [
            ("<urn:a:x>", '"5"^^<urn:t1>'),
            ("<urn:b:x>", '"5"^^<urn:t1>'),
            ("<urn:b:x>", '"5"^^<urn:t2>'),
            ("<urn:b:x>", '"5"^^<urn:t2>'),
        ]
    compare_native(data, 11)


def test_one_name_under_several_prefixes_keeps_each_iri_apart() -> None:
    # Jelly-RDF spec, "IRI": an IRI is prefix + name, so one name entry may be used with any
    # prefix. The term cache keeps a name's first prefix in a tuple and moves to a dict at
    # the second; every combination must come back as its own IRI, in both decoders.
    def entry(tag: bytes, entry_id: int, value: str) -> bytes:
        return ld(tag, ENTRY_ID + varint(entry_id) + ld_str(ENTRY_VALUE, value))

    def statement(prefix: int) -> bytes:
        iri = IRI_PREFIX + varint(prefix) + IRI_NAME + varint(1)
        return ld(ROW_ADD, ld(S_TAGS[0], iri) + ld(b"\x2a", iri) + ld(b"\x4a", iri))

    order = [1, 1, 2, 1, 3, 2, 3, 1]
    rows = [entry(ROW_NAME, 1, "x")] + [entry(ROW_PREFIX, i, f"urn:{i}:") for i in (1, 2, 3)]
    rows += [statement(i) for i in order]
    data = _options_frame() + _frame(*rows)
    for decoder in (native_decoder(NT), pure_decoder(NT)):
        events, error = outcome(decoder, [data])
        assert error is None
        assert [e.s for e in events if type(e) is Add] == [f"<urn:{i}:x>" for i in order]
    compare_native(data, 13)


@pytest.mark.parametrize("make", [native_decoder, pure_decoder], ids=["native", "pure"])
def test_cached_iris_leave_the_garbage_collector_nothing_to_scan(make: Any) -> None:
    # Why the cache slots are tuples: a dict per name lives as long as the name entry and
    # every full collection rescanned thousands of them (about 6% of an apply into SQLite).
    events = [TxStart()] + [Add(URIRef(f"http://example.org/{i}"), URIRef("urn:p"), Literal(i)) for i in range(50)]
    data = encode([*events, TxCommit(), PatchEnd()], PatchOptions(statement_type=StatementType.TRIPLES))
    decoder = make(NT)
    decoder.feed(data)
    assert len([e for e in decoder if type(e) is Add]) == 50
    slots = [slot for slot in decoder._terms._by_name if slot is not None]
    assert len(slots) >= 50
    # A young collection (not a full one) untracks tuples of untracked items; CPython
    # untracks dicts only in full collections, so a dict slot would be promoted instead.
    gc.collect(1)
    assert not any(gc.is_tracked(slot) for slot in slots)


@pytest.mark.parametrize("fast", [False, True], ids=["RdflibTerms", "FastRdflibTerms"])
def test_cached_rdflib_terms_are_off_the_collectors_lists(fast: bool) -> None:
    # rdflib's terms are GC-tracked objects; kept in the term caches, a stream of new ones
    # set off full collections that rescanned them and everything else the process held
    # (half of decoding 200k statements next to an rdflib graph). The core untracks the
    # types an adapter declares (untracked_terms); the events stay equal to the pure path's.
    from rdflib import BNode

    from patchsync.terms.rdflib_adapter import RdflibTerms
    from patchsync.terms.rdflib_fast import FastRdflibTerms

    events = [TxStart()]
    for i in range(40):
        o = Literal(i) if i % 3 == 0 else Literal(f"x{i}", lang="en") if i % 3 == 1 else BNode(f"b{i}")
        events.append(Add(URIRef(f"http://example.org/{i}"), URIRef("urn:p"), o))
    data = encode([*events, TxCommit(), PatchEnd()], PatchOptions(statement_type=StatementType.TRIPLES))

    class Tracked(FastRdflibTerms if fast else RdflibTerms):  # type: ignore[misc]
        untracked_terms = ()

    adapter = FastRdflibTerms() if fast else RdflibTerms()
    native, error = outcome(native_decoder(adapter), [data])
    assert error is None and native == outcome(pure_decoder(adapter), [data])[0]
    terms = [t for e in native if type(e) is Add for t in (e.s, e.o)]
    assert {type(t) for t in terms} == {URIRef, Literal, BNode} and len(terms) == 80
    assert not any(gc.is_tracked(t) for t in terms)
    kept, _ = outcome(native_decoder(Tracked()), [data])
    assert all(gc.is_tracked(t) for e in kept if type(e) is Add for t in (e.s, e.o))


def test_state_exported_from_the_core_restores() -> None:
    first = encode(
        [
            Header("id", URIRef("urn:p1")),
            TxStart(),
            Add(URIRef("http://e.org/s"), URIRef("http://e.org/p"), Literal("x", lang="en")),
            TxCommit(),
            PatchEnd(),
        ],
        PatchOptions(),
    )
    second_events = [
        Add(URIRef("http://e.org/s"), URIRef("http://e.org/p"), Literal("y")),
        PatchEnd(),
    ]
    whole = encode(
        [
            Header("id", URIRef("urn:p1")),
            TxStart(),
            Add(URIRef("http://e.org/s"), URIRef("http://e.org/p"), Literal("x", lang="en")),
            TxCommit(),
            PatchEnd(),
            *second_events,
        ],
        PatchOptions(),
    )
    assert whole.startswith(first)
    decoder = native_decoder(NT)
    decoder.feed(first)
    list(decoder)
    state = decoder.export_state()
    for cls in (PatchDecoder, PurePatchDecoder):
        resumed = cls.from_state(state, NT)
        resumed._native = _native if cls is PatchDecoder else None
        resumed.feed(whole[len(first) :])
        resumed.close()
        reference = PurePatchDecoder(NT)
        reference.feed(whole)
        reference.close()
        expected = list(reference)
        got = list(resumed)
        assert got == expected[len(expected) - len(got) :]
        assert [e.o for e in got if type(e) is Add] == ['"y"']


@pytest.mark.parametrize(
    ("iri", "absolute"),
    [
        ("http://example.org/a", True),
        ("urn:x", True),
        ("a+b.c-d:rest", True),
        ("rel/path", False),
        ("1abc:x", False),
        ("é:x", False),  # a scheme is ASCII letters only
        ("http://ünïcode.example/ä", True),
        ("http://wide.example/\u4e2d", True),  # not a one-byte string: the Python check decides
        ("_:looks-like-a-bnode", False),
        ("", False),
    ],
)
def test_absolute_iri_rule_and_nt_escapes_agree(iri: str, absolute: bool) -> None:
    # Limits.require_absolute_iris (on by default): RFC 3987 absolute IRIs only; the
    # N-Triples form of an IRI with characters IRIREF excludes uses \\u escapes.
    for name in (iri, iri + " {x}"):
        entry = ld(ROW_NAME, ENTRY_ID + varint(1) + ld_str(ENTRY_VALUE, name))
        spo = (
            ld(S_TAGS[0], IRI_NAME + varint(1)) + ld(b"\x2a", IRI_NAME + varint(1)) + ld(b"\x4a", IRI_NAME + varint(1))
        )
        data = _options_frame() + _frame(entry, ld(ROW_ADD, spo))
        events, error = outcome(native_decoder(NT), [data])
        assert (error is None) == absolute, error
        assert (events, error) == outcome(pure_decoder(NT), [data])
        compare_native(data, len(data) // 2)


@pytest.mark.parametrize("bad_row", [None, 5000, 9000])
def test_frames_longer_than_a_batch_decode_the_same(bad_row: int | None) -> None:
    # A frame's events are queued ROW_BATCH rows at a time; an error in a later batch comes
    # after every event of the rows before it (docs/design.md §2).
    entry = ld(ROW_NAME, ENTRY_ID + varint(1) + ld_str(ENTRY_VALUE, "http://example.org/a"))
    spo = ld(S_TAGS[0], IRI_NAME + varint(1)) + ld(b"\x2a", IRI_NAME + varint(1)) + ld(b"\x4a", IRI_NAME + varint(1))
    repeated = ld(ROW_ADD, ld(b"\x4a", IRI_NAME + varint(1)))  # subject and predicate repeated
    undefined = ld(ROW_ADD, ld(b"\x4a", IRI_NAME + varint(7)))  # name 7 was never defined
    rows = [entry, ld(ROW_ADD, spo)] + [repeated] * 9998
    if bad_row is not None:
        rows[bad_row] = undefined
    data = _options_frame() + _frame(*rows)
    events, error = outcome(native_decoder(NT), [data])
    assert (events, error) == outcome(pure_decoder(NT), [data])
    adds = [e for e in events if type(e) is Add]
    if bad_row is None:
        assert error is None and len(adds) == 9999
    else:
        assert error is not None and error[5] == bad_row and len(adds) == bad_row - 1


def test_an_adapter_overriding_iri_is_called_by_the_core() -> None:
    # FastRdflibTerms' IRIs are built by the core itself (native_iri_type); a subclass that
    # overrides iri() must still get every new IRI through its override.
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    from patchsync import Delete
    from patchsync.terms.rdflib_fast import FastRdflibTerms

    class Marked(URIRef):
        pass

    class Override(FastRdflibTerms):
        def iri(self, value: str) -> URIRef:
            return Marked(value)

    assert FastRdflibTerms.native_iri_type is URIRef and Override.native_iri_type is None
    data = next(p for p in SUITE if "/pos_" in str(p)).read_bytes()
    for adapter, kind in ((Override(), Marked), (FastRdflibTerms(), URIRef)):
        events, error = outcome(native_decoder(adapter), [data])
        iris = [t for e in events if type(e) in (Add, Delete) for t in e[:4] if isinstance(t, URIRef)]
        iris = [t for t in iris if t != DATASET_DEFAULT_GRAPH_ID]
        assert error is None and len(iris) > 2 and all(type(t) is kind for t in iris)


def test_literals_needing_escapes_decode_to_the_same_ntriples() -> None:
    # The compiled core writes N-Triples string escapes itself (ntriples.format_string's
    # rules: ECHAR for \t \b \n \r \f " \\, UCHAR \u00XX for the other controls and DEL;
    # N-Triples 1.1 STRING_LITERAL_QUOTE excludes " \ LF CR). Every ASCII character, in
    # every kind of literal, next to text of 2, 3 and 4 UTF-8 bytes, in one stream.
    chars = [chr(c) for c in range(128)]
    lexicals = [*chars, "".join(chars), 'a\\b"c\nd\x00e\x7f', "ü\x01€\x1f\U0001f389\t", "\x7f" * 40]
    events: list[object] = []
    for i, lex in enumerate(lexicals):
        s, p = URIRef(f"http://example.org/s{i}"), URIRef("http://example.org/p")
        for o in (Literal(lex), Literal(lex, lang="en"), Literal(lex, datatype=URIRef("http://example.org/dt"))):
            events.append(Add(s, p, o))
    events.append(PatchEnd())
    data = encode(events, PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES))
    assert native_frames(data) > 0  # the compiled core decoded these frames
    native = outcome(native_decoder(NT), [data])
    pure = outcome(pure_decoder(NT), [data])
    assert native == pure
    written = [e.o for e in native[0] if isinstance(e, Add)]
    assert len(written) == 3 * len(lexicals)
    assert '"\\t"' in written and '"\\u0000"@en' in written and '"\\u007F"^^<http://example.org/dt>' in written


def test_blank_nodes_decode_to_the_same_ntriples() -> None:
    # The compiled core writes ASCII letters-and-digits labels itself ("_:" + label, as
    # ntriples.format_bnode does); every other label goes to the formatter (N-Triples
    # BLANK_NODE_LABEL allows more, and a label it does not allow is written <_:...>).
    labels = ["b1", "B", "z9Z", "0", "9a", "a-b", "a_b", "a.b", "a.", "é", "é1", "x y", "@", "[", "`", "{", "Ab\u0660"]
    labels += [chr(c) for c in range(0x21, 0x7F)]
    p = URIRef("http://example.org/p")
    events: list[object] = [Add(BNode(label), p, BNode(label + "o")) for label in labels]
    events.append(PatchEnd())
    data = encode(events, PatchOptions(stream_type=StreamType.PUNCTUATED, statement_type=StatementType.TRIPLES))
    assert native_frames(data) > 0
    native = outcome(native_decoder(NT), [data])
    assert native == outcome(pure_decoder(NT), [data])
    subjects = [e.s for e in native[0] if isinstance(e, Add)]
    assert len(subjects) == len(labels)
    assert "_:z9Z" in subjects and "_:0" in subjects and "<_:@>" in subjects
