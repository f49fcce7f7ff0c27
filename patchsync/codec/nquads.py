"""A small reader for generalized N-Triples / N-Quads (pure; no rdflib).

rdflib refuses generalized statements (a literal subject, a blank node predicate) and
RDF-star quoted triples in N-Triples, both of which the Jelly-RDF conformance inputs use.
This reader accepts any term in any position, reusing the term scanner of
:mod:`patchsync.terms.ntriples`: ``term term term [term] .`` per line, ``#`` comments, blank lines.
"""

from __future__ import annotations

from typing import TypeVar

from patchsync.errors import DecodeError
from patchsync.terms import TermAdapter
from patchsync.terms.ntriples import TermSyntaxError, scan_term, skip_ws

T = TypeVar("T")


def read_statements(text: str, adapter: TermAdapter[T], *, source: str = "<text>") -> list[tuple[T, T, T, T | None]]:
    """Every statement of ``text`` as ``(s, p, o, g)``; ``g`` is ``None`` for a triple.

    Raises :class:`~patchsync.errors.DecodeError` naming the line of a malformed statement.
    """
    out: list[tuple[T, T, T, T | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        pos = skip_ws(line, 0)
        if pos >= len(line) or line[pos] == "#":
            continue
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
        out.append((terms[0], terms[1], terms[2], terms[3] if len(terms) == 4 else None))
    return out
