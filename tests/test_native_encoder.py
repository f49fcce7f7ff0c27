"""The compiled encoder rows against the pure-Python encoders (issue #13): byte-identical output.

The compiled core writes common statement rows (patchsync/codec/_native_encode.pxi); every
other row, and every row it declines, is the Python code. Both encoders get the same calls
and must give the same bytes after every call, and the same errors at the same calls:

* the inputs of the Jelly-Patch to-Jelly conformance suite (conformance/patch/to_jelly);
* random streams with lookups small enough to overflow and evict (Jelly-RDF spec, "Prefix,
  name, and datatype lookup entries"), repeated terms ("Repeated terms"), RDF-star and
  generalized terms (left to the Python code), strings UTF-8 cannot carry, frame caps of
  a few rows or bytes, every stream type, append mode, and the errors of invalid rows;
* the same for the Jelly-RDF encoder, every physical type.

Each test also checks that the compiled core wrote rows, so a core that declines
everything cannot pass. The compiled module is imported directly, not through
codec/backend.py, so these tests run it even where ``PATCHSYNC_PURE=1`` is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdflib import BNode, Literal, URIRef
from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

from patchsync import Add, Delete, Header, PatchEnd, PatchOptions, StatementType, StreamType, TripleTerm, TxStart
from patchsync.codec import _native
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.patch_encoder import PatchEncoder, PurePatchEncoder
from patchsync.codec.rdf_encoder import PureRdfEncoder, RdfEncoder
from patchsync.conformance.patch import _read_patch_text, _requested_options
from patchsync.errors import EncodeError
from patchsync.events import LogicalType, PhysicalType, RdfOptions
from patchsync.terms import caches
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

ROOT = Path(__file__).resolve().parents[1]
TO_JELLY = ROOT / "conformance" / "patch" / "to_jelly"
XSD = "http://www.w3.org/2001/XMLSchema#"


class Counting:
    """The compiled module, counting the rows it wrote."""

    TermEncoder = _native.TermEncoder

    def __init__(self) -> None:
        self.rows = 0

    def patch_statement(self, *args: Any) -> bool:
        done = bool(_native.patch_statement(*args))
        self.rows += done
        return done

    def rdf_encoder_statement(self, *args: Any) -> bool:
        done = bool(_native.rdf_encoder_statement(*args))
        self.rows += done
        return done

    def rdf_statement(self, *args: Any) -> bool:
        done = bool(_native.rdf_statement(*args))
        self.rows += done
        return done


def outcome(call: Any, *args: Any) -> str | None:
    try:
        call(*args)
    except EncodeError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def same_output(pure: Any, native: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Make each call on both encoders; the bytes and the errors must match after each."""
    for i, (method, args) in enumerate(calls):
        expected = outcome(getattr(pure, method), *args)
        got = outcome(getattr(native, method), *args)
        assert got == expected, f"call {i} {method}{args!r}"
        assert native.take() == pure.take(), f"bytes differ after call {i} {method}{args!r}"
    assert outcome(native.finish) == outcome(pure.finish)
    assert native.take() == pure.take()


def patch_pair(options: PatchOptions, adapter: Any = None, **kwargs: Any) -> tuple[Any, Any, Counting]:
    counting = Counting()

    class Native(PatchEncoder[Any]):
        _native = counting

    return PurePatchEncoder(options, adapter, **kwargs), Native(options, adapter, **kwargs), counting


def rdf_pair(options: RdfOptions, **kwargs: Any) -> tuple[Any, Any, Counting]:
    counting = Counting()

    class Native(RdfEncoder[Any]):
        _native = counting

    return PureRdfEncoder(options, RdflibTerms(), **kwargs), Native(options, RdflibTerms(), **kwargs), counting


# -- the conformance suite's inputs ----------------------------------------------------------------


CASES = sorted(p for p in TO_JELLY.glob("*/*") if p.is_dir())


def test_the_suite_has_to_jelly_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=lambda p: str(p.relative_to(TO_JELLY)))
def test_to_jelly_inputs_encode_the_same(case: Path) -> None:
    options = _requested_options(case / "options.jellyp")
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for path in sorted(case.glob("in_*.rdfp")):
        calls += [("send", (event,)) for event in _read_patch_text(path, "input")]
        calls.append(("end_patch", ()))
    for adapter in (NTriplesTerms(), None):  # string terms and rdflib terms
        pure, native, _ = patch_pair(options, adapter)
        same_output(pure, native, calls)


def test_the_core_writes_the_suites_rows() -> None:
    written = 0
    for case in CASES:
        options = _requested_options(case / "options.jellyp")
        pure, native, counting = patch_pair(options, NTriplesTerms())
        calls = [("send", (e,)) for p in sorted(case.glob("in_*.rdfp")) for e in _read_patch_text(p, "input")]
        same_output(pure, native, [*calls, ("end_patch", ())])
        written += counting.rows
    assert written >= 30  # 44 of the suite's rows are common ones


# -- random streams -------------------------------------------------------------------------------

# Few names, so that lookups of 8 names overflow and evict; the same objects again and
# again (repeated terms by identity) and equal copies (repeated terms by equality).
_IRI_TEXT = [f"http://example.org/{d}/{n}" for d in ("a", "b", "c/d#", "e") for n in ("x", "y", "z", "")]
_IRI_TEXT += ["urn:x", "http://a.org/x#y", "http://e/", "no-separator", "http://r.example/" + "l" * 200]
# Where the split falls (after the last "#" or "/"), in text of 1, 2 and 4 bytes a character.
_IRI_TEXT += ["http://ü.example/ä#ö", "http://x.example/\U0001f389/y", "urn:a#b/c", "urn:#", "urn:/", "ä/\U0001f389"]
_IRIS = [URIRef(t) for t in _IRI_TEXT]
iris = st.one_of(st.sampled_from(_IRIS), st.sampled_from(_IRI_TEXT).map(URIRef))
bnodes = st.sampled_from(["b1", "b2", "ünï", "x" * 150]).map(BNode)
lexical = st.one_of(st.sampled_from(["", "1", "x y", "ü" * 70, "z" * 300]), st.text(max_size=8))
literals = st.one_of(
    lexical.map(Literal),
    st.tuples(lexical, st.sampled_from(["en", "EN", "pl", "zh-Hant-TW", "zh-hant-tw"])).map(
        lambda t: Literal(t[0], lang=t[1])
    ),
    st.tuples(lexical, st.sampled_from(["integer", "string", "date", "x1", "x2", "x3", "x4", "x5"])).map(
        lambda t: Literal(t[0], datatype=URIRef(XSD + t[1]), normalize=False)
    ),
)
# RDF-star, literals and blank nodes in the wrong position, strings UTF-8 cannot carry: the
# Python code's rows (or its errors), mixed in among the compiled core's.
odd = st.one_of(
    st.builds(TripleTerm, st.one_of(iris, bnodes), iris, st.one_of(iris, literals)),
    st.just(BNode("\ud800")),
    st.just(Literal("a\udfffb")),
    st.just(URIRef("http://example.org/\ud800")),
)
terms = st.one_of(iris, iris, bnodes, literals)
graphs = st.one_of(iris, bnodes, st.just(DATASET_DEFAULT_GRAPH_ID), st.none())


@st.composite
def statements(draw: st.DrawFn, quads: bool) -> tuple[Any, ...]:
    def term(strategy: Any) -> Any:
        return draw(st.one_of(strategy, odd)) if draw(st.integers(0, 30)) == 0 else draw(strategy)

    s = term(st.one_of(iris, bnodes, iris))
    p = term(iris) if draw(st.integers(0, 20)) else draw(terms)
    o = term(terms)
    g = draw(graphs) if quads or draw(st.integers(0, 20)) == 0 else None
    return s, p, o, g


@st.composite
def patch_case(draw: st.DrawFn) -> tuple[PatchOptions, dict[str, Any], list[tuple[str, tuple[Any, ...]]]]:
    statement_type = draw(st.sampled_from(list(StatementType)))
    options = PatchOptions(
        stream_type=draw(st.sampled_from(list(StreamType))),
        statement_type=statement_type,
        rdf_star=draw(st.booleans()),
        generalized_statements=draw(st.booleans()),
        max_name_table_size=draw(st.sampled_from([8, 9, 16, 4000])),
        max_prefix_table_size=draw(st.sampled_from([0, 2, 4, 5, 150])),
        max_datatype_table_size=draw(st.sampled_from([0, 1, 2, 32])),
    )
    kwargs = {
        "max_frame_rows": draw(st.integers(1, 40)),
        "max_frame_bytes": draw(st.sampled_from([1, 40, 300, 1 << 20])),
        "append": draw(st.booleans()),
    }
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for _ in range(draw(st.integers(1, 80))):
        kind = draw(st.integers(0, 30))
        if kind == 0:
            calls.append(("end_patch", ()))
        elif kind == 1:
            calls.append(("send", (Header("id", draw(iris)),)))
        elif kind == 2:
            calls.append(("send", (TxStart(),)))
        elif kind == 3:
            calls.append(("prefix_add", ("ex", draw(iris), draw(graphs))))
        else:
            event = Add if kind % 3 else Delete
            calls.append(("send", (event(*draw(statements(statement_type is StatementType.QUADS))),)))
    return options, kwargs, [*calls, ("send", (PatchEnd(),))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patch_case())
def test_random_patch_streams_encode_the_same(case: Any) -> None:
    options, kwargs, calls = case
    pure, native, _ = patch_pair(options, None, **kwargs)
    same_output(pure, native, calls)


@st.composite
def rdf_case(draw: st.DrawFn) -> tuple[RdfOptions, dict[str, Any], list[tuple[str, tuple[Any, ...]]]]:
    physical = draw(st.sampled_from([PhysicalType.TRIPLES, PhysicalType.QUADS, PhysicalType.GRAPHS]))
    logical = {
        PhysicalType.TRIPLES: [LogicalType.FLAT_TRIPLES, LogicalType.GRAPHS],
        PhysicalType.QUADS: [LogicalType.FLAT_QUADS, LogicalType.DATASETS],
        PhysicalType.GRAPHS: [LogicalType.FLAT_QUADS, LogicalType.DATASETS],
    }[physical]
    options = RdfOptions(
        physical_type=physical,
        logical_type=draw(st.sampled_from(logical)),
        rdf_star=draw(st.booleans()),
        generalized_statements=draw(st.booleans()),
        max_name_table_size=draw(st.sampled_from([8, 16, 4000])),
        max_prefix_table_size=draw(st.sampled_from([0, 4, 150])),
        max_datatype_table_size=draw(st.sampled_from([0, 1, 32])),
    )
    kwargs = {"max_frame_rows": draw(st.integers(1, 40)), "max_frame_bytes": draw(st.sampled_from([1, 300, 1 << 20]))}
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for _ in range(draw(st.integers(1, 80))):
        if draw(st.integers(0, 25)) == 0:
            calls.append(("end_frame", ()))
        else:
            calls.append(("statement", draw(statements(physical is not PhysicalType.TRIPLES))))
    return options, kwargs, calls


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rdf_case())
def test_random_rdf_streams_encode_the_same(case: Any) -> None:
    options, kwargs, calls = case
    pure, native, _ = rdf_pair(options, **kwargs)
    same_output(pure, native, calls)


# -- the core is really used -------------------------------------------------------------------


def _bulk(n: int) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        o: Any = [URIRef(f"http://example.org/o/{i % 37}"), BNode(f"b{i % 5}"), Literal(i), Literal("v", lang="en")][
            i % 4
        ]
        g = [DATASET_DEFAULT_GRAPH_ID, URIRef(f"http://example.org/g/{i % 3}")][i % 7 == 0]
        out.append((URIRef(f"http://example.org/s/{i // 3}"), URIRef(f"http://v.example/p{i % 11}"), o, g))
    return out


@pytest.mark.parametrize("names", [8, 4000])
def test_the_core_writes_the_common_rows(names: int) -> None:
    options = PatchOptions(statement_type=StatementType.QUADS, max_name_table_size=names)
    pure, native, counting = patch_pair(options, None, max_frame_rows=100)
    same_output(pure, native, [("send", (Add(*q),)) for q in _bulk(3000)] + [("end_patch", ())])
    assert counting.rows == 3000
    for physical in (PhysicalType.TRIPLES, PhysicalType.QUADS, PhysicalType.GRAPHS):
        logical = LogicalType.FLAT_TRIPLES if physical is PhysicalType.TRIPLES else LogicalType.FLAT_QUADS
        rdf_options = RdfOptions(physical_type=physical, logical_type=logical, max_name_table_size=names)
        rdf_pure, rdf_native, counting = rdf_pair(rdf_options)
        quads = [(s, p, o, g if physical is not PhysicalType.TRIPLES else None) for s, p, o, g in _bulk(2000)]
        same_output(rdf_pure, rdf_native, [("statement", q) for q in quads])
        assert counting.rows == 2000


def test_repeated_literals_compare_as_rdflib_compares_them() -> None:
    # The compiled core compares an object literal with the previous row's without calling
    # rdflib, where the answer is plain; languages that differ only in case, a datatype of
    # another type or value, equal copies and other lexical forms must still repeat (or not)
    # exactly as the pure code, which asks rdflib's Literal.__eq__ and then the adapter's
    # writes_same.
    xsd_int = URIRef(XSD + "integer")
    objects = [
        Literal("a", lang="en"),
        Literal("a", lang="en"),  # an equal copy: repeated
        Literal("a", lang="EN"),  # equal to rdflib (case-insensitive), but writes "EN": written
        Literal("a", lang="de"),
        Literal("a"),
        Literal("a"),
        Literal("a", datatype=URIRef(XSD + "string")),
        Literal("1", datatype=xsd_int, normalize=False),
        Literal("1", datatype=URIRef(XSD + "integer"), normalize=False),  # equal datatypes, other objects
        Literal("01", datatype=xsd_int, normalize=False),  # equal values, other lexical form: written
        Literal("1", datatype=URIRef(XSD + "int"), normalize=False),
        URIRef("http://example.org/1"),
        Literal("http://example.org/1"),
    ]
    s, p = URIRef("http://example.org/s"), URIRef("http://example.org/p")
    options = PatchOptions(statement_type=StatementType.TRIPLES)
    pure, native, counting = patch_pair(options)
    same_output(pure, native, [("add", (s, p, o)) for o in objects] + [("end_patch", ())])
    assert counting.rows == len(objects)
    # The cases cover both answers of rdflib's equality, and a literal equal to the one
    # before that writes differently.
    repeated = [o for o, last in zip(objects[1:], objects, strict=False) if type(o) is type(last) and o == last]
    assert len(repeated) == 4 and Literal("a", lang="EN") in repeated
    # Every term decodes as it was given, language tags in their own case: neither the
    # repeated-term test nor the encoder's equality cache stands an equal term in for it.
    for cls in (PurePatchEncoder, PatchEncoder):
        encoder = cls(options, RdflibTerms())
        for o in [*objects, Literal("b", lang="EN"), Literal("c", lang="en"), Literal("b", lang="en")]:
            encoder.add(URIRef(f"http://example.org/{len(str(o))}"), p, o)
            encoder.add(s, p, o)
        encoder.end_patch()
        encoder.finish()
        decoder = PatchDecoder(RdflibTerms())
        decoder.feed(encoder.take())
        decoder.close()
        got = [(e.o, e.o.language if isinstance(e.o, Literal) else None) for e in decoder if isinstance(e, Add)]
        # RDF 1.1: a simple literal is an xsd:string literal; Jelly writes both one way.
        simple = [
            Literal(str(o)) if isinstance(o, Literal) and o.datatype == URIRef(XSD + "string") else o for o in objects
        ]
        want = [(o, o.language if isinstance(o, Literal) else None) for o in simple]
        want += [(Literal("b", lang="EN"), "EN"), (Literal("c", lang="en"), "en"), (Literal("b", lang="en"), "en")]
        assert got == [w for w in want for _ in range(2)], cls.__name__


# -- the caches' text budget -----------------------------------------------------------------------


@pytest.mark.parametrize("adapter", [NTriplesTerms(), None], ids=["nt", "rdflib"])
def test_long_terms_drop_the_caches_at_the_same_budget(adapter: Any) -> None:
    # IRIs and literals of 8,000 characters, each new about 2 times in 3: the caches pass
    # caches.ENCODER_CACHE_CHARS several times over. Both paths count the text they cache
    # the same way and drop their caches, and the bytes stay the same.
    long = "x" * 8_000
    fed = 0
    calls: list[tuple[str, tuple[Any, ...]]] = []
    for i in range(1_200):
        n = i if i % 3 else i // 2  # every third term one seen before (maybe dropped since)
        s, o = f"http://example.org/{long}/s{n}", f"{long}{n}"
        if adapter is None:
            calls.append(("add", (URIRef(s), URIRef("http://example.org/p"), Literal(o))))
        else:
            calls.append(("add", (f"<{s}>", "<http://example.org/p>", f'"{o}"')))
        fed += len(s) + len(o)
        if i % 50 == 49:
            calls.append(("end_patch", ()))
    assert fed > 2 * caches.ENCODER_CACHE_CHARS
    options = PatchOptions(statement_type=StatementType.TRIPLES)
    pure, native, counting = patch_pair(options, adapter)
    drops = {"pure": 0, "native": 0}
    for name, encoder in (("pure", pure), ("native", native)):
        terms = encoder._terms

        def drop(terms: Any = terms, name: str = name) -> None:
            drops[name] += 1
            type(terms).drop_caches(terms)

        terms.drop_caches = drop  # the compiled core calls it through the attribute too
    same_output(pure, native, [*calls, ("end_patch", ())])
    assert counting.rows == 1_200
    assert drops["native"] >= 2
    assert drops["pure"] >= 2
    for encoder in (pure, native):
        held = encoder._terms._cache_chars
        assert 0 < held <= caches.ENCODER_CACHE_CHARS
