"""Round trips of the Jelly-JVM RDF Patch fixtures through our encoder and decoder.

Every fixture by stream type by statement type by lookup preset. The fixtures are RDF Patch
text read with our text reader; the comparison is row by row, blank node labels included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchsync import EncodeError, PatchOptions, StatementType, StreamType
from patchsync.logs.patch_logs import read_events
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.rdflib_adapter import RdflibTerms

from .helpers import JVM_PATCHES, decode, encode, flatten, in_default_graph, patches

FIXTURES = sorted(JVM_PATCHES.glob("*.rdfp"))
PRESETS = {
    # Jelly-JVM's defaults, a tight preset that forces LRU eviction, and no prefix lookup.
    "default": (4000, 150, 32),
    "small": (16, 4, 2),
    "no-prefixes": (256, 0, 8),
}


def test_fixtures_are_present() -> None:
    assert len(FIXTURES) == 5, f"expected the Jelly-JVM fixtures in {JVM_PATCHES}"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
@pytest.mark.parametrize("stream_type", list(StreamType), ids=lambda v: v.name)
@pytest.mark.parametrize("statement_type", list(StatementType), ids=lambda v: v.name)
@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("adapter", ["rdflib", "ntriples"])
def test_fixture_round_trip(
    fixture: Path, stream_type: StreamType, statement_type: StatementType, preset: str, adapter: str
) -> None:
    terms = NTriplesTerms() if adapter == "ntriples" else None
    original = patches(read_events(fixture, adapter=terms))
    names, prefixes, datatypes = PRESETS[preset]
    options = PatchOptions(
        stream_type=stream_type,
        statement_type=statement_type,
        rdf_star="star" in fixture.stem,
        max_name_table_size=names,
        max_prefix_table_size=prefixes,
        max_datatype_table_size=datatypes,
    )
    stream = [e for group in original for e in [*group, _end()]]
    has_named_graphs = any(getattr(e, "g", None) for e in flatten(original))
    if statement_type is StatementType.TRIPLES and has_named_graphs:
        # Jelly-Patch "Statement types": a TRIPLES stream cannot name a graph.
        with pytest.raises(EncodeError, match="TRIPLES"):
            encode(stream, options, terms, max_frame_rows=5)
        return
    data = encode(stream, options, terms, max_frame_rows=5)
    got = patches(decode(data, terms))
    if statement_type is StatementType.QUADS:
        # In a QUADS stream a triple is a quad in the default graph.
        original = in_default_graph(original, (terms or RdflibTerms()).default_graph())
    if stream_type is StreamType.FLAT:
        assert got == [flatten(original)]
    else:
        assert got == original


def _end() -> object:
    from patchsync import PatchEnd

    return PatchEnd()
