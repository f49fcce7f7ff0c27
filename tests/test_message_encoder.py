"""Encoding many one-patch messages with one encoder (issue #51, serving a catch-up).

A server re-encodes each patch of another writer's stream as a message of its own; it now
restarts one encoder per message (:meth:`PatchEncoder.restart`, :class:`MessageEncoder`)
instead of building one, and the compiled core unpacks plain N-Triples IRIs and literals
without the adapter's regular expressions. Neither may change a byte: every message must
be exactly what a new encoder writes (:func:`encode_patch`), whatever the messages before
it held or failed on, on the compiled encoder and on the pure one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchsync.codec import _native
from patchsync.codec.patch_encoder import PatchEncoder, PurePatchEncoder
from patchsync.errors import EncodeError, UsageError
from patchsync.events import Add, Delete, Event, Header, PatchEnd, PrefixAdd, PrefixDelete, TxAbort, TxCommit, TxStart
from patchsync.logs.payloads import NT_TERMS, MessageEncoder, encode_patch
from patchsync.options import PatchOptions, StatementType
from patchsync.terms.ntriples import NTriplesTerms

EX = "http://example.org/"

#: Terms of every shape the N-Triples adapter knows, the plain ones and those next to them.
TERMS = [
    f"<{EX}a>",
    f"<{EX}a#b>",
    "<urn:x>",
    "<>",
    "<a>",
    f"<{EX}é>",
    f"<{EX}a\\u0020b>",
    "_:b1",
    '""',
    '"plain"',
    '"é ü"',
    '"with \\"quote\\""',
    '"line\\nbreak"',
    '"hello"@en',
    '"hello"@en-GB',
    f'"1"^^<{EX}int>',
    '"2"^^<http://www.w3.org/2001/XMLSchema#integer>',
    '"s"^^<http://www.w3.org/2001/XMLSchema#string>',
    f"<< <{EX}s> <{EX}p> <{EX}o> >>",
]

#: Strings near the plain shapes that the N-Triples adapter refuses or reads its slow way.
NEAR = [
    "<_:b>",
    "<a b>",
    "<a>b>",
    "<a{b>",
    "<a\\b>",
    "<a",
    "a>",
    "<",
    '"',
    '"a',
    'a"',
    '"a"b"',
    '"a\nb"',
    '"a\rb"',
    '"a\\b"',
    '"a"@',
    '"a"^^<b c>',
    "",
    "plain",
]


def _patch(n: int, s: str, p: str, o: str) -> list[Event]:
    return [
        Header("id", f"<urn:patch:{n}>"),
        Header("prev", f"<urn:patch:{n - 1}>"),
        TxStart(),
        Add(s, p, o, None),
        Delete(f"<{EX}item/{n}>", f"<{EX}p>", o, None),
        TxCommit(),
        PatchEnd(),
    ]


def _patches() -> list[tuple[list[Event], PatchOptions]]:
    """Patches of every row kind, in options that differ from one to the next."""
    triples = PatchOptions(statement_type=StatementType.TRIPLES)
    star = PatchOptions(rdf_star=True, generalized_statements=True)
    out: list[tuple[list[Event], PatchOptions]] = []
    for n, o in enumerate(t for t in TERMS if not t.startswith("_:")):
        out.append((_patch(n + 2, f"<{EX}item/{n}>", f"<{EX}p{n % 3}>", o), star if o.startswith("<<") else triples))
    quads = [
        Header("id", "<urn:q>"),
        PrefixAdd("ex", f"<{EX}>", f"<{EX}g>"),
        Add("_:b1", f"<{EX}p>", '"v"@en', f"<{EX}g>"),
        Add(f"<{EX}s>", f"<{EX}p>", "_:b2", ""),
        PrefixDelete("ex", None, f"<{EX}g>"),
        TxStart(),
        Add(f"<{EX}s>", f"<{EX}p>", f"<{EX}o>", f"<{EX}g>"),
        TxAbort(),
        PatchEnd(),
    ]
    out.append((quads, PatchOptions()))
    many = [Header("id", "<urn:many>"), TxStart()]
    many += [Add(f"<{EX}item/{i}>", f"<http://other{i % 7}.org/p>", f'"{i}"', None) for i in range(300)]
    many += [TxCommit(), PatchEnd()]
    out.append((many, PatchOptions(statement_type=StatementType.TRIPLES, max_name_table_size=64)))
    out.append(([Header("id", "<urn:empty>")], triples))  # no patch end: one is added
    return out


@pytest.mark.parametrize("encoder_type", [PatchEncoder, PurePatchEncoder])
def test_a_restarted_encoder_writes_what_a_new_one_writes(encoder_type: Any) -> None:
    cases = _patches()
    encoder: PatchEncoder[str] = encoder_type(cases[-1][1], NT_TERMS)
    for round_ in range(2):  # the second round meets every case after every other
        for events, options in cases if round_ == 0 else reversed(cases):
            encoder.restart(options)
            fresh: PatchEncoder[str] = encoder_type(options, NT_TERMS)
            for event in events:
                encoder.send(event)
                fresh.send(event)
            if fresh.patches_written == 0:
                encoder.end_patch()
                fresh.end_patch()
            encoder.finish()
            fresh.finish()
            assert encoder.take() == fresh.take()


def test_messages_of_one_encoder_are_those_of_encode_patch() -> None:
    cases = _patches()
    messages = MessageEncoder()
    for events, options in cases + cases[::-1]:
        payload = messages.encode(events, options)
        assert payload == encode_patch(events, options)


def test_a_message_that_failed_leaves_the_next_one_as_a_new_encoder_writes_it() -> None:
    triples = PatchOptions(statement_type=StatementType.TRIPLES)
    good = _patch(2, f"<{EX}s>", f"<{EX}p>", '"o"')
    messages = MessageEncoder()
    messages.encode(good, triples)
    # A named graph in a TRIPLES stream fails half-way through the patch's rows.
    bad = [*good[:4], Add(f"<{EX}s>", f"<{EX}p>", '"o"', f"<{EX}g>"), TxCommit(), PatchEnd()]
    with pytest.raises(EncodeError):
        messages.encode(bad, triples)
    # A transaction left open, then a patch with a new lookup size.
    with pytest.raises(EncodeError):
        messages.encode([Header("id", "<urn:x>"), TxStart(), PatchEnd()], triples)
    for events, options in _patches():
        assert messages.encode(events, options) == encode_patch(events, options)


def test_an_appending_encoder_cannot_restart() -> None:
    encoder: PatchEncoder[str] = PatchEncoder(PatchOptions(), NT_TERMS, append=True)
    with pytest.raises(EncodeError, match="append"):
        encoder.restart(PatchOptions())


def _unpacked(unpack: Any, term: str) -> Any:
    try:
        return unpack(term)
    except (EncodeError, UsageError) as exc:
        return type(exc)


def _native_terms() -> Any:
    return _native.TermEncoder(
        NTriplesTerms(),
        lambda row: None,
        entry_tags=(b"\x01", b"\x02", b"\x03"),
        max_names=16,
        max_prefixes=8,
        max_datatypes=8,
        generalized=True,
        rdf_star=True,
    )


@pytest.mark.parametrize("term", TERMS + NEAR)
def test_the_compiled_n_triples_unpack_is_the_adapters(term: str) -> None:
    assert _unpacked(_native_terms().unpack, term) == _unpacked(NTriplesTerms().unpack, term)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["<", '"']),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF) | st.sampled_from('<>"{}|^`\\_:\r\n ')),
    st.sampled_from([">", '"', "", '"@en', f'"^^<{EX}t>']),
)
def test_the_compiled_n_triples_unpack_is_the_adapters_on_any_text(first: str, body: str, last: str) -> None:
    term = first + body + last
    assert _unpacked(_native_terms().unpack, term) == _unpacked(NTriplesTerms().unpack, term)
