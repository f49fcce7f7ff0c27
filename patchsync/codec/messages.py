"""Message mode for the RDF text formats: where one RDF Message ends and the next begins.

The RDF Messages draft (<https://w3c-cg.github.io/rsp/spec/messages>, §2.1 "N-Triples,
N-Quads, Turtle and TriG"; docs/design.md §8) delimits messages
in N-Triples, N-Quads, Turtle and TriG with a comment line: a line matching
:data:`DELIMITER` ends the current message (text after ``@message`` is a comment). This module
only cuts text into pieces; parsing each piece is the readers' work. It is pure: text in,
pieces out, so a reader can name the message and the line of the file where a piece failed.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: A message delimiter: a comment line whose text starts with ``@message``. ``[^\S\n]`` is
#: whitespace within the line, so a delimiter never swallows the blank lines before it.
DELIMITER = re.compile(r"^[^\S\n]*#[^\S\n]*@message[^\n]*(?:\n|$)", re.MULTILINE)

#: The delimiter a writer puts before every message.
DELIMITER_LINE = "# @message\n"


class MessageText(NamedTuple):
    """One piece of a message-mode document.

    ``text`` is the piece without its delimiter, ``line`` the line of the document it starts
    on (1-based), and ``leading`` whether it is the text before the first delimiter: that
    piece is a message only if it holds a statement (a document that starts with a
    delimiter, or with only comments and directives before it, does not start with an empty
    message).
    """

    text: str
    line: int
    leading: bool


def split_messages(text: str) -> list[MessageText]:
    """Cut a message-mode document into its pieces, in order (see :class:`MessageText`)."""
    pieces: list[MessageText] = []
    start = 0
    line = 1
    for found in DELIMITER.finditer(text):
        pieces.append(MessageText(text[start : found.start()], line, not pieces))
        line += text.count("\n", start, found.end())
        start = found.end()
    pieces.append(MessageText(text[start:], line, not pieces))
    return pieces
