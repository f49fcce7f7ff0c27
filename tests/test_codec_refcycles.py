"""A decoder dropped is freed at once: no reference cycle leaves it to the garbage collector.

The server decodes every patch it converts (the change feed's text, re-encoding for a
subscriber) with a fresh decoder, whose term caches hold the patch's terms, a megabyte
literal among them. A cycle (a table of the decoder's own bound methods was one) kept each
decoder and its caches alive until the next collection of its generation, and made the
collector find and free them (docs/architecture.md, "Rules of thumb": state kept per row
must not feed CPython's garbage collector).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from patchsync.codec.patch_decoder import PatchDecoder, PurePatchDecoder
from patchsync.codec.rdf_decoder import PureRdfDecoder, RdfDecoder
from patchsync.codec.rdf_encoder import RdfEncoder
from patchsync.events import Add, Header, PatchEnd, RdfOptions, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS, encode_patch, read_payload
from patchsync.options import PatchOptions
from patchsync.serve.feed import patch_text


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic collector off: only reference counts free anything meanwhile."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _payload() -> bytes:
    events: list[Any] = [Header("id", "<urn:x:1>"), TxStart()]
    events += [
        Add(f"<http://ex.org/s{i}>", "<http://ex.org/p>", NT_TERMS.literal("x" * 100, "en"), "<http://ex.org/g>")
        for i in range(50)
    ]
    events += [TxCommit(), PatchEnd()]
    return encode_patch(events, PatchOptions())


def _rdf_frames() -> bytes:
    encoder: RdfEncoder[str] = RdfEncoder(RdfOptions(), NT_TERMS)
    for i in range(50):
        encoder.statement(f"<http://ex.org/s{i}>", "<http://ex.org/p>", NT_TERMS.literal(str(i)), None)
    encoder.finish()
    return encoder.take()


@pytest.mark.parametrize(
    ("make", "data"),
    [
        (lambda: PatchDecoder(NT_TERMS), _payload),
        (lambda: PurePatchDecoder(NT_TERMS), _payload),
        (lambda: RdfDecoder(NT_TERMS, framing="delimited"), _rdf_frames),
        (lambda: PureRdfDecoder(NT_TERMS, framing="delimited"), _rdf_frames),
    ],
    ids=["patch", "patch-pure", "rdf", "rdf-pure"],
)
def test_a_decoder_and_its_term_state_are_freed_when_dropped(
    no_collector: None, make: Callable[[], Any], data: Callable[[], bytes]
) -> None:
    decoder = make()
    decoder.feed(data())
    assert len(list(decoder)) > 50
    terms = weakref.ref(decoder._terms)  # its lookups and term caches
    whole = weakref.ref(decoder)
    del decoder
    assert whole() is None
    assert terms() is None, "the term decoder is kept alive by a reference cycle"


def test_converting_a_patch_leaves_nothing_for_the_collector(no_collector: None) -> None:
    payload = _payload()
    list(read_payload(payload))
    assert gc.collect() == 0
    assert "H id <urn:x:1> ." in patch_text(payload)
    assert gc.collect() == 0
