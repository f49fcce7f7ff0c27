"""The memory bound of encoding (issue #13): an encoder's caches hold a bounded amount of text.

An encoder is fed long terms, every one new (a producer of long texts: kilobyte literals,
long IRIs) or a few known ones as new objects each time, under ``tracemalloc``, with each patch's bytes taken and dropped; the peak of
traced memory must stay below the caches' text budget (``caches.ENCODER_CACHE_CHARS``)
plus a fixed part (lookups, a frame, the terms of one statement), far below what the
terms fed take. The caches are bounded by entry count too, but 65,536 entries of such
terms would be GBs. The last test shows the measure catches a caller that keeps the terms.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from rdflib import Literal, URIRef

from patchsync.codec.patch_encoder import PatchEncoder, PurePatchEncoder
from patchsync.codec.rdf_encoder import PureRdfEncoder, RdfEncoder
from patchsync.events import LogicalType, PhysicalType, RdfOptions
from patchsync.options import PatchOptions, StatementType
from patchsync.terms import caches
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

STATEMENTS = 4_000
LENGTH = 4_000  # characters of each IRI and each literal
#: What an encoder may hold besides its caches' text: lookups, a frame, one statement.
FIXED = 8 << 20
BOUND = caches.ENCODER_CACHE_CHARS + FIXED
PATCH = 100  # statements per patch (its bytes are taken and dropped at its end)


def nt_terms(i: int) -> tuple[Any, Any, Any]:
    # A long IRI in a prefix shared by all (the prefix lookup holds one entry), a name and a
    # literal of its own: only the caches can keep them.
    return (f"<http://example.org/{'d' * LENGTH}/s{i}>", "<http://example.org/p>", f'"{i} {"x" * LENGTH}"')


def rdflib_terms(i: int) -> tuple[Any, Any, Any]:
    return (
        URIRef(f"http://example.org/{'d' * LENGTH}/s{i}"),
        URIRef("http://example.org/p"),
        Literal(f"{i} {'x' * LENGTH}"),
    )


def nt_known_terms(i: int) -> tuple[Any, Any, Any]:
    # Ten terms over and over, each time as new string objects (as a parser hands them over):
    # the caches know the terms, but an identity entry would keep each object's text.
    return nt_terms(i % 10)


TERMS: dict[str, Callable[[int], tuple[Any, Any, Any]]] = {
    "nt": nt_terms,
    "nt-known": nt_known_terms,
    "rdflib": rdflib_terms,
}
ADAPTERS: dict[str, Callable[[], Any]] = {"nt": NTriplesTerms, "nt-known": NTriplesTerms, "rdflib": RdflibTerms}


def _encode(
    encoder: Any,
    add: Callable[..., None],
    terms: Callable[[int], tuple[Any, Any, Any]],
    end: Callable[[], None],
    keep: list[Any] | None = None,
) -> int:
    """Feed ``STATEMENTS`` statements of new terms; the peak of traced memory meanwhile."""
    # Warm up: lazy imports and module caches before memory is traced.
    add(*terms(-1))
    end()
    encoder.take()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        for i in range(STATEMENTS):
            statement = terms(i)
            add(*statement)
            if keep is not None:
                keep.append(statement)
            del statement
            if i % PATCH == PATCH - 1:
                end()
                encoder.take()
        end()
        encoder.take()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _fed() -> int:
    return sum(sum(map(len, nt_terms(i))) for i in range(STATEMENTS))


@pytest.mark.parametrize("terms", sorted(TERMS))
@pytest.mark.parametrize("cls", [PatchEncoder, PurePatchEncoder], ids=["default", "pure"])
def test_patch_encoding_holds_a_bounded_amount_of_text(cls: type[PatchEncoder[Any]], terms: str) -> None:
    assert _fed() > 1.5 * BOUND  # the terms fed would not fit
    encoder = cls(PatchOptions(statement_type=StatementType.TRIPLES), ADAPTERS[terms]())
    peak = _encode(encoder, encoder.add, TERMS[terms], encoder.end_patch)
    assert peak < BOUND, f"peak {peak / 2**20:.1f} MiB above {BOUND / 2**20:.1f} MiB"


@pytest.mark.parametrize("cls", [RdfEncoder, PureRdfEncoder], ids=["default", "pure"])
def test_rdf_encoding_holds_a_bounded_amount_of_text(cls: type[RdfEncoder[Any]]) -> None:
    options = RdfOptions(physical_type=PhysicalType.TRIPLES, logical_type=LogicalType.FLAT_TRIPLES)
    encoder = cls(options, RdflibTerms())
    # Frames end by themselves (max_frame_rows, max_frame_bytes): take() drops the finished ones.
    peak = _encode(encoder, encoder.statement, rdflib_terms, lambda: None)
    assert peak < BOUND, f"peak {peak / 2**20:.1f} MiB above {BOUND / 2**20:.1f} MiB"


def test_the_bound_catches_a_caller_that_keeps_the_terms() -> None:
    encoder: PatchEncoder[str] = PatchEncoder(PatchOptions(statement_type=StatementType.TRIPLES), NTriplesTerms())
    kept: list[Any] = []
    peak = _encode(encoder, encoder.add, nt_terms, encoder.end_patch, kept)
    assert len(kept) == STATEMENTS
    assert peak > BOUND
