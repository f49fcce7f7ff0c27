"""Property tests: random patches round-trip; corrupted bytes fail only with DecodeError."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync import (
    Add,
    DecodeError,
    Delete,
    Header,
    PatchEnd,
    PatchOptions,
    PrefixAdd,
    PrefixDelete,
    StatementType,
    StreamType,
    TripleTerm,
    TxAbort,
    TxCommit,
    TxStart,
)

from .helpers import decode, encode, patches

# Unicode text without lone surrogates (they cannot be UTF-8 encoded at all).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
iris = st.one_of(
    st.sampled_from([f"http://example.org/{c}" for c in "abcdefgh"] + ["urn:x", "http://a.org/x#y", "http://e/"]),
    text.map(lambda t: "http://r.example/" + "".join(ch for ch in t if ch.isalnum())),
).map(URIRef)
bnodes = st.sampled_from(["b1", "b2", "node-x", "ünï"]).map(BNode)
literals = st.one_of(
    text.map(Literal),
    st.tuples(text, st.sampled_from(["en", "pl", "en-GB", "zh-Hant-TW"])).map(lambda t: Literal(t[0], lang=t[1])),
    st.tuples(text, st.sampled_from(["http://www.w3.org/2001/XMLSchema#integer", "http://dt.example/x"])).map(
        lambda t: Literal(t[0], datatype=URIRef(t[1]), normalize=False)
    ),
)
simple = st.one_of(iris, bnodes)
quoted = st.recursive(
    st.builds(TripleTerm, simple, iris, st.one_of(simple, literals)),
    lambda inner: st.builds(TripleTerm, st.one_of(simple, inner), iris, st.one_of(simple, literals, inner)),
    max_leaves=3,
)
subjects = st.one_of(simple, quoted)
objects = st.one_of(simple, literals, quoted)
graphs = st.one_of(iris, bnodes, st.just(DATASET_DEFAULT_GRAPH_ID))


@st.composite
def patch_stream(draw: st.DrawFn, quads: bool) -> list[list[object]]:
    """Patches with a valid transaction structure."""
    groups = []
    for _ in range(draw(st.integers(1, 4))):
        group: list[object] = [
            Header(k, draw(st.one_of(iris, literals)))
            for k in draw(st.lists(st.sampled_from(["id", "prev", "x"]), max_size=2))
        ]
        in_tx = False
        for _ in range(draw(st.integers(0, 12))):
            g = draw(graphs) if quads else None
            kind = draw(st.sampled_from(["A", "D", "PA", "PD", "TX"]))
            if kind == "A":
                group.append(Add(draw(subjects), draw(iris), draw(objects), g))
            elif kind == "D":
                group.append(Delete(draw(subjects), draw(iris), draw(objects), g))
            elif kind == "PA":
                group.append(PrefixAdd(draw(st.sampled_from(["", "ex", "rdf"])), draw(iris), g))
            elif kind == "PD":
                group.append(PrefixDelete(draw(st.sampled_from(["", "ex"])), None, g))
            elif in_tx:
                group.append(draw(st.sampled_from([TxCommit(), TxAbort()])))
                in_tx = False
            else:
                group.append(TxStart())
                in_tx = True
        if in_tx:
            group.append(TxCommit())
        groups.append(group)
    return groups


@st.composite
def stream_case(draw: st.DrawFn) -> tuple[PatchOptions, list[list[object]], int]:
    stream_type = draw(st.sampled_from(list(StreamType)))
    statement_type = draw(st.sampled_from(list(StatementType)))
    options = PatchOptions(
        stream_type=stream_type,
        statement_type=statement_type,
        rdf_star=True,
        max_name_table_size=draw(st.sampled_from([16, 64, 4000])),
        max_prefix_table_size=draw(st.sampled_from([0, 1, 2, 8, 150])),
        max_datatype_table_size=draw(st.sampled_from([4, 32])),
    )
    groups = draw(patch_stream(statement_type is StatementType.QUADS))
    return options, groups, draw(st.integers(1, 50))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream_case())
def test_random_patches_round_trip(case: tuple[PatchOptions, list[list[object]], int]) -> None:
    options, groups, frame_rows = case
    stream: list[object] = []
    for group in groups:
        stream += [*group, PatchEnd()]
    data = encode(stream, options, max_frame_rows=frame_rows)
    got = patches(decode(data))
    if options.stream_type is StreamType.FLAT:
        # Jelly-Patch "Patch stream types": a FLAT stream is exactly one patch.
        assert got == [[e for g in groups for e in g]]
    else:
        assert got == groups


VALID = encode(
    [
        Header("id", URIRef("uuid:1")),
        TxStart(),
        PrefixAdd("ex", URIRef("http://example.org/"), URIRef("http://example.org/g")),
        Add(
            URIRef("http://example.org/s"),
            URIRef("http://example.org/p"),
            Literal("x", lang="en"),
            URIRef("http://example.org/g"),
        ),
        Add(
            BNode("b"),
            URIRef("http://example.org/p"),
            Literal("5", datatype=URIRef("http://www.w3.org/2001/XMLSchema#integer")),
        ),
        Delete(
            TripleTerm(URIRef("http://example.org/s"), URIRef("http://example.org/p"), BNode("o")),
            URIRef("http://example.org/q"),
            Literal("z"),
        ),
        TxCommit(),
        PatchEnd(),
        Add(URIRef("http://example.org/s"), URIRef("http://example.org/p"), URIRef("http://example.org/o")),
        PatchEnd(),
    ],
    PatchOptions(rdf_star=True),
    max_frame_rows=4,
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
        min_size=1,
        max_size=4,
    )
)
def test_corrupted_bytes_raise_only_decode_error(mutations: list[tuple[int, int, str]]) -> None:
    data = bytearray(VALID)
    for pos, value, how in mutations:
        pos = min(pos, len(data) - 1)
        if how == "set":
            data[pos] = value
        elif how == "insert":
            data.insert(pos, value)
        elif len(data) > 1:
            del data[pos]
    with contextlib.suppress(DecodeError):  # the only acceptable failure
        decode(bytes(data))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(data)
