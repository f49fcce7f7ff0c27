#!/usr/bin/env python3
"""Generate the Jelly-Patch conformance suite in ``conformance/patch/``.

Usage::

    python scripts/gen_patch_conformance.py [--out DIR]

The suite mirrors the layout of the Jelly-RDF conformance suite: ``from_jelly/`` holds
Jelly-Patch inputs (``in.jellyp``) and, for positive cases, the expected RDF Patch text of
every patch (``out_NNN.rdfp``); ``to_jelly/`` holds producer options (``options.jellyp``)
and RDF Patch inputs (``in_NNN.rdfp``). Each directory has a ``manifest.ttl``.
Every case is tagged (``jellyt:coversRule``) with the rules of the specification it covers,
from the rule list in ``patch_conformance_rules.py`` (written out as ``rules.ttl``); the
README's coverage table is generated from the same tags.

Inputs are built row by row with the generated protobuf classes, so the script can write
streams that break the specification on purpose (our encoder refuses to). The expected
outputs are written here by hand, as text: they never come from the decoder under test.
The output is deterministic; the test suite checks that the committed tree is up to date.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from patch_conformance_rules import RULES, RULES_NS, SPECS, check_ids, rules_for  # noqa: E402

from patchsync._proto import patch_pb2, rdf_pb2  # noqa: E402

DEFAULT_OUT = ROOT / "conformance" / "patch"

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"

STREAM_TYPES = {"FRAME": 1, "FLAT": 2, "PUNCTUATED": 3}
STATEMENT_TYPES = {"TRIPLES": 1, "QUADS": 2}

# ---------------------------------------------------------------------------------------
# Building rows
#
# A term is a (kind, value) pair whose kind is the oneof field suffix: "iri", "bnode",
# "literal", "triple_term" or "default_graph". ``None`` leaves the oneof unset (a repeated
# term, or a missing value in the negative cases).
# ---------------------------------------------------------------------------------------

Term = tuple[str, Any]
Row = Any  # patch_pb2.RdfPatchRow


def I(prefix_id: int = 0, name_id: int = 0) -> Term:  # noqa: E743 - reads like the spec
    return ("iri", rdf_pb2.RdfIri(prefix_id=prefix_id, name_id=name_id))


def B(label: str) -> Term:
    return ("bnode", label)


def L(lex: str, lang: str | None = None, dt: int | None = None) -> Term:
    lit = rdf_pb2.RdfLiteral(lex=lex)
    if lang is not None:
        lit.langtag = lang
    if dt is not None:
        lit.datatype = dt
    return ("literal", lit)


def Q(s: Term | None, p: Term | None, o: Term | None) -> Term:
    triple = rdf_pb2.RdfTriple()
    _put(triple, "s", s)
    _put(triple, "p", p)
    _put(triple, "o", o)
    return ("triple_term", triple)


DG: Term = ("default_graph", None)


def _put(msg: Any, position: str, term: Term | None) -> None:
    if term is None:
        return
    kind, value = term
    name = f"{position}_{kind}"
    if kind == "bnode":
        setattr(msg, name, value)
    elif kind == "default_graph":
        getattr(msg, name).SetInParent()
    else:
        getattr(msg, name).CopyFrom(value)


def OPTS(
    stream: str | int = "FRAME",
    statement: str | int = "TRIPLES",
    *,
    names: int = 16,
    prefixes: int = 8,
    datatypes: int = 4,
    generalized: bool = False,
    rdf_star: bool = False,
    version: int = 1,
) -> Row:
    opts = patch_pb2.RdfPatchOptions(
        stream_type=STREAM_TYPES[stream] if isinstance(stream, str) else stream,
        statement_type=STATEMENT_TYPES[statement] if isinstance(statement, str) else statement,
        generalized_statements=generalized,
        rdf_star=rdf_star,
        max_name_table_size=names,
        max_prefix_table_size=prefixes,
        max_datatype_table_size=datatypes,
        version=version,
    )
    return patch_pb2.RdfPatchRow(options=opts)


def _quad(s: Term | None, p: Term | None, o: Term | None, g: Term | None) -> Any:
    quad = rdf_pb2.RdfQuad()
    _put(quad, "s", s)
    _put(quad, "p", p)
    _put(quad, "o", o)
    _put(quad, "g", g)
    return quad


def A(s: Term | None = None, p: Term | None = None, o: Term | None = None, g: Term | None = None) -> Row:
    row = patch_pb2.RdfPatchRow()
    row.statement_add.CopyFrom(_quad(s, p, o, g))
    return row


def D(s: Term | None = None, p: Term | None = None, o: Term | None = None, g: Term | None = None) -> Row:
    row = patch_pb2.RdfPatchRow()
    row.statement_delete.CopyFrom(_quad(s, p, o, g))
    return row


def _namespace(name: str, value: Term | None, g: Term | None) -> Any:
    ns = patch_pb2.RdfPatchNamespace(name=name)
    if value is not None:
        ns.value.CopyFrom(value[1])
    _put(ns, "g", g)
    return ns


def PA(name: str, value: Term | None = None, g: Term | None = None) -> Row:
    row = patch_pb2.RdfPatchRow()
    row.namespace_add.CopyFrom(_namespace(name, value, g))
    return row


def PD(name: str, value: Term | None = None, g: Term | None = None) -> Row:
    row = patch_pb2.RdfPatchRow()
    row.namespace_delete.CopyFrom(_namespace(name, value, g))
    return row


def H(key: str, value: Term | None = None) -> Row:
    header = patch_pb2.RdfPatchHeader(key=key)
    _put(header, "h", value)
    row = patch_pb2.RdfPatchRow()
    row.header.CopyFrom(header)
    return row


def _empty_field(name: str) -> Row:
    row = patch_pb2.RdfPatchRow()
    getattr(row, name).SetInParent()
    return row


def TX() -> Row:
    return _empty_field("transaction_start")


def TC() -> Row:
    return _empty_field("transaction_commit")


def TA() -> Row:
    return _empty_field("transaction_abort")


def PUNCT() -> Row:
    return _empty_field("punctuation")


def EMPTY() -> Row:
    return patch_pb2.RdfPatchRow()


def N(value: str, id: int = 0) -> Row:
    return patch_pb2.RdfPatchRow(name=rdf_pb2.RdfNameEntry(id=id, value=value))


def P(value: str, id: int = 0) -> Row:
    return patch_pb2.RdfPatchRow(prefix=rdf_pb2.RdfPrefixEntry(id=id, value=value))


def DT(value: str, id: int = 0) -> Row:
    return patch_pb2.RdfPatchRow(datatype=rdf_pb2.RdfDatatypeEntry(id=id, value=value))


# ---------------------------------------------------------------------------------------
# Serializing
# ---------------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame_bytes(rows: Sequence[Row]) -> bytes:
    frame = patch_pb2.RdfPatchFrame()
    for row in rows:
        frame.rows.add().CopyFrom(row)
    return frame.SerializeToString(deterministic=True)


def stream_bytes(frames: Sequence[Sequence[Row]], *, delimited: bool = True) -> bytes:
    if not delimited:
        if len(frames) != 1:
            raise ValueError("a non-delimited stream holds exactly one frame")
        return frame_bytes(frames[0])
    out = bytearray()
    for rows in frames:
        payload = frame_bytes(rows)
        out += varint(len(payload)) + payload
    return bytes(out)


def options_text(row: Row) -> str:
    """A sentence describing an options row, for rdfs:comment."""
    o = row.options
    stream = {v: k for k, v in STREAM_TYPES.items()}.get(o.stream_type, str(o.stream_type))
    stmt = {v: k for k, v in STATEMENT_TYPES.items()}.get(o.statement_type, str(o.statement_type))
    return (
        f"Stream options are: stream_type={stream}, statement_type={stmt}, "
        f"generalized_statements={str(o.generalized_statements).lower()}, "
        f"rdf_star={str(o.rdf_star).lower()}, max_name_table_size={o.max_name_table_size}, "
        f"max_prefix_table_size={o.max_prefix_table_size}, "
        f"max_datatype_table_size={o.max_datatype_table_size}, version={o.version}."
    )


def describe_frames(frames: Sequence[Sequence[Row]]) -> str:
    """The rdfs:comment of a from_jelly case: its first options row and its number of frames."""
    first = next((row for rows in frames for row in rows if row.WhichOneof("row") == "options"), None)
    text = options_text(first) if first is not None else "The stream has no options row."
    count = len(frames)
    return f"{text} {count} frame{'s' if count != 1 else ''}."


# ---------------------------------------------------------------------------------------
# Case registry
# ---------------------------------------------------------------------------------------


@dataclass
class FromCase:
    group: str
    positive: bool
    name: str
    frames: list[list[Row]]
    outputs: list[str] = field(default_factory=list)
    delimited: bool = True
    transform: Callable[[bytes], bytes] | None = None
    comment: str | None = None
    number: int = 0

    @property
    def id(self) -> str:
        return f"{self.group}/{'pos' if self.positive else 'neg'}_{self.number:03d}"

    @property
    def rules(self) -> tuple[str, ...]:
        return rules_for(self.name)


@dataclass
class ToCase:
    group: str
    positive: bool
    name: str
    options: Row
    inputs: list[str]
    number: int = 0

    @property
    def id(self) -> str:
        return f"{self.group}/{'pos' if self.positive else 'neg'}_{self.number:03d}"

    @property
    def rules(self) -> tuple[str, ...]:
        return rules_for(self.name)


FROM_CASES: list[FromCase] = []
TO_CASES: list[ToCase] = []


def _number(cases: Sequence[Any], case: Any) -> None:
    case.number = 1 + sum(1 for c in cases if c.group == case.group and c.positive == case.positive)


def _text(block: str) -> str:
    """An expected-output block: dedented, one row per line, ending in a newline."""
    body = textwrap.dedent(block).strip("\n")
    return body + "\n" if body else ""


def pos(group: str, name: str, frames: list[list[Row]], outputs: Sequence[str], **kw: Any) -> None:
    case = FromCase(group, True, name, frames, [_text(o) for o in outputs], **kw)
    _number(FROM_CASES, case)
    FROM_CASES.append(case)


def neg(group: str, name: str, frames: list[list[Row]], **kw: Any) -> None:
    case = FromCase(group, False, name, frames, **kw)
    _number(FROM_CASES, case)
    FROM_CASES.append(case)


def to_pos(group: str, name: str, options: Row, inputs: Sequence[str]) -> None:
    case = ToCase(group, True, name, options, [_text(i) for i in inputs])
    _number(TO_CASES, case)
    TO_CASES.append(case)


def to_neg(group: str, name: str, options: Row, inputs: Sequence[str]) -> None:
    case = ToCase(group, False, name, options, [_text(i) for i in inputs])
    _number(TO_CASES, case)
    TO_CASES.append(case)


# =======================================================================================
# from_jelly cases
#
# The expected outputs below are hand-written RDF Patch text, one file per patch. Terms
# are written out in full; a row without a graph is a triple (TRIPLES streams) or a quad
# in the default graph (QUADS streams). RDF Patch text has no place for the optional IRI
# of a PD row, so the expected PD rows carry only the name (and graph).
# =======================================================================================

# -- triples_frame ------------------------------------------------------------------------

pos(
    "triples_frame",
    "Single frame, a few basic triples, prefix table enabled. "
    "PATCH_STREAM_TYPE_FRAME: every RdfPatchFrame message is a single, complete RDF Patch.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            A(I(1, 1), I(1, 2), I(1, 4)),
            A(B("b1"), I(1, 2), L("hello")),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        A _:b1 <http://example.org/p> "hello" .
        """
    ],
)

pos(
    "triples_frame",
    "Three frames are three patches with A and D rows; lookup entries defined in the first frame are "
    "used in later frames. Every RdfPatchFrame message is a single, complete RDF Patch.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3))],
        [N("o2"), D(I(1, 1), I(1, 2), I(1, 3)), A(I(1, 1), I(1, 2), I(1, 4))],
        [D(I(1, 1), I(1, 2), I(1, 4))],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        """,
    ],
)

pos(
    "triples_frame",
    "Four frames: the first holds only the options row, the third is empty and the fourth holds only a "
    "lookup entry; each is an empty patch. Every RdfPatchFrame message is a single, complete RDF Patch.",
    [
        [OPTS("FRAME", "TRIPLES")],
        [P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3))],
        [],
        [N("unused")],
    ],
    [
        "",
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        "",
        "",
    ],
)

neg(
    "triples_frame",
    "A punctuation row in a FRAME stream. The stream MUST NOT contain any RdfPatchRow messages with the "
    "punctuation field set.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3)), PUNCT()]],
)

# -- quads_frame ------------------------------------------------------------------------

pos(
    "quads_frame",
    "Single frame of quads in the default graph, a named graph and a blank-node graph, with A and D rows. "
    "STATEMENT_TYPE_QUADS: the RdfQuad message MUST be interpreted as an RDF quad.",
    [
        [
            OPTS("FRAME", "QUADS"),
            P(EX),
            N("s1"),
            N("p1"),
            N("o1"),
            N("g1"),
            A(I(1, 1), I(1, 2), I(1, 3), DG),
            A(I(1, 1), I(1, 2), I(1, 3), I(1, 4)),
            A(I(1, 1), I(1, 2), L("v", lang="en"), B("g2")),
            D(B("x"), I(1, 2), I(1, 3), DG),
        ]
    ],
    [
        """
        A <http://example.org/s1> <http://example.org/p1> <http://example.org/o1> .
        A <http://example.org/s1> <http://example.org/p1> <http://example.org/o1> <http://example.org/g1> .
        A <http://example.org/s1> <http://example.org/p1> "v"@en _:g2 .
        D _:x <http://example.org/p1> <http://example.org/o1> .
        """
    ],
)

pos(
    "quads_frame",
    "Three frames of quads are three patches: a quad is added in a named graph, moved to the default graph "
    "and deleted. Every RdfPatchFrame message is a single, complete RDF Patch.",
    [
        [OPTS("FRAME", "QUADS"), P(EX), N("s"), N("p"), N("o"), N("g"), A(I(1, 1), I(1, 2), I(1, 3), I(1, 4))],
        [D(I(1, 1), I(1, 2), I(1, 3), I(1, 4)), A(I(1, 1), I(1, 2), I(1, 3), DG)],
        [D(I(1, 1), I(1, 2), I(1, 3), DG)],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

# -- triples_punctuated -------------------------------------------------------------------

pos(
    "triples_punctuated",
    "One frame holding two patches: punctuation in the middle and at the end of the frame. PUNCTUATED: the "
    "stream is a sequence of RDF Patches, marked by punctuation marks.",
    [
        [
            OPTS("PUNCTUATED", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            PUNCT(),
            A(I(1, 1), I(1, 2), I(1, 4)),
            D(I(1, 1), I(1, 2), I(1, 3)),
            PUNCT(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

pos(
    "triples_punctuated",
    "One patch spread over three frames, ended by a punctuation mark at the start of the third frame. "
    "There are no additional restrictions on where the punctuation mark is placed within the frame.",
    [
        [
            OPTS("PUNCTUATED", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o1"),
            N("o2"),
            N("o3"),
            N("o4"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            A(I(1, 1), I(1, 2), I(1, 4)),
        ],
        [A(I(1, 1), I(1, 2), I(1, 5))],
        [PUNCT(), A(I(1, 1), I(1, 2), I(1, 6)), PUNCT()],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o1> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o3> .
        """,
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o4> .
        """,
    ],
)

pos(
    "triples_punctuated",
    "The stream starts with a punctuation mark, which ends an empty patch. If you start the stream with a "
    "punctuation mark, this would be interpreted as an empty RDF Patch.",
    [[OPTS("PUNCTUATED", "TRIPLES"), PUNCT(), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3)), PUNCT()]],
    [
        "",
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

pos(
    "triples_punctuated",
    "Two consecutive punctuation marks (in different frames) enclose an empty patch. The punctuation mark "
    "MUST occur at the end of an RDF Patch.",
    [
        [OPTS("PUNCTUATED", "TRIPLES"), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3)), PUNCT()],
        [PUNCT()],
        [D(I(1, 1), I(1, 2), I(1, 3)), PUNCT()],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        "",
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

pos(
    "triples_punctuated",
    "A lookup entry and a repeated options row after the last punctuation mark do not open a patch: they are "
    "not RDF Patch rows (the punctuation mark MUST occur at the end of an RDF Patch).",
    [
        [
            OPTS("PUNCTUATED", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            PUNCT(),
            N("unused"),
            OPTS("PUNCTUATED", "TRIPLES"),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)

pos(
    "triples_punctuated",
    "A PUNCTUATED stream holding only the options row is a sequence of zero patches. PUNCTUATED: the stream "
    "is a sequence of RDF Patches, marked by punctuation marks.",
    [[OPTS("PUNCTUATED", "TRIPLES")]],
    [],
)

neg(
    "triples_punctuated",
    "A statement after the last punctuation mark: the stream ends inside a patch. The punctuation mark MUST "
    "occur at the end of an RDF Patch.",
    [
        [
            OPTS("PUNCTUATED", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            PUNCT(),
            D(I(1, 1), I(1, 2), I(1, 3)),
        ]
    ],
)

# -- quads_punctuated ---------------------------------------------------------------------

pos(
    "quads_punctuated",
    "Two frames, two patches of quads in named and default graphs. PUNCTUATED: the stream is a sequence of "
    "RDF Patches, marked by punctuation marks.",
    [
        [
            OPTS("PUNCTUATED", "QUADS"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("g1"),
            N("g2"),
            A(I(1, 1), I(1, 2), I(1, 3), I(1, 4)),
            A(I(1, 1), I(1, 2), I(1, 3), DG),
            PUNCT(),
        ],
        [D(I(1, 1), I(1, 2), I(1, 3), I(1, 4)), A(I(1, 1), I(1, 2), I(1, 3), I(1, 5)), PUNCT()],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g2> .
        """,
    ],
)

pos(
    "quads_punctuated",
    "A punctuation mark in the middle of a frame; the next patch continues into the following frame, which "
    "starts with its punctuation mark. The punctuation mark can be placed at the beginning, middle, or end "
    "of the frame.",
    [
        [
            OPTS("PUNCTUATED", "QUADS"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("g1"),
            N("g2"),
            A(I(1, 1), I(1, 2), I(1, 3), I(1, 4)),
            PUNCT(),
            A(I(1, 1), I(1, 2), I(1, 3), I(1, 5)),
        ],
        [PUNCT()],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
        """,
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g2> .
        """,
    ],
)

# -- flat -------------------------------------------------------------------------------

pos(
    "flat",
    "TRIPLES, one frame. PATCH_STREAM_TYPE_FLAT: the entire stream is a single, complete RDF Patch.",
    [
        [
            OPTS("FLAT", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            D(I(1, 1), I(1, 2), L("old")),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        D <http://example.org/s> <http://example.org/p> "old" .
        """
    ],
)

pos(
    "flat",
    "QUADS, four frames (one of them empty) make one patch. PATCH_STREAM_TYPE_FLAT: the entire stream is a "
    "single, complete RDF Patch.",
    [
        [OPTS("FLAT", "QUADS"), P(EX), N("s"), N("p"), N("o"), N("g1"), A(I(1, 1), I(1, 2), I(1, 3), I(1, 4))],
        [N("o2"), A(I(1, 1), I(1, 2), I(1, 5), DG)],
        [],
        [D(I(1, 1), I(1, 2), I(1, 3), I(1, 4))],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
        """
    ],
)

pos(
    "flat",
    "A FLAT stream holding only the options row is one empty patch. PATCH_STREAM_TYPE_FLAT: the entire "
    "stream is a single, complete RDF Patch.",
    [[OPTS("FLAT", "QUADS")]],
    [""],
)

neg(
    "flat",
    "A punctuation row in a FLAT stream. The stream MUST NOT contain any RdfPatchRow messages with the "
    "punctuation field set.",
    [[OPTS("FLAT", "TRIPLES"), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3))], [PUNCT()]],
)

# -- lookups ----------------------------------------------------------------------------

pos(
    "lookups",
    "Lookup entry ids of 0 in all three lookups. If the index is set to 0 in the first entry of the lookup "
    "in the stream, it MUST be interpreted as the value 1; in any other entry it MUST be interpreted as "
    "previous_index + 1.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=4, datatypes=4),
            P("http://a.example/"),
            P("http://b.example/"),
            N("x"),
            N("y"),
            N("z"),
            DT(XSD + "integer"),
            DT(XSD + "boolean"),
            A(I(1, 1), I(2, 2), L("5", dt=1)),
            A(I(2, 3), I(1, 2), L("true", dt=2)),
        ]
    ],
    [
        """
        A <http://a.example/x> <http://b.example/y> "5"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://b.example/z> <http://a.example/y> "true"^^<http://www.w3.org/2001/XMLSchema#boolean> .
        """
    ],
)

pos(
    "lookups",
    "Explicit name entry ids out of order, a 0 id after an explicit id (previous_index + 1), and an entry "
    "replaced later in the stream. The modification MUST be applied to all subsequent rows in the stream.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0),
            N("http://example.org/five", id=5),
            N("http://example.org/six"),
            N("http://example.org/two", id=2),
            N("http://example.org/three"),
            A(I(0, 5), I(0, 6), I(0, 2)),
            A(I(0, 3), I(0, 6), I(0, 5)),
            N("http://example.org/new-five", id=5),
            A(I(0, 5), I(0, 6), I(0, 2)),
        ]
    ],
    [
        """
        A <http://example.org/five> <http://example.org/six> <http://example.org/two> .
        A <http://example.org/three> <http://example.org/six> <http://example.org/five> .
        A <http://example.org/new-five> <http://example.org/six> <http://example.org/two> .
        """
    ],
)

pos(
    "lookups",
    "Prefix lookup disabled (max_prefix_table_size 0): names hold whole IRIs. If 0 appears in the first IRI "
    "of the stream (and in any subsequent IRI), this MUST be interpreted as an empty prefix.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0),
            N("http://example.org/s"),
            N("http://example.org/p"),
            N("http://example.org/o"),
            A(I(0, 0), I(0, 0), I(0, 0)),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)

pos(
    "lookups",
    "prefix_id 0 in the first IRI is the empty prefix even with the prefix lookup enabled; later a 0 "
    "prefix_id MUST be interpreted as the same value as in the last explicitly specified (non-zero) prefix "
    "identifier.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=4, datatypes=0),
            P("http://a.example/"),
            P("http://b.example/"),
            N("urn:x:whole"),
            N("s"),
            N("p"),
            N("o"),
            A(I(0, 1), I(2, 3), I(0, 4)),
            A(I(1, 2), I(0, 3), I(0, 4)),
        ]
    ],
    [
        """
        A <urn:x:whole> <http://b.example/p> <http://b.example/o> .
        A <http://a.example/s> <http://a.example/p> <http://a.example/o> .
        """
    ],
)

pos(
    "lookups",
    "name_id 0 MUST be interpreted as previous_name_id + 1: 1 in the first IRI of the stream, incrementing "
    "for each 0 in a row, and continuing from an explicit name_id.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=0),
            P(EX),
            N("a"),
            N("b"),
            N("c"),
            N("d"),
            N("e"),
            N("f"),
            A(I(1, 0), I(0, 0), I(0, 0)),
            A(I(0, 0), I(0, 0), I(0, 0)),
            A(I(0, 2), I(0, 0), I(0, 5)),
            A(I(0, 0), I(0, 1), I(0, 0)),
        ]
    ],
    [
        """
        A <http://example.org/a> <http://example.org/b> <http://example.org/c> .
        A <http://example.org/d> <http://example.org/e> <http://example.org/f> .
        A <http://example.org/b> <http://example.org/c> <http://example.org/e> .
        A <http://example.org/f> <http://example.org/a> <http://example.org/b> .
        """
    ],
)

pos(
    "lookups",
    "Lookups at their maximum sizes: 8 names (the smallest allowed max_name_table_size), 1 prefix and 1 "
    "datatype, then entries replaced in place. The size of the lookup MUST NOT exceed the value of this field.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=1),
            P(EX),
            N("n1"),
            N("n2"),
            N("n3"),
            N("n4"),
            N("n5"),
            N("n6"),
            N("n7"),
            N("n8"),
            DT(XSD + "integer"),
            A(I(1, 1), I(1, 2), L("1", dt=1)),
            A(I(1, 8), I(1, 7), I(1, 6)),
            P("http://other.example/", id=1),
            N("m1", id=1),
            DT(XSD + "decimal", id=1),
            A(I(1, 1), I(1, 2), L("1.5", dt=1)),
        ]
    ],
    [
        """
        A <http://example.org/n1> <http://example.org/n2> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://example.org/n8> <http://example.org/n7> <http://example.org/n6> .
        A <http://other.example/m1> <http://other.example/n2> "1.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .
        """
    ],
)

pos(
    "lookups",
    "Lookup entries and the 0-id state carry across the frames of a FRAME stream (an entry id 0 and a "
    "name_id 0 in frame 2 continue from frame 1). The modification MUST be applied to all subsequent rows "
    "in the stream.",
    [
        [OPTS("FRAME", "TRIPLES", names=8, prefixes=1), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(0, 0), I(0, 0))],
        [N("x"), A(I(0, 0), I(0, 2), I(0, 3))],
        [D(I(0, 1), I(0, 0), I(0, 0))],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        A <http://example.org/x> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

_SPO_8 = [N("s"), N("p"), N("o")]

neg(
    "lookups",
    "Name entry with id 9 in a stream whose max_name_table_size is 8. The size of the lookup MUST NOT exceed "
    "the value of this field.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=2, datatypes=1), P(EX), N("nine", id=9)]],
)

neg(
    "lookups",
    "Nine name entries with id 0 in a stream whose max_name_table_size is 8: the ninth is entry 9. The size "
    "of the lookup MUST NOT exceed the value of this field.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=2, datatypes=1), *[N(f"n{i}") for i in range(1, 10)]]],
)

neg(
    "lookups",
    "Prefix entry in a stream whose max_prefix_table_size is 0. If the field is set to 0, the prefix lookup "
    "MUST NOT be used in the stream.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3))]],
)

neg(
    "lookups",
    "IRI with prefix_id 1 in a stream whose max_prefix_table_size is 0. If the field is set to 0, the prefix "
    "lookup MUST NOT be used in the stream.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3))]],
)

neg(
    "lookups",
    "Datatype entry in a stream whose max_datatype_table_size is 0. If the field is set to 0, the datatype "
    "lookup MUST NOT be used in the stream.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0), DT(XSD + "integer")]],
)

neg(
    "lookups",
    "Literal with datatype 0. The value of this field MUST be greater than 0 and it MUST correspond to a "
    "valid entry in the datatype lookup.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=1),
            P(EX),
            *_SPO_8,
            DT(XSD + "integer"),
            A(I(1, 1), I(1, 2), L("1", dt=0)),
        ]
    ],
)

neg(
    "lookups",
    "IRI with name_id 9 in a stream whose max_name_table_size is 8: a reference outside the lookup. The "
    "producer of the stream MUST NOT exceed the maximum size of the lookup.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=1), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 9))]],
)

neg(
    "lookups",
    "IRI with name_id 3 when only names 1 and 2 are defined. The first use of a given lookup element MUST be "
    "after it is defined in the lookup; the consumer SHOULD throw an error.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=1), P(EX), N("s"), N("p"), A(I(1, 1), I(1, 2), I(1, 3))]],
)

neg(
    "lookups",
    "IRI with prefix_id 3 in a stream whose max_prefix_table_size is 2. The producer of the stream MUST NOT "
    "exceed the maximum size of the lookup.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=2), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(3, 3))]],
)

neg(
    "lookups",
    "Misused name_id 0: previous_name_id + 1 points past the defined names. The first use of a given lookup "
    "element MUST be after it is defined in the lookup.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=1), P(EX), N("s"), N("p"), A(I(1, 1), I(1, 2), I(1, 0))]],
)

neg(
    "lookups",
    "Misused name_id 0 at the end of a full name table: previous_name_id + 1 is 9, beyond max_name_table_size "
    "8. The producer of the stream MUST NOT exceed the maximum size of the lookup.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1),
            P(EX),
            *[N(f"n{i}") for i in range(1, 9)],
            A(I(1, 6), I(1, 7), I(1, 8)),
            A(I(1, 0), I(1, 2), I(1, 3)),
        ]
    ],
)

neg(
    "lookups",
    "Literal with datatype 2 in a stream whose max_datatype_table_size is 1. The value MUST correspond to a "
    "valid entry in the datatype lookup.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=1),
            P(EX),
            *_SPO_8,
            DT(XSD + "integer"),
            A(I(1, 1), I(1, 2), L("1", dt=2)),
        ]
    ],
)

neg(
    "lookups",
    "Literal with datatype 2 when only datatype 1 is defined. The value MUST correspond to a valid entry in "
    "the datatype lookup.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=4),
            P(EX),
            *_SPO_8,
            DT(XSD + "integer"),
            A(I(1, 1), I(1, 2), L("1", dt=2)),
        ]
    ],
)

neg(
    "lookups",
    "Prefix entry with id 3 in a stream whose max_prefix_table_size is 2. The size of the lookup MUST NOT "
    "exceed the value of this field.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=2), P(EX, id=3)]],
)

neg(
    "lookups",
    "Two datatype entries in a stream whose max_datatype_table_size is 1 (the second gets id 2). The size of "
    "the lookup MUST NOT exceed the value of this field.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=1), DT(XSD + "integer"), DT(XSD + "decimal")]],
)

neg(
    "lookups",
    "IRI with prefix_id 2 when only prefix 1 is defined. The first use of a given lookup element MUST be "
    "after it is defined in the lookup.",
    [[OPTS("FRAME", "TRIPLES", names=8, prefixes=2), P(EX), *_SPO_8, A(I(1, 1), I(2, 2), I(1, 3))]],
)

# -- repeated ----------------------------------------------------------------------------

pos(
    "repeated",
    "Repeated subject, predicate and object in TRIPLES, including consecutive repeats and a fully repeated "
    "statement. A repeated term in a given position MAY occur after a repeated term.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            N("p2"),
            N("s2"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            A(None, None, I(1, 4)),
            A(None, I(1, 5), None),
            A(I(1, 6), None, None),
            A(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        A <http://example.org/s> <http://example.org/p2> <http://example.org/o2> .
        A <http://example.org/s2> <http://example.org/p2> <http://example.org/o2> .
        A <http://example.org/s2> <http://example.org/p2> <http://example.org/o2> .
        """
    ],
)

pos(
    "repeated",
    "Repeated terms are shared between add and delete rows. An empty term MUST be interpreted as a repeated "
    "term from the last RdfQuad, regardless of whether both operations are of the same type.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            N("p2"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            D(None, None, I(1, 4)),
            A(None, I(1, 5), None),
            D(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        A <http://example.org/s> <http://example.org/p2> <http://example.org/o2> .
        D <http://example.org/s> <http://example.org/p2> <http://example.org/o2> .
        """
    ],
)

pos(
    "repeated",
    "Repeated terms across frame boundaries of a FRAME stream. Repeated terms MAY occur in the first "
    "statement row of a stream frame; they MUST be interpreted as repeated from the previous stream frame.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), N("s"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3))],
        [D()],
        [A(None, None, L("x"))],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        A <http://example.org/s> <http://example.org/p> "x" .
        """,
    ],
)

pos(
    "repeated",
    "QUADS: an unset graph in a quad repeats the graph of the preceding namespace row. It MUST be interpreted "
    "as a repeated graph term from the last RdfQuad or RdfNamespaceDeclaration message in the stream.",
    [
        [
            OPTS("FRAME", "QUADS"),
            P(EX),
            N(""),
            N("s"),
            N("p"),
            N("o"),
            N("g"),
            PA("ex", I(1, 1), I(1, 5)),
            A(I(1, 2), I(1, 3), I(1, 4)),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/> <http://example.org/g> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        """
    ],
)

pos(
    "repeated",
    "QUADS: an unset graph in PA and PD rows repeats the graph of the preceding quad (a blank node, then the "
    "default graph). The graph of RdfPatchNamespace MUST be interpreted in the same manner as if it appeared "
    "in a RdfQuad message.",
    [
        [
            OPTS("FRAME", "QUADS"),
            P(EX),
            N(""),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            A(I(1, 2), I(1, 3), I(1, 4), B("G")),
            PA("ex", I(1, 1)),
            PD("ex"),
            A(I(1, 2), I(1, 3), I(1, 5), DG),
            PD("ex"),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> _:G .
        PA "ex" <http://example.org/> _:G .
        PD "ex" _:G .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        PD "ex" .
        """
    ],
)

pos(
    "repeated",
    "TRIPLES: a graph set on a statement is ignored, and an unset graph in the first statement is no "
    "repeated term. In TRIPLES the graph oneof MUST NOT be set; if it is set, the consumer SHOULD ignore the "
    "graph term.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            N("g"),
            A(I(1, 1), I(1, 2), I(1, 3)),
            A(I(1, 1), I(1, 2), I(1, 4), I(1, 5)),
            D(I(1, 1), I(1, 2), I(1, 3), DG),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)

pos(
    "repeated",
    "QUADS: repeated graph (default and named), a fully repeated quad, and repeats after a graph change. If "
    "the graph oneof is not set, it MUST be interpreted as a repeated graph term.",
    [
        [
            OPTS("FRAME", "QUADS"),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            N("g1"),
            N("s2"),
            A(I(1, 1), I(1, 2), I(1, 3), DG),
            A(None, None, I(1, 4), None),
            D(),
            A(None, None, None, I(1, 5)),
            A(I(1, 6), None, None, None),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> <http://example.org/g1> .
        A <http://example.org/s2> <http://example.org/p> <http://example.org/o2> <http://example.org/g1> .
        """
    ],
)

pos(
    "repeated",
    "Header and namespace rows do not change the repeated subject, predicate and object: the statement after "
    "them repeats the previous statement. Repeated term encoding MUST NOT be used for the value oneof in the "
    "RdfPatchHeader message.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N(""),
            N("s"),
            N("p"),
            N("o"),
            N("x"),
            A(I(1, 2), I(1, 3), I(1, 4)),
            H("k", I(1, 5)),
            PA("ex", I(1, 1)),
            D(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        H k <http://example.org/x> .
        PA "ex" <http://example.org/> .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)

neg(
    "repeated",
    "TRIPLES: the first statement of the stream has no subject. Repeated terms MUST NOT occur in the first "
    "statement row of the stream.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(None, I(1, 2), I(1, 3))]],
)

neg(
    "repeated",
    "TRIPLES: the first statement of the stream (a delete) has no object. Repeated terms MUST NOT occur in the "
    "first statement row of the stream.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, D(I(1, 1), I(1, 2), None)]],
)

neg(
    "repeated",
    "QUADS: the first quad of the stream has no graph. The subject, predicate, object, and graph oneofs MUST "
    "be set, unless a repeated term is used; repeated terms MUST NOT occur in the first statement row.",
    [[OPTS("FRAME", "QUADS"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3))]],
)

neg(
    "repeated",
    "QUADS: a PA row without a graph before any graph was given. In QUADS streams the graph oneof MUST be set "
    "to one of the possible values, unless a repeated term is used.",
    [[OPTS("FRAME", "QUADS"), P(EX), N(""), PA("ex", I(1, 1))]],
)

neg(
    "repeated",
    "The first statement of the stream is in the second frame and repeats its predicate; the header in the "
    "first frame does not count. Repeated terms MUST NOT occur in the first statement row of the stream.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, H("k", I(1, 2))],
        [A(I(1, 1), None, I(1, 3))],
    ],
)

# -- transactions -------------------------------------------------------------------------

pos(
    "transactions",
    "FRAME: a committed and an aborted transaction in one frame. A patch frame may contain multiple "
    "transactions, regardless of the used stream type.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            *_SPO_8,
            TX(),
            A(I(1, 1), I(1, 2), I(1, 3)),
            TC(),
            TX(),
            D(I(1, 1), I(1, 2), I(1, 3)),
            TA(),
        ]
    ],
    [
        """
        TX .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TC .
        TX .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TA .
        """
    ],
)

pos(
    "transactions",
    "FLAT: a transaction spanning three frames is one transaction. In PATCH_STREAM_TYPE_FLAT transactions may "
    "span multiple frames.",
    [
        [OPTS("FLAT", "TRIPLES"), P(EX), *_SPO_8, N("o2"), TX(), A(I(1, 1), I(1, 2), I(1, 3))],
        [A(I(1, 1), I(1, 2), I(1, 4))],
        [TC()],
    ],
    [
        """
        TX .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        TC .
        """
    ],
)

pos(
    "transactions",
    "PUNCTUATED: a transaction spanning two frames, committed before the punctuation mark, then an aborted "
    "one. In PATCH_STREAM_TYPE_PUNCTUATED transactions may span multiple patch frames.",
    [
        [OPTS("PUNCTUATED", "TRIPLES"), P(EX), *_SPO_8, N("o2"), TX(), A(I(1, 1), I(1, 2), I(1, 3))],
        [A(I(1, 1), I(1, 2), I(1, 4)), TC(), PUNCT()],
        [TX(), D(I(1, 1), I(1, 2), I(1, 3)), TA(), PUNCT()],
    ],
    [
        """
        TX .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        TC .
        """,
        """
        TX .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TA .
        """,
    ],
)

pos(
    "transactions",
    "Rows inside and outside transactions, a header inside a transaction, an empty transaction and a TX right "
    "after TC and TA. Users are free to use headers and operations on namespaces and statements within or "
    "outside of transactions.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            N(""),
            *_SPO_8,
            H("before", L("1")),
            A(I(1, 2), I(1, 3), I(1, 4)),
            TX(),
            H("inside", L("2")),
            PA("ex", I(1, 1)),
            TC(),
            TX(),
            TA(),
            TX(),
            D(I(1, 2), I(1, 3), I(1, 4)),
            TC(),
            PD("ex"),
        ]
    ],
    [
        """
        H before "1" .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TX .
        H inside "2" .
        PA "ex" <http://example.org/> .
        TC .
        TX .
        TA .
        TX .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TC .
        PD "ex" .
        """
    ],
)

neg(
    "transactions",
    "TC with no previous transaction operation. A row with a transaction_commit operation MUST have a previous "
    "transaction operation equal to transaction_start.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3)), TC()]],
)

neg(
    "transactions",
    "TA with no previous transaction operation. A row with a transaction_abort operation MUST have a previous "
    "transaction operation equal to transaction_start.",
    [[OPTS("FRAME", "TRIPLES"), TA()]],
)

neg(
    "transactions",
    "TC after TC (TX TC TC). A row with a transaction_commit operation MUST have a previous transaction "
    "operation equal to transaction_start.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, TX(), A(I(1, 1), I(1, 2), I(1, 3)), TC(), TC()]],
)

neg(
    "transactions",
    "TA after TC (TX TC TA). A row with a transaction_abort operation MUST have a previous transaction "
    "operation equal to transaction_start.",
    [[OPTS("PUNCTUATED", "TRIPLES"), TX(), TC(), TA(), PUNCT()]],
)

neg(
    "transactions",
    "TX inside an open transaction (TX TX). A row with a transaction_start operation MUST have a previous "
    "transaction operation that is either undefined or equal to transaction_commit or transaction_abort.",
    [[OPTS("FLAT", "TRIPLES"), P(EX), *_SPO_8, TX(), A(I(1, 1), I(1, 2), I(1, 3)), TX(), TC(), TC()]],
)

neg(
    "transactions",
    "FRAME: TX in the first frame, TC in the second. In stream type PATCH_STREAM_TYPE_FRAME, transactions MUST "
    "NOT span multiple patch frames.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, TX(), A(I(1, 1), I(1, 2), I(1, 3))],
        [TC()],
    ],
)

neg(
    "transactions",
    "PUNCTUATED: a punctuation mark inside a transaction. In PATCH_STREAM_TYPE_PUNCTUATED transactions MUST "
    "NOT contain punctuation marks within their scope.",
    [[OPTS("PUNCTUATED", "TRIPLES"), P(EX), *_SPO_8, TX(), A(I(1, 1), I(1, 2), I(1, 3)), PUNCT(), TC(), PUNCT()]],
)

neg(
    "transactions",
    "FLAT: the stream ends inside a transaction. A transaction MUST start and commit/abort within one RDF "
    "Patch, regardless of the used patch stream type.",
    [
        [OPTS("FLAT", "TRIPLES"), P(EX), *_SPO_8, TX(), A(I(1, 1), I(1, 2), I(1, 3))],
        [D(I(1, 1), I(1, 2), I(1, 3))],
    ],
)

neg(
    "transactions",
    "PUNCTUATED: after a complete patch, the stream ends inside a transaction. A transaction MUST start and "
    "commit/abort within one RDF Patch.",
    [[OPTS("PUNCTUATED", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3)), PUNCT(), TX()]],
)

# -- headers ------------------------------------------------------------------------------

pos(
    "headers",
    "Header values of every kind allowed without feature flags (IRI, blank node, simple, language-tagged and "
    "typed literal) and an empty key. The value oneof MUST be set to one of the possible values; an empty key "
    "is allowed.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=1),
            N("uuid:0f1e2d3c-0000-4000-8000-000000000001"),
            DT(XSD + "integer"),
            H("id", I(0, 1)),
            H("blank", B("b1")),
            H("label", L("Patch one")),
            H("label-pl", L("chrząszcz", lang="pl")),
            H("count", L("12", dt=1)),
            H("", L("empty key")),
        ]
    ],
    [
        """
        H id <uuid:0f1e2d3c-0000-4000-8000-000000000001> .
        H blank _:b1 .
        H label "Patch one" .
        H label-pl "chrząszcz"@pl .
        H count "12"^^<http://www.w3.org/2001/XMLSchema#integer> .
        H "" "empty key" .
        """
    ],
)

pos(
    "headers",
    "The example of the specification: header, namespace and quad IRIs share the 0-id rules in row order and "
    "the quad repeats the namespace graph. The terms in RdfPatchHeader and RdfPatchNamespace messages MUST be "
    "processed as if they were present in the RdfQuad messages, in the order in which their rows appear.",
    [
        [
            OPTS("FRAME", "QUADS"),
            P(EX),
            N("iri"),
            H("id", I(1, 0)),
            N(""),
            N("graph"),
            PA("ex", I(0, 0), I(0, 0)),
            A(B("b1"), I(0, 1), B("b2")),
        ]
    ],
    [
        """
        H id <http://example.org/iri> .
        PA "ex" <http://example.org/> <http://example.org/graph> .
        A _:b1 <http://example.org/iri> _:b2 <http://example.org/graph> .
        """
    ],
)

pos(
    "headers",
    "Several headers with the same key, and headers after statements. Jelly-Patch does not enforce the RDF "
    "Patch rule that headers come first.",
    [
        [
            OPTS("PUNCTUATED", "TRIPLES"),
            P(EX),
            *_SPO_8,
            A(I(1, 1), I(1, 2), I(1, 3)),
            H("note", L("a")),
            H("note", L("b")),
            PUNCT(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        H note "a" .
        H note "b" .
        """
    ],
)

neg(
    "headers",
    "A header row without a value. The value oneof MUST be set to one of the possible values; repeated term "
    "encoding MUST NOT be used for the value oneof.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), N("x"), H("first", I(1, 1)), H("second")]],
)

# -- namespaces ---------------------------------------------------------------------------

pos(
    "namespaces",
    "TRIPLES: PA and PD rows, a PD with and without a value, and an empty prefix name. An empty string is "
    "allowed; value is REQUIRED for PA and OPTIONAL for PD. (RDF Patch text has no place for the IRI of a PD.)",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0),
            N("http://example.org/"),
            N("http://xmlns.com/foaf/0.1/"),
            PA("ex", I(0, 1)),
            PA("", I(0, 2)),
            PD("ex"),
            PD("", I(0, 2)),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/> .
        PA "" <http://xmlns.com/foaf/0.1/> .
        PD "ex" .
        PD "" .
        """
    ],
)

pos(
    "namespaces",
    "QUADS: namespace rows in a named graph, a blank-node graph and the default graph. The graph oneof follows "
    "the Jelly-RDF graph node encoding.",
    [
        [
            OPTS("FRAME", "QUADS", names=8, prefixes=0, datatypes=0),
            N("http://example.org/ns#"),
            N("http://example.org/g"),
            PA("ex", I(0, 1), I(0, 2)),
            PA("ex", I(0, 1), B("G")),
            PA("ex", I(0, 1), DG),
            PD("ex", None, I(0, 2)),
            PD("ex", None, DG),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/ns#> <http://example.org/g> .
        PA "ex" <http://example.org/ns#> _:G .
        PA "ex" <http://example.org/ns#> .
        PD "ex" <http://example.org/g> .
        PD "ex" .
        """
    ],
)

pos(
    "namespaces",
    "QUADS: name_id 0 in both the value and the graph of a namespace row. In RdfPatchNamespace, the IRI in the "
    "value field MUST be processed before the RDF term in the graph oneof.",
    [
        [
            OPTS("FRAME", "QUADS", names=8, prefixes=0, datatypes=0),
            N("http://example.org/ns#"),
            N("http://example.org/graph"),
            PA("ex", I(0, 0), I(0, 0)),
            PD("ex", I(0, 1), I(0, 0)),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/ns#> <http://example.org/graph> .
        PD "ex" <http://example.org/graph> .
        """
    ],
)

pos(
    "namespaces",
    "TRIPLES: a graph set on a namespace row is ignored, as for RdfQuad (the consumer SHOULD ignore the graph "
    "term). The graph oneof MUST NOT be set to any value in streams with type STATEMENT_TYPE_TRIPLES.",
    [
        [
            OPTS("FRAME", "TRIPLES", names=8, prefixes=0, datatypes=0),
            N("http://example.org/ns#"),
            N("http://example.org/g"),
            PA("ex", I(0, 1), I(0, 2)),
            PD("ex", None, DG),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/ns#> .
        PD "ex" .
        """
    ],
)

pos(
    "namespaces",
    "QUADS: a PD row without value and graph repeats the graph of the preceding PA row. When the graph oneof "
    "is not set, it MUST be interpreted as a repeated graph term.",
    [
        [
            OPTS("PUNCTUATED", "QUADS", names=8, prefixes=0, datatypes=0),
            N("http://example.org/ns#"),
            N("http://example.org/g"),
            PA("ex", I(0, 1), I(0, 2)),
            PD("ex"),
            PUNCT(),
        ]
    ],
    [
        """
        PA "ex" <http://example.org/ns#> <http://example.org/g> .
        PD "ex" <http://example.org/g> .
        """
    ],
)

neg(
    "namespaces",
    "A PA row without a value. The value field is REQUIRED for the namespace add operation (PA).",
    [[OPTS("FRAME", "TRIPLES"), PA("ex")]],
)

# -- rdf_star -----------------------------------------------------------------------------

pos(
    "rdf_star",
    "Quoted triples in subject and object position. rdf_star MUST be set to true if the stream uses RDF-star.",
    [
        [
            OPTS("FRAME", "TRIPLES", rdf_star=True),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("q"),
            N("z"),
            N("x"),
            A(Q(I(1, 1), I(1, 2), I(1, 3)), I(1, 4), I(1, 5)),
            A(I(1, 6), I(1, 4), Q(I(1, 1), I(1, 2), I(1, 3))),
        ]
    ],
    [
        """
        A << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/q> <http://example.org/z> .
        A <http://example.org/x> <http://example.org/q> << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> .
        """
    ],
)

pos(
    "rdf_star",
    "Quoted triples nested three levels deep, in a quad with a named graph. Quoted triples may be nested up to "
    "arbitrary depth.",
    [
        [
            OPTS("FRAME", "QUADS", rdf_star=True),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("q"),
            N("z"),
            N("g"),
            D(Q(Q(Q(I(1, 1), I(1, 2), I(1, 3)), I(1, 4), I(1, 5)), I(1, 4), L("1")), I(1, 4), I(1, 5), I(1, 6)),
        ]
    ],
    [
        """
        D << << << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/q> <http://example.org/z> >> <http://example.org/q> "1" >> <http://example.org/q> <http://example.org/z> <http://example.org/g> .
        """
    ],
)

pos(
    "rdf_star",
    "name_id 0 inside nested quoted triples: IRIs MUST be processed strictly in order, by row and then by "
    "term (subject, predicate, object, graph); this also applies recursively to RDF-star quoted triples.",
    [
        [
            OPTS("FRAME", "TRIPLES", rdf_star=True, names=8, prefixes=1, datatypes=0),
            P(EX),
            *[N(c) for c in "abcdefg"],
            A(Q(I(1, 0), I(0, 0), Q(I(0, 0), I(0, 0), I(0, 0))), I(0, 0), I(0, 0)),
        ]
    ],
    [
        """
        A << <http://example.org/a> <http://example.org/b> << <http://example.org/c> <http://example.org/d> <http://example.org/e> >> >> <http://example.org/f> <http://example.org/g> .
        """
    ],
)

pos(
    "rdf_star",
    "Quoted triples holding blank nodes and literals, as a statement subject and as a header value "
    "(h_triple_term). RDF term encoding is also used for the h_triple_term field.",
    [
        [
            OPTS("FRAME", "TRIPLES", rdf_star=True),
            P(EX),
            N("p"),
            N("q"),
            H("about", Q(B("b1"), I(1, 1), L("v", lang="en"))),
            A(Q(B("b1"), I(1, 1), L("v", lang="en")), I(1, 2), L("x")),
        ]
    ],
    [
        """
        H about << _:b1 <http://example.org/p> "v"@en >> .
        A << _:b1 <http://example.org/p> "v"@en >> <http://example.org/q> "x" .
        """
    ],
)

pos(
    "rdf_star",
    "A quoted triple as a repeated term: the next statement repeats the whole quoted subject. Repeated terms "
    "MUST NOT occur inside quoted triples, but a quoted triple may be repeated.",
    [
        [
            OPTS("FRAME", "TRIPLES", rdf_star=True),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            N("o2"),
            A(Q(I(1, 1), I(1, 2), I(1, 3)), I(1, 2), I(1, 3)),
            D(None, None, I(1, 4)),
        ]
    ],
    [
        """
        A << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/p> <http://example.org/o> .
        D << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/p> <http://example.org/o2> .
        """
    ],
)

neg(
    "rdf_star",
    "A quoted triple without a subject, after a statement that could be repeated from. Repeated terms MUST NOT "
    "occur in quoted triples.",
    [
        [
            OPTS("FRAME", "TRIPLES", rdf_star=True),
            P(EX),
            *_SPO_8,
            A(I(1, 1), I(1, 2), I(1, 3)),
            A(Q(None, I(1, 2), I(1, 3)), I(1, 2), I(1, 3)),
        ]
    ],
)

neg(
    "rdf_star",
    "A header value that is a quoted triple without an object. Repeated terms MUST NOT occur in quoted triples.",
    [[OPTS("FRAME", "TRIPLES", rdf_star=True), P(EX), *_SPO_8, H("about", Q(I(1, 1), I(1, 2), None))]],
)

neg(
    "rdf_star",
    "A quoted triple in a stream whose rdf_star option is false. This field MUST be set to true if the stream "
    "uses RDF-star.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), Q(I(1, 1), I(1, 2), I(1, 3)))]],
)

neg(
    "rdf_star",
    "A quoted-triple header value (h_triple_term) in a stream whose rdf_star option is false. This field MUST "
    "be set to true if the stream uses RDF-star.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, H("about", Q(I(1, 1), I(1, 2), I(1, 3)))]],
)


def _nested(depth: int) -> Term:
    term = Q(I(1, 1), I(1, 2), I(1, 3))
    for _ in range(depth - 1):
        term = Q(term, I(1, 2), I(1, 3))
    return term


neg(
    "rdf_star",
    "Quoted triples nested 65 levels deep, beyond the nesting limit of 64 this suite assumes (implementation-"
    "defined, see README). The consumer "
    "SHOULD throw an error if the depth of the nesting exceeds the capabilities of the implementation.",
    [[OPTS("FRAME", "TRIPLES", rdf_star=True), P(EX), *_SPO_8, A(_nested(65), I(1, 2), I(1, 3))]],
)

# -- generalized --------------------------------------------------------------------------

pos(
    "generalized",
    "TRIPLES: a literal subject and a blank-node predicate. generalized_statements MUST be set to true if the "
    "stream contains generalized RDF triples or graphs.",
    [
        [
            OPTS("FRAME", "TRIPLES", generalized=True),
            P(EX),
            N("o"),
            A(L("s"), B("p"), I(1, 1)),
        ]
    ],
    [
        """
        A "s" _:p <http://example.org/o> .
        """
    ],
)

pos(
    "generalized",
    "QUADS: a literal predicate and a literal graph name. generalized_statements MUST be set to true if the "
    "stream contains generalized RDF triples or graphs.",
    [
        [
            OPTS("FRAME", "QUADS", generalized=True),
            P(EX),
            N("s"),
            N("o"),
            A(I(1, 1), L("p"), I(1, 2), L("g")),
        ]
    ],
    [
        """
        A <http://example.org/s> "p" <http://example.org/o> "g" .
        """
    ],
)

pos(
    "generalized",
    "Generalized RDF-star: a quoted triple as predicate, with a literal subject inside. Both "
    "generalized_statements and rdf_star MUST be set to true.",
    [
        [
            OPTS("FRAME", "TRIPLES", generalized=True, rdf_star=True),
            P(EX),
            N("s"),
            N("p"),
            N("o"),
            A(I(1, 1), Q(L("a"), I(1, 2), I(1, 3)), I(1, 3)),
        ]
    ],
    [
        """
        A <http://example.org/s> << "a" <http://example.org/p> <http://example.org/o> >> <http://example.org/o> .
        """
    ],
)

neg(
    "generalized",
    "A literal subject in a stream whose generalized_statements option is false. This field MUST be set to "
    "true if the stream contains generalized RDF triples or graphs.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(L("s"), I(1, 2), I(1, 3))]],
)

neg(
    "generalized",
    "A blank-node predicate in a stream whose generalized_statements option is false. This field MUST be set "
    "to true if the stream contains generalized RDF triples or graphs.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), B("p"), I(1, 3))]],
)

neg(
    "generalized",
    "A literal predicate in a stream whose generalized_statements option is false. This field MUST be set to "
    "true if the stream contains generalized RDF triples or graphs.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, D(I(1, 1), L("p"), I(1, 3))]],
)

neg(
    "generalized",
    "QUADS: a literal graph name in a stream whose generalized_statements option is false. This field MUST be "
    "set to true if the stream contains generalized RDF triples or graphs.",
    [[OPTS("FRAME", "QUADS"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3), L("g"))]],
)

neg(
    "generalized",
    "QUADS: a namespace row with a literal graph in a stream whose generalized_statements option is false. "
    "The graph oneof follows the Jelly-RDF graph node encoding.",
    [[OPTS("FRAME", "QUADS"), P(EX), N(""), PA("ex", I(1, 1), L("g"))]],
)

neg(
    "generalized",
    "RDF-star without generalized statements: a literal subject inside a quoted triple. generalized_statements "
    "MUST be set to true if the stream contains generalized RDF triples.",
    [[OPTS("FRAME", "TRIPLES", rdf_star=True), P(EX), *_SPO_8, A(Q(L("s"), I(1, 2), I(1, 3)), I(1, 2), I(1, 3))]],
)

# -- options ------------------------------------------------------------------------------

pos(
    "options",
    "The options row repeated identically in the first frame, after other rows, and in a later frame. It MAY "
    "appear more than once in the stream; consumers SHOULD NOT throw an error if it is present more than once.",
    [
        [
            OPTS("FRAME", "TRIPLES"),
            OPTS("FRAME", "TRIPLES"),
            P(EX),
            *_SPO_8,
            A(I(1, 1), I(1, 2), I(1, 3)),
            OPTS("FRAME", "TRIPLES"),
        ],
        [OPTS("FRAME", "TRIPLES"), D(I(1, 1), I(1, 2), I(1, 3))],
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """,
    ],
)

pos(
    "options",
    "rdf_star and generalized_statements set although the stream uses neither. It SHOULD NOT be set to true "
    "if the stream does not use this feature (a recommendation, not an error).",
    [
        [
            OPTS("PUNCTUATED", "QUADS", rdf_star=True, generalized=True),
            P(EX),
            *_SPO_8,
            A(I(1, 1), I(1, 2), I(1, 3), DG),
            PUNCT(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)

pos(
    "options",
    "Lookup sizes at the limits this suite assumes (names 4096, prefixes 1024, datatypes 256, as Jelly-JVM; "
    "implementation-defined, see README), with entries at the highest ids. The size of the lookup MUST NOT exceed the value "
    "of this field.",
    [
        [
            OPTS("FLAT", "TRIPLES", names=4096, prefixes=1024, datatypes=256),
            P(EX, id=1024),
            N("s", id=4094),
            N("p"),
            N("o"),
            DT(XSD + "integer", id=256),
            A(I(1024, 4094), I(0, 0), I(0, 0)),
            A(I(0, 4094), I(0, 4095), L("7", dt=256)),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        A <http://example.org/s> <http://example.org/p> "7"^^<http://www.w3.org/2001/XMLSchema#integer> .
        """
    ],
)

neg(
    "options",
    "The first row is a statement, not the options row. The patch stream options MUST be the first row in the "
    "stream (consumers MAY use default options instead; this suite expects an error, see README).",
    [[A(I(0, 1), I(0, 2), I(0, 3)), OPTS("FRAME", "TRIPLES")]],
)

neg(
    "options",
    "The first row is a lookup entry, not the options row. The patch stream options MUST be the first row in "
    "the stream.",
    [[N("http://example.org/s"), OPTS("FRAME", "TRIPLES")]],
)

neg(
    "options",
    "The options row repeated in the same frame with a different max_name_table_size. It MAY appear more than "
    "once, but it MUST be identical to all previous occurrences.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3)), OPTS("FRAME", "TRIPLES", names=32)]],
)

neg(
    "options",
    "The options row repeated in a later frame with a different stream type. It MAY appear more than once, "
    "but it MUST be identical to all previous occurrences.",
    [
        [OPTS("PUNCTUATED", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3)), PUNCT()],
        [OPTS("FLAT", "TRIPLES"), D(I(1, 1), I(1, 2), I(1, 3))],
    ],
)

neg(
    "options",
    "statement_type is STATEMENT_TYPE_UNSPECIFIED. It MUST be set to a value defined in the protocol other "
    "than STATEMENT_TYPE_UNSPECIFIED.",
    [[OPTS("FRAME", 0)]],
)

neg(
    "options",
    "stream_type is PATCH_STREAM_TYPE_UNSPECIFIED. It MUST be set to a value defined in the protocol other "
    "than PATCH_STREAM_TYPE_UNSPECIFIED.",
    [[OPTS(0, "TRIPLES")]],
)

neg(
    "options",
    "statement_type is 3, a value the protocol does not define. It MUST be set to a value defined in the "
    "protocol other than STATEMENT_TYPE_UNSPECIFIED.",
    [[OPTS("FRAME", 3)]],
)

neg(
    "options",
    "stream_type is 4, a value the protocol does not define. It MUST be set to a value defined in the "
    "protocol other than PATCH_STREAM_TYPE_UNSPECIFIED.",
    [[OPTS(4, "QUADS")]],
)

neg(
    "options",
    "Version tag 0. The version tag MUST be greater than 0; the consumer SHOULD throw an error if the version "
    "tag is zero.",
    [[OPTS("FRAME", "TRIPLES", version=0)]],
)

neg(
    "options",
    "Version tag 2, newer than the supported version 1. The consumer SHOULD throw an error if the version tag "
    "is greater than the version tag of the implementation.",
    [[OPTS("FRAME", "TRIPLES", version=2)]],
)

neg(
    "options",
    "Version tag 10001, a non-standard version. The consumer SHOULD throw an error if the version tag is "
    "greater than the version tag of the implementation.",
    [[OPTS("FRAME", "TRIPLES", version=10001)]],
)

neg(
    "options",
    "max_name_table_size 7. This field is REQUIRED and MUST be set to a value greater than or equal to 8.",
    [[OPTS("FRAME", "TRIPLES", names=7)]],
)

neg(
    "options",
    "max_name_table_size not set (0). This field is REQUIRED and MUST be set to a value greater than or equal to 8.",
    [[OPTS("FRAME", "TRIPLES", names=0, prefixes=0, datatypes=0)]],
)

neg(
    "options",
    "max_name_table_size 10000000. For security, consumers must check that requested lookup sizes are not "
    "overly large; this suite assumes a limit of 4096 names (implementation-defined, see README).",
    [[OPTS("FRAME", "TRIPLES", names=10000000)]],
)

neg(
    "options",
    "max_prefix_table_size 10000000. For security, consumers must check that requested lookup sizes are not "
    "overly large; this suite assumes a limit of 1024 prefixes (implementation-defined, see README).",
    [[OPTS("FRAME", "TRIPLES", prefixes=10000000)]],
)

neg(
    "options",
    "max_datatype_table_size 10000000. For security, consumers must check that requested lookup sizes are not "
    "overly large; this suite assumes a limit of 256 datatypes (implementation-defined, see README).",
    [[OPTS("FRAME", "TRIPLES", datatypes=10000000)]],
)

neg(
    "options",
    "A row with no field set after the options row. A patch row MUST have exactly one of the fields set.",
    [[OPTS("FRAME", "TRIPLES"), EMPTY()]],
)

neg(
    "options",
    "A row with no field set as the first row of the stream. A patch row MUST have exactly one of the fields "
    "set, and the options MUST be the first row.",
    [[EMPTY(), OPTS("FRAME", "TRIPLES")]],
)

# -- framing ------------------------------------------------------------------------------

pos(
    "framing",
    "A single non-delimited frame (TRIPLES, FRAME). Files SHOULD be saved in the delimited variant; this "
    "suite expects a reader to also accept one bare frame (see README).",
    [[OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3)), D(I(1, 1), I(1, 2), L("x"))]],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        D <http://example.org/s> <http://example.org/p> "x" .
        """
    ],
    delimited=False,
)

pos(
    "framing",
    "A single non-delimited frame holding two punctuated patches of quads. Files SHOULD be saved in the "
    "delimited variant; this suite expects a reader to also accept one bare frame (see README).",
    [
        [
            OPTS("PUNCTUATED", "QUADS"),
            P(EX),
            *_SPO_8,
            N("g"),
            A(I(1, 1), I(1, 2), I(1, 3), I(1, 4)),
            PUNCT(),
            D(I(1, 1), I(1, 2), I(1, 3), I(1, 4)),
            PUNCT(),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        """,
        """
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        """,
    ],
    delimited=False,
)

_LONG = "0123456789" * 30

pos(
    "framing",
    "Frames longer than 127 bytes, whose length prefix is a two-byte varint. A delimited message is a message "
    "that has a Protobuf varint prepended before it, specifying the length of the message in bytes.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), L(_LONG))],
        [D(I(1, 1), I(1, 2), L(_LONG))],
    ],
    [
        f"""
        A <http://example.org/s> <http://example.org/p> "{_LONG}" .
        """,
        f"""
        D <http://example.org/s> <http://example.org/p> "{_LONG}" .
        """,
    ],
)

neg(
    "framing",
    "The last frame is cut short (truncated delimited file). A byte stream in the delimited variant MUST "
    "consist of a series of delimited RdfPatchFrame messages.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3))],
        [D(I(1, 1), I(1, 2), I(1, 3))],
    ],
    transform=lambda data: data[:-3],
)

neg(
    "framing",
    "The file ends inside a two-byte length prefix. A byte stream in the delimited variant MUST consist of a "
    "series of delimited RdfPatchFrame messages.",
    [
        [OPTS("FRAME", "TRIPLES"), P(EX), *_SPO_8, A(I(1, 1), I(1, 2), I(1, 3))],
        [D(I(1, 1), I(1, 2), L(_LONG))],
    ],
    # Keep the first frame and the first byte of the second frame's two-byte length.
    transform=lambda data: data[: 1 + data[0] + 1],
)

neg(
    "framing",
    "A name entry whose value is not valid UTF-8. All strings in the serialization are assumed to be UTF-8 "
    "encoded; implementations MUST use a compliant Protocol Buffers implementation.",
    [[OPTS("FRAME", "TRIPLES"), P(EX), N("~~"), N("p"), N("o"), A(I(1, 1), I(1, 2), I(1, 3))]],
    transform=lambda data: data.replace(b"~~", b"\xc3\x28"),
)

neg(
    "framing",
    "A frame whose bytes are not a valid RdfPatchFrame message. Implementations MUST use a compliant Protocol "
    "Buffers implementation.",
    [[OPTS("FRAME", "TRIPLES")], [P(EX)]],
    # Replace the second frame by 23 bytes that announce a 127-byte row but hold only 21.
    transform=lambda data: data[: 1 + data[0]] + bytes([23]) + b"\x0a\x7f" + b"\x00" * 21,
)

# -- terms --------------------------------------------------------------------------------

pos(
    "terms",
    "Literals: simple, empty, language-tagged and typed, with lexical forms kept exactly (no normalization) and "
    "characters that need escaping in RDF Patch text. If no literalKind field is set, the literal MUST be "
    "interpreted as a simple literal.",
    [
        [
            OPTS("FRAME", "TRIPLES", datatypes=2),
            P(EX),
            N("s"),
            N("p"),
            DT(XSD + "integer"),
            DT(XSD + "dateTime"),
            A(I(1, 1), I(1, 2), L("plain")),
            A(None, None, L("")),
            A(None, None, L("colour", lang="en-GB")),
            A(None, None, L("Farbe", lang="de")),
            A(None, None, L("01", dt=1)),
            A(None, None, L("2025-05-06T10:00:00Z", dt=2)),
            A(None, None, L('say "hi"\\ back\nnew line\ttab\rcr')),
            A(None, None, L("zażółć gęślą jaźń ✓")),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> "plain" .
        A <http://example.org/s> <http://example.org/p> "" .
        A <http://example.org/s> <http://example.org/p> "colour"@en-GB .
        A <http://example.org/s> <http://example.org/p> "Farbe"@de .
        A <http://example.org/s> <http://example.org/p> "01"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://example.org/s> <http://example.org/p> "2025-05-06T10:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
        A <http://example.org/s> <http://example.org/p> "say \\"hi\\"\\\\ back\\nnew line\\ttab\\rcr" .
        A <http://example.org/s> <http://example.org/p> "zażółć gęślą jaźń ✓" .
        """
    ],
)

pos(
    "terms",
    "Blank node labels are kept as written and mean the same node in every patch (RDF Patch semantics: "
    "labels are system identifiers). The identifier may be any valid UTF-8 string.",
    [
        [OPTS("FRAME", "QUADS"), P(EX), N("p"), A(B("b1"), I(1, 1), B("node_2"), B("x-y.z"))],
        [D(B("b1"), I(1, 1), B("node_2"), B("x-y.z")), A(B("B1"), I(1, 1), B("b1"), DG)],
    ],
    [
        """
        A _:b1 <http://example.org/p> _:node_2 _:x-y.z .
        """,
        """
        D _:b1 <http://example.org/p> _:node_2 _:x-y.z .
        A _:B1 <http://example.org/p> _:b1 .
        """,
    ],
)

pos(
    "terms",
    "Unusual but valid IRIs: an empty name (the IRI is the prefix), non-ASCII characters, a fragment and a "
    "URN. The IRI is constructed by concatenating the prefix and the name.",
    [
        [
            OPTS("FRAME", "TRIPLES", prefixes=2),
            P(EX),
            P("urn:isbn:"),
            N(""),
            N("zażółć"),
            N("page#frag"),
            N("0451450523"),
            A(I(1, 1), I(0, 2), I(0, 3)),
            A(I(2, 4), I(1, 2), I(2, 1)),
        ]
    ],
    [
        """
        A <http://example.org/> <http://example.org/zażółć> <http://example.org/page#frag> .
        A <urn:isbn:0451450523> <http://example.org/zażółć> <urn:isbn:> .
        """
    ],
)

pos(
    "terms",
    "A literal with an explicit xsd:string datatype. A literal with no literalKind is a simple literal (datatype "
    "xsd:string); an explicit datatype entry may name xsd:string too.",
    [
        [
            OPTS("FRAME", "TRIPLES", datatypes=1),
            P(EX),
            N("s"),
            N("p"),
            DT(XSD + "string"),
            A(I(1, 1), I(1, 2), L("typed", dt=1)),
        ]
    ],
    [
        """
        A <http://example.org/s> <http://example.org/p> "typed"^^<http://www.w3.org/2001/XMLSchema#string> .
        """
    ],
)


# =======================================================================================
# to_jelly cases
#
# Each case gives the producer's options and one RDF Patch text per patch. A positive case
# passes when the encoder's output decodes back to the same rows with the same options.
# =======================================================================================

_TRIPLES_A = """
    A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
    A _:b1 <http://example.org/p> "v"@en .
    D <http://example.org/s> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
"""
_TRIPLES_B = """
    D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
    A <http://example.org/s> <http://example.org/q> "plain" .
"""
_QUADS_A = """
    A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
    A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
    A _:b1 <http://example.org/p> "v"@en _:g2 .
"""
_QUADS_B = """
    D <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g1> .
    A <http://example.org/s> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g1> .
    D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
"""

to_pos(
    "triples_frame",
    "TRIPLES, FRAME: two patches, one frame each. Every RdfPatchFrame message is a single, complete RDF Patch.",
    OPTS("FRAME", "TRIPLES"),
    [_TRIPLES_A, _TRIPLES_B],
)
to_pos(
    "triples_flat",
    "TRIPLES, FLAT: one patch. The entire stream is a single, complete RDF Patch.",
    OPTS("FLAT", "TRIPLES"),
    [_TRIPLES_A + _TRIPLES_B],
)
to_pos(
    "triples_punctuated",
    "TRIPLES, PUNCTUATED: three patches, the middle one empty. The punctuation mark MUST occur at the end of "
    "an RDF Patch.",
    OPTS("PUNCTUATED", "TRIPLES"),
    [_TRIPLES_A, "", _TRIPLES_B],
)
to_pos(
    "quads_frame",
    "QUADS, FRAME: two patches of quads in default, named and blank-node graphs.",
    OPTS("FRAME", "QUADS"),
    [_QUADS_A, _QUADS_B],
)
to_pos(
    "quads_flat",
    "QUADS, FLAT: one patch of quads. The entire stream is a single, complete RDF Patch.",
    OPTS("FLAT", "QUADS"),
    [_QUADS_A + _QUADS_B],
)
to_pos(
    "quads_punctuated",
    "QUADS, PUNCTUATED: two patches of quads, the first empty. The punctuation mark MUST occur at the end of "
    "an RDF Patch.",
    OPTS("PUNCTUATED", "QUADS"),
    ["", _QUADS_A, _QUADS_B],
)

to_pos(
    "lookups",
    "Name table of 8 (the minimum) with the prefix lookup disabled: twelve distinct IRIs force name entries to "
    "be replaced. The producer of the stream MUST NOT exceed the maximum size of the lookup.",
    OPTS("PUNCTUATED", "TRIPLES", names=8, prefixes=0, datatypes=0),
    [
        """
        A <http://example.org/s1> <http://example.org/p1> <http://example.org/o1> .
        A <http://example.org/s2> <http://example.org/p2> <http://example.org/o2> .
        A <http://example.org/s3> <http://example.org/p3> <http://example.org/o3> .
        """,
        """
        A <http://example.org/s4> <http://example.org/p4> <http://example.org/o4> .
        D <http://example.org/s1> <http://example.org/p1> <http://example.org/o1> .
        A <http://example.org/s1> <http://example.org/p4> <http://example.org/o3> .
        """,
    ],
)
to_pos(
    "lookups",
    "Name table of 8 and a prefix table of 1, with IRIs of three namespaces in every row: the producer must "
    "split IRIs so that a row needs at most one prefix (the size of the lookup MUST NOT exceed the value of "
    "this field; how IRIs are split is up to the producer).",
    OPTS("FRAME", "TRIPLES", names=8, prefixes=1, datatypes=0),
    [
        """
        A <http://a.example/s> <http://b.example/p> <http://c.example/o> .
        A <http://c.example/s> <http://a.example/p> <http://b.example/o> .
        A <http://b.example/s> <http://b.example/p> <http://a.example/o> .
        D <http://a.example/s> <http://b.example/p> <http://c.example/o> .
        """
    ],
)
to_pos(
    "lookups",
    "Datatype table of 1: literals alternate between three datatypes, so the single datatype entry is replaced.",
    OPTS("FLAT", "QUADS", names=8, prefixes=1, datatypes=1),
    [
        """
        A <http://example.org/s> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://example.org/s> <http://example.org/p> "1.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .
        A <http://example.org/s> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .
        A <http://example.org/s> <http://example.org/p> "true"^^<http://www.w3.org/2001/XMLSchema#boolean> <http://example.org/g> .
        """
    ],
)
to_pos(
    "lookups",
    "Small lookups (names 8, prefixes 1, datatypes 1) across several punctuated patches with headers, "
    "namespaces and repeated terms; each row uses one namespace, which replaces the single prefix entry.",
    OPTS("PUNCTUATED", "QUADS", names=8, prefixes=1, datatypes=1),
    [
        """
        H id <urn:uuid:00000000-0000-4000-8000-000000000001> .
        PA "ex" <http://example.org/> <http://example.org/g> .
        A <http://example.org/a> <http://example.org/b> <http://example.org/c> <http://example.org/g> .
        A <http://example.org/a> <http://example.org/b> <http://example.org/d> <http://example.org/g> .
        """,
        """
        H id <urn:uuid:00000000-0000-4000-8000-000000000002> .
        H prev <urn:uuid:00000000-0000-4000-8000-000000000001> .
        D <http://example.org/a> <http://example.org/b> <http://example.org/c> <http://example.org/g> .
        A <http://example.org/a> <http://example.org/e> "2"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://other.example/a> <http://other.example/b> <http://other.example/c> <http://other.example/g> .
        PD "ex" <http://example.org/g> .
        """,
    ],
)

to_pos(
    "rdf_star",
    "RDF-star: quoted triples in subject and object position, nested, and as a header value.",
    OPTS("PUNCTUATED", "QUADS", rdf_star=True),
    [
        """
        H about << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> .
        A << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/q> <http://example.org/z> .
        A <http://example.org/x> <http://example.org/q> << << _:b1 <http://example.org/p> "v" >> <http://example.org/r> <http://example.org/z> >> <http://example.org/g> .
        """
    ],
)
to_pos(
    "generalized",
    "Generalized TRIPLES: a literal subject and a blank-node predicate.",
    OPTS("FRAME", "TRIPLES", generalized=True),
    [
        """
        A "s" _:p <http://example.org/o> .
        D <http://example.org/s> _:p "o" .
        """
    ],
)
to_pos(
    "generalized",
    "Generalized QUADS: a literal predicate and a literal graph name.",
    OPTS("FLAT", "QUADS", generalized=True),
    [
        """
        A <http://example.org/s> "p" <http://example.org/o> "g" .
        """
    ],
)
to_pos(
    "headers",
    "Headers with IRI, blank node and literal values.",
    OPTS("FRAME", "TRIPLES"),
    [
        """
        H id <uuid:0f1e2d3c-0000-4000-8000-000000000001> .
        H blank _:b1 .
        H label "Patch one"@en .
        H count "12"^^<http://www.w3.org/2001/XMLSchema#integer> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        """
    ],
)
to_pos(
    "namespaces",
    "TRIPLES: PA and PD rows, including an empty prefix name.",
    OPTS("PUNCTUATED", "TRIPLES"),
    [
        """
        PA "ex" <http://example.org/> .
        PA "" <http://xmlns.com/foaf/0.1/> .
        """,
        """
        PD "ex" .
        PD "" .
        """,
    ],
)
to_pos(
    "namespaces",
    "QUADS: PA and PD rows in named graphs and in the default graph, sharing the repeated graph with quads.",
    OPTS("FRAME", "QUADS"),
    [
        """
        PA "ex" <http://example.org/> <http://example.org/g> .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        PD "ex" <http://example.org/g> .
        PA "ex" <http://example.org/> .
        PA "ex" <http://example.org/> _:G .
        """
    ],
)
to_pos(
    "transactions",
    "Committed and aborted transactions, several per patch, with rows outside transactions.",
    OPTS("PUNCTUATED", "TRIPLES"),
    [
        """
        TX .
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TC .
        TX .
        D <http://example.org/s> <http://example.org/p> <http://example.org/o> .
        TA .
        """,
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o2> .
        TX .
        TC .
        """,
    ],
)

to_neg(
    "triples_frame",
    "A quad in a named graph cannot be written to a TRIPLES stream. The graph oneof MUST NOT be set in "
    "STATEMENT_TYPE_TRIPLES streams.",
    OPTS("FRAME", "TRIPLES"),
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> <http://example.org/g> .
        """
    ],
)
to_neg(
    "namespaces",
    "A namespace in a named graph cannot be written to a TRIPLES stream. The graph oneof MUST NOT be set to any "
    "value in streams with type STATEMENT_TYPE_TRIPLES.",
    OPTS("PUNCTUATED", "TRIPLES"),
    [
        """
        PA "ex" <http://example.org/> <http://example.org/g> .
        """
    ],
)
to_neg(
    "rdf_star",
    "A quoted triple cannot be written when rdf_star is false. This field MUST be set to true if the stream "
    "uses RDF-star.",
    OPTS("FRAME", "TRIPLES"),
    [
        """
        A << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> <http://example.org/q> <http://example.org/z> .
        """
    ],
)
to_neg(
    "rdf_star",
    "A quoted-triple header value cannot be written when rdf_star is false. This field MUST be set to true if "
    "the stream uses RDF-star.",
    OPTS("FLAT", "QUADS"),
    [
        """
        H about << <http://example.org/s> <http://example.org/p> <http://example.org/o> >> .
        """
    ],
)
to_neg(
    "generalized",
    "A literal subject cannot be written when generalized_statements is false. This field MUST be set to true "
    "if the stream contains generalized RDF triples or graphs.",
    OPTS("FRAME", "TRIPLES"),
    [
        """
        A "s" <http://example.org/p> <http://example.org/o> .
        """
    ],
)
to_neg(
    "generalized",
    "A blank-node predicate cannot be written when generalized_statements is false. This field MUST be set to "
    "true if the stream contains generalized RDF triples or graphs.",
    OPTS("PUNCTUATED", "QUADS"),
    [
        """
        A <http://example.org/s> _:p <http://example.org/o> .
        """
    ],
)
to_neg(
    "generalized",
    "A literal graph name cannot be written when generalized_statements is false. This field MUST be set to "
    "true if the stream contains generalized RDF triples or graphs.",
    OPTS("FLAT", "QUADS"),
    [
        """
        A <http://example.org/s> <http://example.org/p> <http://example.org/o> "g" .
        """
    ],
)
to_neg(
    "lookups",
    "A typed literal cannot be written when max_datatype_table_size is 0. If the field is set to 0, the "
    "datatype lookup MUST NOT be used in the stream (which effectively prohibits the use of datatype literals).",
    OPTS("FRAME", "TRIPLES", datatypes=0),
    [
        """
        A <http://example.org/s> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
        """
    ],
)


# =======================================================================================
# Writing the tree
# =======================================================================================

README = """\
# Jelly-Patch conformance suite

Test cases for the [Jelly-Patch specification](https://w3id.org/jelly/dev/specification/patch/)
(Jelly-Patch, the Jelly encoding of RDF Patch), for any implementation to run. No upstream suite
exists for Jelly-Patch (the Jelly protobuf repository has tests for Jelly-RDF only), so this one
follows the layout and vocabulary of the upstream Jelly-RDF suite: one `manifest.ttl` per
direction, one folder per case, W3C test manifest terms (`mf:`) and the Jelly test vocabulary
(`jellyt:`, <https://w3id.org/jelly/dev/tests/vocab#>).

Generated by `scripts/gen_patch_conformance.py` of [patchsync](../../README.md); do not edit by
hand. Regenerate with `python scripts/gen_patch_conformance.py` and commit the result (patchsync's
tests check that the committed tree is what the script writes, coverage table included).

License: Apache License 2.0 (<https://www.apache.org/licenses/LICENSE-2.0>), like the upstream
Jelly-RDF suite. The expected outputs are written by hand in the generator, never produced by
the code under test.

## Layout

| path | what |
|---|---|
| `from_jelly/manifest.ttl` | {from_count} cases of `jellyt:TestPatchFromJelly` (decoding) |
| `to_jelly/manifest.ttl` | {to_count} cases of `jellyt:TestPatchToJelly` (encoding) |
| `<direction>/<group>/pos_NNN/`, `neg_NNN/` | the files of one positive or negative case |
| `vocabulary.ttl` | the test classes and properties this suite adds to `jellyt:` |
| `rules.ttl` | the {rule_count} rules of the specification the cases are tagged with (stable ids) |

- `from_jelly`: `mf:action` is a Jelly-Patch stream (`in.jellyp`, delimited unless the case is
  marked `mf:notable jellyt:featureNonDelimited`). A positive case lists in `mf:result` one RDF
  Patch text file per patch (`out_NNN.rdfp`): one per frame of a FRAME stream, one per
  punctuation mark of a PUNCTUATED stream, one for a FLAT stream. It passes when the stream
  decodes into those patches, row by row, with terms equal as RDF terms (same lexical forms,
  same blank node labels). RDF Patch text has no form for the IRI of a `PD` row; that IRI is
  not compared. A negative case passes when decoding fails with an error.
- `to_jelly`: `mf:action` is a list: a Jelly-Patch stream holding only the producer's options
  row (`options.jellyp`), then one RDF Patch text per patch (`in_NNN.rdfp`). A positive case
  passes when the producer, given those options, writes a stream that decodes back to the same
  options and the same patches. A negative case passes when the producer refuses the input.

Each case's `mf:name` quotes the rule it exercises, and `jellyt:coversRule` names the rules
(`rules.ttl`: id, section of the specification, rule text, link to the section).

## Running it

With patchsync: `patchsync conformance conformance/patch/from_jelly/manifest.ttl
conformance/patch/to_jelly/manifest.ttl` (add `--coverage` for the per-rule table below with
passed and failed counts). Another implementation reads the manifests like the upstream
Jelly-RDF ones: for each entry of `mf:entries`, run its class's check on the files of
`mf:action` (and `mf:result`), resolving relative IRIs against the manifest's `BASE`, which
stands for the directory of the manifest file.

Implementation-defined expectations (an implementation with other choices may skip these):
`from_jelly/options/neg_014`, `neg_015`, `neg_016` and `options/pos_003` assume Jelly-JVM's
lookup size limits (names 4096, prefixes 1024, datatypes 256); `from_jelly/rdf_star/neg_005`
assumes a quoted triple nesting limit of 64; `from_jelly/options/neg_001` expects an error for
a stream that does not start with its options (the specification also allows default options);
`from_jelly/framing/pos_001` and `pos_002` expect a reader to accept one non-delimited frame.

## Coverage, rule by rule

{coverage}
"""

VOCABULARY = """\
# Test classes of the Jelly-Patch conformance suite, in the style of
# shared/conformance/vocabulary.ttl. Generated by scripts/gen_patch_conformance.py.

PREFIX rdf:    <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs:   <http://www.w3.org/2000/01/rdf-schema#>
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>

jellyt:TestPatch a rdfs:Class ;
    rdfs:label "Jelly-Patch test" ;
    rdfs:comment "A test case for the Jelly-Patch serialization format." ;
    rdfs:subClassOf jellyt:Test .

jellyt:TestPatchFromJelly a rdfs:Class ;
    rdfs:label "From Jelly-Patch to RDF Patch test" ;
    rdfs:comment \"\"\"A test for decoding Jelly-Patch. mf:action is the IRI of a .jellyp file. For a
    positive test, mf:result is the IRI of one .rdfp file or an rdf:List of them, one per patch
    of the stream; the test succeeds when the stream decodes into exactly these patches, row by
    row. For a negative test, the test succeeds when the consumer throws an error.\"\"\" ;
    rdfs:subClassOf jellyt:TestPatch .

jellyt:TestPatchToJelly a rdfs:Class ;
    rdfs:label "From RDF Patch to Jelly-Patch test" ;
    rdfs:comment \"\"\"A test for encoding Jelly-Patch. mf:action is an rdf:List: a .jellyp file
    holding the producer's options row, then one .rdfp file per patch. For a positive test, the
    test succeeds when the producer's output, read back, has the requested options and the same
    patches. For a negative test, the test succeeds when the producer refuses the input.\"\"\" ;
    rdfs:subClassOf jellyt:TestPatch .

jellyt:SpecRule a rdfs:Class ;
    rdfs:label "Specification rule" ;
    rdfs:comment "One rule of a specification that test cases cover (rules.ttl)." .

jellyt:RuleSet a rdfs:Class ;
    rdfs:label "Rule set" ;
    rdfs:comment "The rules a suite is tagged with, in order (jellyt:rules)." .

jellyt:coversRule a rdf:Property ;
    rdfs:label "covers rule" ;
    rdfs:comment "The test case exercises this rule of the specification." ;
    rdfs:domain jellyt:Test ;
    rdfs:range jellyt:SpecRule .

jellyt:rules a rdf:Property ;
    rdfs:label "rules" ;
    rdfs:comment "An rdf:List of the rules of a rule set." ;
    rdfs:domain jellyt:RuleSet .

jellyt:section a rdf:Property ;
    rdfs:label "section" ;
    rdfs:comment "The title of the specification section a rule is in (rdfs:seeAlso links to it)." ;
    rdfs:domain jellyt:SpecRule .
"""

MANIFEST_HEAD = """\
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>
PREFIX mf:     <http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#>
PREFIX rdfs:   <http://www.w3.org/2000/01/rdf-schema#>
PREFIX rdft:   <http://www.w3.org/ns/rdftest#>
PREFIX rule:   <{rules_ns}>

BASE           <https://w3id.org/jelly/dev/tests/patch/{direction}/>

# Generated by scripts/gen_patch_conformance.py; do not edit by hand.

<manifest> a mf:Manifest ;
    rdfs:label "{label}" ;
    mf:entries (
"""


def turtle_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _ordered(cases: Sequence[Any]) -> list[Any]:
    """Cases grouped in order of first appearance, negatives before positives (as upstream)."""
    groups: list[str] = []
    for case in cases:
        if case.group not in groups:
            groups.append(case.group)
    return sorted(cases, key=lambda c: (groups.index(c.group), c.positive, c.number))


def _manifest(direction: str, label: str, cases: Sequence[Any], entry: Callable[[Any], str]) -> str:
    ordered = _ordered(cases)
    out = [MANIFEST_HEAD.format(direction=direction, label=label, rules_ns=RULES_NS)]
    previous_group = None
    for case in ordered:
        if previous_group is not None and case.group != previous_group:
            out.append("\n")
        previous_group = case.group
        out.append(f"        <{case.id}>\n")
    out.append("    ) .\n")
    for case in ordered:
        out.append("\n" + entry(case))
    return "".join(out)


def _from_entry(case: FromCase) -> str:
    kind = "jellyt:TestPositive" if case.positive else "jellyt:TestNegative"
    lines = [
        f"<{case.id}> a {kind}, jellyt:TestPatchFromJelly ;",
        f"    mf:name {turtle_string(case.name)} ;",
        _covers(case),
        f"    rdfs:comment {turtle_string(case.comment or describe_frames(case.frames))} ;",
        "    rdft:approval rdft:Proposed ;",
    ]
    if not case.delimited:
        lines.append("    mf:notable jellyt:featureNonDelimited ;")
    if case.positive:
        lines.append(f"    mf:action <{case.id}/in.jellyp> ;")
        if len(case.outputs) == 1:
            lines.append(f"    mf:result <{case.id}/out_000.rdfp> .")
        elif not case.outputs:
            lines.append("    mf:result () .")
        else:
            lines.append("    mf:result (")
            lines.extend(f"        <{case.id}/out_{i:03d}.rdfp>" for i in range(len(case.outputs)))
            lines.append("    ) .")
    else:
        lines.append(f"    mf:action <{case.id}/in.jellyp> .")
    return "\n".join(lines) + "\n"


def _to_entry(case: ToCase) -> str:
    kind = "jellyt:TestPositive" if case.positive else "jellyt:TestNegative"
    lines = [
        f"<{case.id}> a {kind}, jellyt:TestPatchToJelly ;",
        f"    mf:name {turtle_string(case.name)} ;",
        _covers(case),
        f"    rdfs:comment {turtle_string(options_text(case.options))} ;",
        "    rdft:approval rdft:Proposed ;",
        "    mf:action (",
        f"        <{case.id}/options.jellyp>",
    ]
    lines.extend(f"        <{case.id}/in_{i:03d}.rdfp>" for i in range(len(case.inputs)))
    lines.append("    ) .")
    return "\n".join(lines) + "\n"


def _covers(case: Any) -> str:
    return "    jellyt:coversRule " + ", ".join(f"rule:{rule}" for rule in case.rules) + " ;"


RULES_HEAD = """\
PREFIX jellyt: <https://w3id.org/jelly/dev/tests/vocab#>
PREFIX rdfs:   <http://www.w3.org/2000/01/rdf-schema#>
PREFIX rule:   <{rules_ns}>

# The rules of the Jelly-Patch specification (and of Jelly-RDF, which it builds on) that the
# cases of this suite cover. Ids are stable: a rule is never renamed or reused.
# Generated by scripts/gen_patch_conformance.py; do not edit by hand.

<{rules_set}> a jellyt:RuleSet ;
    rdfs:label "Rules covered by the Jelly-Patch conformance suite" ;
    jellyt:rules (
"""


def _rules_ttl() -> str:
    out = [RULES_HEAD.format(rules_ns=RULES_NS, rules_set=RULES_NS.rstrip("#"))]
    out.extend(f"        rule:{rule.id}\n" for rule in RULES)
    out.append("    ) .\n")
    for rule in RULES:
        title, spec_url = SPECS[rule.spec]
        out.append(
            f"\nrule:{rule.id} a jellyt:SpecRule ;\n"
            f"    rdfs:label {turtle_string(rule.id)} ;\n"
            f"    rdfs:comment {turtle_string(rule.text)} ;\n"
            f"    jellyt:section {turtle_string(f'{title}: {rule.section}')} ;\n"
            f"    rdfs:isDefinedBy <{spec_url}> ;\n"
            f"    rdfs:seeAlso <{rule.url}> .\n"
        )
    return "".join(out)


def _coverage_table() -> str:
    """The README's table: per rule, the cases of each direction that cover it."""
    cases = [("from_jelly", c) for c in _ordered(FROM_CASES)] + [("to_jelly", c) for c in _ordered(TO_CASES)]
    lines = [
        'Counts are positive / negative cases. A rule with no case is listed too ("none").',
        "",
        "| rule | section | from_jelly | to_jelly | cases |",
        "|---|---|---|---|---|",
    ]
    for rule in RULES:
        covering = [(d, c) for d, c in cases if rule.id in c.rules]

        def count(direction: str, covering: list[tuple[str, Any]] = covering) -> str:
            pos = sum(1 for d, c in covering if d == direction and c.positive)
            neg = sum(1 for d, c in covering if d == direction and not c.positive)
            return f"{pos} / {neg}"

        title = SPECS[rule.spec][0]
        ids = ", ".join(f"`{d}/{c.id}`" for d, c in covering) or "none"
        lines.append(
            f"| `{rule.id}` | [{title}: {rule.section}]({rule.url}) | {count('from_jelly')} | {count('to_jelly')} "
            f"| {ids} |"
        )
    uncovered = [rule.id for rule in RULES if not any(rule.id in c.rules for _, c in cases)]
    lines += [
        "",
        f"{len(RULES)} rules, {len(RULES) - len(uncovered)} covered by at least one case; "
        f"not covered: {', '.join(f'`{r}`' for r in uncovered) or 'none'}.",
    ]
    return "\n".join(lines)


def _check_rules(cases: Sequence[Any]) -> None:
    for case in cases:
        if not case.rules:
            raise SystemExit(f"{case.id}: its mf:name matches no rule of patch_conformance_rules.RULES")


def _check_unique_names(cases: Sequence[Any]) -> None:
    seen: dict[str, str] = {}
    for case in cases:
        if case.name in seen:
            raise SystemExit(f"duplicate mf:name in {case.id} and {seen[case.name]}")
        seen[case.name] = case.id


def write_suite(out: Path) -> None:
    _check_unique_names(FROM_CASES)
    _check_unique_names(TO_CASES)
    check_ids()
    _check_rules(FROM_CASES)
    _check_rules(TO_CASES)
    for direction in ("from_jelly", "to_jelly"):
        target = out / direction
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
    readme = README.format(
        from_count=len(FROM_CASES), to_count=len(TO_CASES), rule_count=len(RULES), coverage=_coverage_table()
    )
    (out / "README.md").write_bytes(readme.encode("utf-8"))
    (out / "rules.ttl").write_bytes(_rules_ttl().encode("utf-8"))
    (out / "vocabulary.ttl").write_bytes(VOCABULARY.encode("utf-8"))

    base = out / "from_jelly"
    for case in FROM_CASES:
        case_dir = base / case.id
        case_dir.mkdir(parents=True)
        data = stream_bytes(case.frames, delimited=case.delimited)
        if case.transform is not None:
            data = case.transform(data)
        (case_dir / "in.jellyp").write_bytes(data)
        for i, text in enumerate(case.outputs):
            (case_dir / f"out_{i:03d}.rdfp").write_bytes(text.encode("utf-8"))
    (base / "manifest.ttl").write_bytes(
        _manifest(
            "from_jelly", "Jelly-Patch test cases: from Jelly-Patch to RDF Patch", FROM_CASES, _from_entry
        ).encode("utf-8")
    )

    base = out / "to_jelly"
    for case in TO_CASES:
        case_dir = base / case.id
        case_dir.mkdir(parents=True)
        (case_dir / "options.jellyp").write_bytes(stream_bytes([[case.options]]))
        for i, text in enumerate(case.inputs):
            (case_dir / f"in_{i:03d}.rdfp").write_bytes(text.encode("utf-8"))
    (base / "manifest.ttl").write_bytes(
        _manifest("to_jelly", "Jelly-Patch test cases: from RDF Patch to Jelly-Patch", TO_CASES, _to_entry).encode(
            "utf-8"
        )
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="suite directory (default: %(default)s)")
    args = parser.parse_args(argv)
    write_suite(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
