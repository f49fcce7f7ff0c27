"""A small reader for generalized N-Triples / N-Quads (pure; no rdflib).

rdflib refuses generalized statements (a literal subject, a blank node predicate) and
RDF-star quoted triples in N-Triples, both of which the Jelly-RDF conformance inputs use.
This reader accepts any term in any position, reusing the term scanner of
:mod:`patchsync.terms.ntriples`: ``term term term [term] .`` per line, ``#`` comments, blank lines.

Terms that are N-Triples strings (:class:`~patchsync.terms.ntriples.NTriplesTerms`, what base
loads and ``convert`` read with) take a fast path first: one regular expression for a whole
line of the common shape (IRIs without escapes, literals whose escapes are the short ones,
blank nodes with ASCII labels, a quad or a triple), whose terms are then already in the canonical
form that adapter builds, so the line's text is sliced instead of scanned term by term. Any
other line (an escape, a quoted triple, a generalized statement, an error) goes through the
scanner, which alone decides what is valid; ``tests/test_nquads_fast.py`` checks that both
read the same statements.
"""

from __future__ import annotations

import re
from typing import TypeVar, cast

from patchsync.errors import DecodeError
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import IRI_EXCLUDED, NTriplesTerms, TermSyntaxError, scan_term, skip_ws

T = TypeVar("T")

# Each shape is the canonical output of NTriplesTerms for it (format_iri, format_bnode,
# format_literal): in IRIs no escape, in strings only the escapes format_string writes for
# a character it must escape (\t \b \n \r \f \" \\) and no character it would escape;
# no ``<_:`` blank node form.
_IRI = "<(?!_:)[^" + IRI_EXCLUDED + "]*>"
_BNODE = r"_:[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_\-])?"
_LITERAL = (
    r'"[^"\\\x00-\x1f\x7f]*(?:\\[tbnrf"\\][^"\\\x00-\x1f\x7f]*)*"(?:@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*|\^\^' + _IRI + ")?"
)
_NODE = f"(?:{_IRI}|{_BNODE})"
_COMMON_LINE = re.compile(
    rf"[ \t]*({_NODE})[ \t]+({_IRI})[ \t]+({_NODE}|{_LITERAL})(?:[ \t]+({_NODE}))?[ \t]*\.[ \t]*(?:#.*)?"
)


def read_statements(
    text: str, adapter: TermAdapter[T], *, source: str = "<text>", fast: bool = True
) -> list[tuple[T, T, T, T | None]]:
    """Every statement of ``text`` as ``(s, p, o, g)``; ``g`` is ``None`` for a triple.

    ``fast=False`` reads every line with the term scanner (the reference the fast path is
    tested against; see the module docstring). Raises :class:`~patchsync.errors.DecodeError`
    naming the line of a malformed statement.
    """
    out: list[tuple[T, T, T, T | None]] = []
    # Exactly NTriplesTerms: a subclass may refuse terms (a SPARQL target's blank nodes).
    kind: type = type(adapter)
    common = _COMMON_LINE.fullmatch if fast and kind is NTriplesTerms else None
    for number, line in enumerate(text.splitlines(), start=1):
        if common is not None:
            m = common(line)
            if m is not None:
                out.append(cast("tuple[T, T, T, T | None]", m.groups()))  # str terms: T is str
                continue
        statement = _read_line(line, adapter, source, number)
        if statement is not None:
            out.append(statement)
    return out


def _read_line(line: str, adapter: TermAdapter[T], source: str, number: int) -> tuple[T, T, T, T | None] | None:
    """One line by the term scanner: its statement, or None for a blank or comment line."""
    pos = skip_ws(line, 0)
    if pos >= len(line) or line[pos] == "#":
        return None
    terms: list[T] = []
    try:
        while True:
            pos = skip_ws(line, pos)
            if pos < len(line) and line[pos] == ".":
                rest = skip_ws(line, pos + 1)
                if rest < len(line) and line[rest] != "#":
                    raise TermSyntaxError("text after the final '.'", rest)
                break
            if len(terms) == 4:
                raise TermSyntaxError("a statement has at most four terms and ends with '.'", pos)
            term, pos = scan_term(line, pos, adapter)
            terms.append(term)
    except TermSyntaxError as exc:
        raise DecodeError(f"{exc.message} (column {exc.pos + 1})", source=source, line=number) from None
    except ValueError as exc:
        raise DecodeError(f"term rejected: {exc}", source=source, line=number) from None
    if len(terms) < 3:
        raise DecodeError("a statement needs three or four terms", source=source, line=number)
    return terms[0], terms[1], terms[2], terms[3] if len(terms) == 4 else None
