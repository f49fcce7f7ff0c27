"""RDF Message Logs read and written in every format (docs/design.md §8).

Rules cited from the RDF Messages draft, https://w3c-cg.github.io/rsp/spec/messages (Living
Document), by section. Its examples are vendored in tests/data/messages (see the README there).
"""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path

import pytest

from patchsync import formats
from patchsync.codec.messages import split_messages
from patchsync.errors import DecodeError, FormatError, UsageError
from patchsync.logs.messages import Message, MessageReader, convert_messages, scope_labels, write_messages

DATA = Path(__file__).parent / "data" / "messages"
EX = "https://example.org/"
SOSA = "http://www.w3.org/ns/sosa/"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
XSD = "http://www.w3.org/2001/XMLSchema#"

#: Every message-log format.
ALL = formats.names(formats.MESSAGES)
#: Those that can name graphs.
QUAD_FORMATS = [f.name for f in formats.with_role(formats.MESSAGES) if f.graphs]


def read(data: bytes | str, fmt: str, source: str = "log") -> list[Message]:
    raw = data.encode() if isinstance(data, str) else data
    return list(MessageReader(raw, fmt, source=source))


def write(messages: list[Message], fmt: str) -> bytes:
    out = io.BytesIO()
    write_messages(messages, out, fmt)
    return out.getvalue()


def same(a: list[Message], b: list[Message]) -> bool:
    """The same messages in the same order; a message's statements in any order."""
    return [sorted(m, key=str) for m in a] == [sorted(m, key=str) for m in b]


TRIPLES: list[Message] = [
    [
        (f"<{EX}s1>", RDF_TYPE, f"<{EX}C>", None),
        (f"<{EX}s1>", f"<{EX}p>", '"01"^^<http://www.w3.org/2001/XMLSchema#integer>', None),
        (f"<{EX}s1>", f"<{EX}q>", "_:x", None),
        ("_:x", f"<{EX}label>", '"chat"@fr', None),
    ],
    [],
    [(f"<{EX}s2>", f"<{EX}p>", '"line\\nbreak \\"quoted\\""', None), ("_:x", f"<{EX}p>", f"<{EX}s2>", None)],
    [(f"<{EX}s3>", f"<{EX}p>", '"1.0E0"^^<http://www.w3.org/2001/XMLSchema#double>', None)],
    [],
]
QUADS: list[Message] = [
    *TRIPLES[:2],
    [(f"<{EX}s4>", f"<{EX}p>", "_:x", f"<{EX}g1>"), ("_:x", f"<{EX}p>", '"v"', f"<{EX}g1>")],
    [(f"<{EX}s5>", f"<{EX}p>", '"w"', None), (f"<{EX}s5>", f"<{EX}p>", '"w"', f"<{EX}g2>")],
]


def test_the_drafts_log_is_four_messages_one_empty() -> None:
    """§1.4 RDF Message Logs: the draft's example log holds a context message, an observation,
    an empty message and another observation."""
    messages = read((DATA / "draft-log.ttl").read_bytes(), "ttl")
    assert [len(m) for m in messages] == [2, 3, 0, 3]
    assert (f"<{EX}Stream1>", RDF_TYPE, f"<{EX}Dataset>", None) in messages[0]
    assert (f"<{EX}Observation2>", f"<{SOSA}resultTime>", f'"2026-01-01T00:10:00Z"^^<{XSD}dateTime>', None) in messages[
        3
    ]


def test_the_drafts_example_messages_keep_their_prefixes_and_blank_nodes() -> None:
    """§1.1 RDF Messages: the two example messages; the observation's result is a blank node
    written as ``[ ... ]``. §2.1: a repeated PREFIX directive is allowed (our choice for the
    draft's open question)."""
    like, observation = read((DATA / "draft-messages.ttl").read_bytes(), "ttl")
    assert len(like) == 3 and len(observation) == 6
    (result,) = [o for s, p, o, _ in observation if p == f"<{SOSA}hasResult>"]
    assert result.startswith("_:")
    assert (result, "<http://qudt.org/schema/qudt/hasUnit>", "<http://qudt.org/vocab/unit/DEG_C>", None) in observation


@pytest.mark.parametrize("name", ["draft-products.ndjsonld", "draft-products.yamlld"])
def test_the_drafts_json_and_yaml_examples_are_two_products(name: str) -> None:
    """§2.2 JSON-LD (one document a line) and §2.3 YAML-LD (one YAML document a message)."""
    fmt = formats.by_suffix(name)
    assert fmt is not None
    first, second = read((DATA / name).read_bytes(), fmt.name)
    assert ("_:" in first[0][0]) and len(first) == len(second) == 3
    assert any(o == '"Hairdryer DRY 2000"' for _, _, o, _ in first)
    assert any(o == '"27-inch 4K Monitor 2700P"' for _, _, o, _ in second)


def test_a_log_starting_with_a_delimiter_does_not_start_with_an_empty_message() -> None:
    """§2.1: "If it does start with a delimiter, the content after the delimiter is part of the
    first message and the document did not start with an empty message"."""
    text = "# @message\n<a:s> <a:p> <a:o> .\n"
    assert read(text, "nt") == [[("<a:s>", "<a:p>", "<a:o>", None)]]
    # Only comments and blank lines before it: still not a message.
    assert len(read("# header\n\n  #   @message first\n<a:s> <a:p> <a:o> .\n", "nq")) == 1
    assert read("", "nt") == [] and read("# @message\n", "nt") == [[]]


def test_content_before_the_first_delimiter_is_the_first_message() -> None:
    """§2.1: "The document does not need to start with a delimiter"; "Triples are added to the
    current message as long as no delimiter or EOF has been encountered"."""
    text = "<a:s> <a:p> <a:o> .\n#@message with a comment after it\n<a:s> <a:p> <a:o2> .\n<a:s> <a:p> <a:o3> .\n"
    assert [len(m) for m in read(text, "nt")] == [1, 2]


def test_empty_messages_between_and_after_delimiters_are_kept() -> None:
    """§1.1: "The dataset of the message can be empty"; §2.1: a delimiter finalizes the current
    message and opens the next, so two delimiters in a row hold an empty message."""
    text = "<a:s> <a:p> <a:o> .\n# @message\n# @message\n<a:s> <a:p> <a:o> .\n# @message\n"
    assert [len(m) for m in read(text, "nt")] == [1, 0, 1, 0]


def test_a_delimiter_is_a_whole_comment_line_only() -> None:
    """§2.1: the delimiter is a comment matching ``^\\s*@message``: not a comment after a
    statement, not a comment about something else."""
    text = '<a:s> <a:p> "# @message" . # @message\n# see @message\n <a:s> <a:p> <a:o> .\n'
    assert [len(m) for m in read(text, "nt")] == [2]
    pieces = split_messages("a\n\t# \t@message x\nb\n# @message")
    assert [(p.text, p.line, p.leading) for p in pieces] == [("a\n", 1, True), ("b\n", 3, False), ("", 4, False)]


@pytest.mark.parametrize("fmt", ALL)
def test_empty_messages_survive_every_format(fmt: str) -> None:
    """§1.1: an RDF Message can be empty; empty first, middle and last messages come back."""
    messages: list[Message] = [[], [("<a:s>", "<a:p>", "<a:o>", None)], [], [], [("<a:s>", "<a:p>", '"x"', None)], []]
    assert read(write(messages, fmt), fmt) == messages
    assert read(write([], fmt), fmt) == []
    assert read(write([[]], fmt), fmt) == [[]]


@pytest.mark.parametrize(("first", "second"), list(itertools.product(ALL, ALL)))
def test_every_format_round_trips_through_every_other(first: str, second: str) -> None:
    """§3.1: "all RDF Messages are preserved when deserializing it again. They are streamed out in
    the same order": counts, order and contents (labels and lexical forms as written) kept."""
    messages = QUADS if first in QUAD_FORMATS and second in QUAD_FORMATS else TRIPLES
    there = read(write(messages, first), first)
    assert same(there, messages)
    back = read(write(there, second), second)
    assert same(back, messages)
    out = io.BytesIO()
    assert convert_messages(write(messages, first), first, out, second) == len(messages)
    assert same(read(out.getvalue(), second), messages)


def test_blank_nodes_are_scoped_to_their_message() -> None:
    """§1.4 note: "Blank node identifiers in RDF Message Streams and RDF Message Logs are scoped to
    the message they occur in": ``_:x`` in two messages is two nodes once they are merged."""
    text = "<a:s> <a:p> _:x .\n# @message\n<a:s> <a:p> _:x .\n_:x <a:q> _:m1_x .\n"
    messages = read(text, "nt")
    assert messages[0][0][2] == messages[1][0][2] == "_:x"  # each message keeps its labels
    merged = [q for m in scope_labels(messages) for q in m]
    nodes = {t for q in merged for t in q if t and t.startswith("_:")}
    assert nodes == {"_:m1_x", "_:m2_x", "_:m2_m1_x"}
    out = io.BytesIO()
    convert_messages(text.encode(), "nt", out, "nq", out_messages=False)
    assert len(read(out.getvalue(), "nq")[0]) == 3
    plain = {line.split()[2] for line in out.getvalue().decode().splitlines() if line.startswith("<a:s>")}
    assert len(plain) == 2


def test_blank_nodes_in_quoted_triples_are_scoped_too() -> None:
    """§1.4 note (blank node scope) for a blank node inside an RDF-star quoted triple."""
    (message,) = scope_labels([[("<< _:a <a:p> _:b >>", "<a:q>", "<a:o>", None)]])
    assert message[0][0] == "<< _:m1_a <a:p> _:m1_b >>"


def test_turtle_directives_hold_until_the_end_of_the_log() -> None:
    """§2.1 open question ("Should we allow repeated BASE and PREFIX directives ... Should they
    override the previously encountered directives?"): yes and yes, as in one document."""
    text = (
        "@prefix ex: <http://one/> .\n@base <http://base/> .\nex:a ex:b <c> .\n"
        "# @message\nex:a ex:b <c> .\n"
        "# @message\n@prefix ex: <http://two/> .\n@base <http://other/> .\nex:a ex:b <c> .\n"
    )
    first, second, third = read(text, "ttl")
    assert first == second == [("<http://one/a>", "<http://one/b>", "<http://base/c>", None)]
    assert third == [("<http://two/a>", "<http://two/b>", "<http://other/c>", None)]


def test_trig_messages_name_graphs() -> None:
    """§2.1 applies to TriG: a message can hold several graphs."""
    text = "@prefix ex: <http://e/> .\nex:g { ex:a ex:b ex:c }\n# @message\nex:a ex:b ex:c .\nex:h { ex:a ex:b ex:c }\n"
    first, second = read(text, "trig")
    assert first == [("<http://e/a>", "<http://e/b>", "<http://e/c>", "<http://e/g>")]
    assert sorted(q[3] or "" for q in second) == ["", "<http://e/h>"]


def test_jelly_frames_are_messages() -> None:
    """§2.5 Other formats / §3.3: one Jelly frame is one message; an empty message is an empty frame."""
    from patchsync.codec.framing import Framer

    data = write(QUADS, "jelly")
    framer = Framer()
    framer.feed(data)
    framer.close()
    frames = 0
    while framer.next_frame() is not None:
        frames += 1
    assert frames == len(QUADS)
    out = io.BytesIO()
    convert_messages(b"@prefix ex: <http://e/> .\n# @message\nex:a ex:b ex:c .\n", "ttl", out, "jelly")
    reader = MessageReader(out.getvalue(), "jelly")
    assert list(reader) == [[("<http://e/a>", "<http://e/b>", "<http://e/c>", None)]]
    assert reader.namespaces == [("ex", "http://e/")]


BAD = {
    "nt": ("<a:s> <a:p> <a:o> .\n# @message\n<a:s> <a:p> <a:o> .\n<a:s> <a:p> .\n", 2, 4),
    "nq": ("# @message\n<a:s> <a:p> <a:o> <a:g> .\n# @message\n\n<a:s> <a:p> <a:o> <a:g> <a:h> .\n", 2, 5),
    "ttl": (
        "@prefix ex: <http://e/> .\nex:a ex:b ex:c .\n# @message\nex:a ex:b ex:c .\n# @message\nex:a ex:b .\n",
        3,
        6,
    ),
    "trig": ("# @message\n<a:g> { <a:s> <a:p> <a:o> }\n# @message\n<a:g> { <a:s> <a:p> }\n", 2, 4),
    "ndjsonld": ('{"@id": "a:s", "a:p": "x"}\n{"@id": "a:s", \n', 2, 2),
    "yamlld": ('"@id": a:s\n---\n"@id": a:s\n"a:p": [x\n', 2, 5),
}


@pytest.mark.parametrize("fmt", sorted(BAD))
def test_a_malformed_message_names_its_number_and_line(fmt: str) -> None:
    """§2.1 (messages counted as the parser in message mode opens them): an error names the
    message and the line of the file, after the messages before it were read."""
    text, number, line = BAD[fmt]
    reader = iter(MessageReader(text.encode(), fmt, source="bad.log"))
    for _ in range(number - 1):
        next(reader)
    with pytest.raises(DecodeError) as caught:
        next(reader)
    assert caught.value.message == number and caught.value.line == line, str(caught.value)
    assert str(caught.value).startswith(f"bad.log, message {number}, line {line}: ")


def test_ntriples_messages_cannot_name_graphs() -> None:
    with pytest.raises(DecodeError, match=r"message 1, line 2: an N-Triples message cannot name a graph"):
        read("# @message\n<a:s> <a:p> <a:o> <a:g> .\n", "nt")


def test_formats_that_cannot_hold_what_a_message_holds_refuse_it() -> None:
    with pytest.raises(UsageError):
        write([[("<a:s>", "<a:p>", "<a:o>", "<a:g>")]], "ttl")
    with pytest.raises(UsageError):
        write([[("<< <a:s> <a:p> <a:o> >>", "<a:p>", "<a:o>", None)]], "ndjsonld")
    with pytest.raises(FormatError):
        write([], "rdf-thrift")
    with pytest.raises(FormatError):
        MessageReader(b"", "rdf-thrift")


def test_media_types_carry_the_messages_parameter() -> None:
    """§2.1: ``Content-Type: application/trig; version=1.2; messages=rdfm`` marks a message log;
    §2.3 proposes ``application/rdfm+yaml``, always one."""
    found, messages = formats.from_media_type("application/trig; version=1.2; messages=rdfm")
    assert (found.name, messages) == ("trig", True)
    assert formats.from_media_type("application/n-quads")[1] is False
    assert formats.from_media_type('Application/N-Quads; charset=utf-8; Messages="rdfm"')[1] is True
    assert formats.from_media_type("application/rdfm+yaml") == (formats.get("yamlld"), True)
    assert formats.media_type("nq", messages=True) == "application/n-quads; messages=rdfm"
    assert formats.media_type("ndjsonld", messages=True) == "application/x-ld+ndjson"
    assert formats.media_type("nq") == "application/n-quads"
    with pytest.raises(FormatError):
        formats.from_media_type("application/n-quads; messages=other")
    with pytest.raises(FormatError):
        formats.from_media_type("application/rdf+xml; messages=rdfm")
    with pytest.raises(FormatError):
        formats.media_type("rdfxml", messages=True)


def test_a_hundred_thousand_messages_are_read() -> None:
    """§1.3: a message stream is potentially unbounded; a 100,000-message N-Quads log is read
    (and written) message by message, counts and order kept."""
    count = 100_000
    text = "".join(f'# @message\n<http://e/s{i}> <http://e/p> "{i}" .\n' for i in range(count))
    messages = read(text, "nq")
    assert len(messages) == count and messages[-1] == [
        (f"<http://e/s{count - 1}>", "<http://e/p>", f'"{count - 1}"', None)
    ]
    assert write(messages, "nq").decode() == text


HOSTILE = {
    "a number": ("ndjsonld", '{"@id": "a:s"}\n5\n', 2, "a JSON-LD document is an object or an array, not int"),
    "deep JSON": ("ndjsonld", "[" * 100_000 + "]" * 100_000 + "\n", 1, "nested too deeply"),
    "deep YAML": ("yamlld", "--- []\n---\n" + "[" * 100_000 + "]" * 100_000 + "\n", 2, "nested too deeply"),
    "YAML aliases": ("yamlld", "a: &a [1, 2]\nb: [*a, *a]\n", 1, "aliases (*name) are not read in YAML-LD"),
    "a Python tag": ("yamlld", "!!python/object:os.system {}\n", 1, "could not determine a constructor"),
    "deep quoted triples": ("nq", "<< " * 50_000 + "<a:s> <a:p> <a:o>" + " >> <a:p> <a:o>" * 50_000 + " .\n", 1,
                            "nested too deeply"),
    "deep Turtle": ("ttl", "@prefix : <http://e/> .\n:a :p " + "[ :p " * 50_000 + ":o" + " ]" * 50_000 + " .\n", 1,
                    "recursion"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_messages_are_refused_with_their_number(case: str) -> None:
    """§2.2, §2.3: a line (NDJSON-LD) or YAML document (YAML-LD) is one JSON-LD document; input
    built to exhaust the parser is refused naming its message, never a RecursionError, and
    YAML aliases (a few lines standing for any amount of JSON) are not expanded."""
    fmt, text, number, rule = HOSTILE[case]
    with pytest.raises(DecodeError, match=re.escape(rule)) as caught:
        read(text, fmt)
    assert caught.value.message == number
