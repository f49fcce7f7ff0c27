"""NDJSON-LD and YAML-LD message logs (RDF Messages draft §2.2, §2.3; docs/design.md §8).

NDJSON-LD holds one JSON-LD document a line, YAML-LD one YAML document (``---``) a message.
Each document goes through rdflib's JSON-LD parser and serializer; YAML through PyYAML
(the ``yaml`` extra), imported only when a YAML-LD log is read or written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from patchsync._lazy import optional_dependency
from patchsync.errors import DecodeError, UsageError
from patchsync.logs.rdf_files import nt_quads
from patchsync.terms import BNODE, IRI, LITERAL
from patchsync.terms.ntriples import NTriplesTerms

Quad = tuple[str, str, str, str | None]

_NT = NTriplesTerms()
_DEFAULT = _NT.default_graph()
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
#: Python's parsers recurse once per level of nesting; past its limit the input is refused.
_TOO_DEEP = "nested too deeply"


def _yaml() -> Any:
    with optional_dependency("YAML-LD"):
        import yaml
    return yaml


def _quads(document: Any, source: str, number: int, line: int | None) -> list[Quad]:
    """The quads of one JSON-LD document (already parsed JSON), as N-Triples strings."""
    import rdflib
    from rdflib import Dataset
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    if not isinstance(document, (dict, list)):
        rule = f"a JSON-LD document is an object or an array, not {type(document).__name__}"
        raise DecodeError(rule, source=source, message=number, line=line)
    dataset = Dataset()
    saved = rdflib.NORMALIZE_LITERALS
    # Lexical forms as written ("01"^^xsd:integer stays "01"), as for every other format.
    rdflib.NORMALIZE_LITERALS = False
    try:
        # YAML's own types (dates) as their text: JSON-LD has no other way to hold them.
        dataset.parse(data=json.dumps(document, default=str), format="json-ld")
    except RecursionError:
        raise DecodeError(_TOO_DEEP, source=source, message=number, line=line) from None
    except Exception as exc:  # rdflib raises many unrelated types for bad input
        rule = f"not valid JSON-LD: {exc}".splitlines()[0]
        raise DecodeError(rule, source=source, message=number, line=line) from None
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    return nt_quads(
        (s, p, o, None if g == DATASET_DEFAULT_GRAPH_ID else g)
        for s, p, o, g in dataset.quads((None, None, None, None))
    )


def read_json_messages(text: str, fmt: str, source: str) -> Iterator[list[Quad]]:
    """The messages of an NDJSON-LD (``fmt`` ``"ndjsonld"``) or YAML-LD (``"yamlld"``) log."""
    if fmt == "ndjsonld":
        number = 0
        for index, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            number += 1
            try:
                document = json.loads(line)
            except json.JSONDecodeError as exc:
                rule = f"not valid JSON: {exc.msg} (column {exc.colno})"
                raise DecodeError(rule, source=source, message=number, line=index) from None
            except RecursionError:
                raise DecodeError(_TOO_DEEP, source=source, message=number, line=index) from None
            yield _quads(document, source, number, index)
        return
    yaml = _yaml()
    # Composed (not loaded) document by document: a node knows the line its document starts on.
    loader = _loader(yaml)(text)
    number = 0
    try:
        while loader.check_node():
            number += 1
            node = loader.get_node()
            document = loader.construct_document(node)
            yield _quads(document, source, number, node.start_mark.line + 1)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        rule = f"not valid YAML: {getattr(exc, 'problem', None) or exc}".splitlines()[0]
        where = None if mark is None else int(mark.line) + 1
        raise DecodeError(rule, source=source, message=number, line=where) from None
    except RecursionError:
        raise DecodeError(_TOO_DEEP, source=source, message=number) from None
    finally:
        loader.dispose()


def _loader(yaml: Any) -> Any:
    """PyYAML's safe loader without aliases: ``*a`` repeats a node without its size on the
    page, so a few lines of aliases can stand for more JSON-LD than memory holds."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not read in YAML-LD", mark)
            return super().compose_node(parent, index)

    return Loader


def _object(term: str) -> dict[str, str]:
    u = _NT.unpack(term)
    if u[0] == LITERAL:
        value = {"@value": u[1]}
        if u[2]:
            value["@language"] = u[2]
        elif u[3] and u[3] != _XSD_STRING:
            value["@type"] = u[3]
        return value
    return {"@id": _node(term, "an object")}


def _node(term: str, position: str) -> str:
    u = _NT.unpack(term)
    if u[0] == IRI:
        return str(u[1])
    if u[0] == BNODE:
        return f"_:{u[1]}"
    raise UsageError(f"JSON-LD cannot hold {term} as {position}: write .nq or .jelly")


def _document(message: Sequence[Quad]) -> list[dict[str, Any]]:
    """One message as an expanded JSON-LD document.

    Written here rather than by rdflib's serializer, which turns numbers and booleans into
    JSON values and so loses their lexical forms (``"01"^^xsd:integer`` would come back as
    ``"1"``); ``@value`` strings keep them.
    """
    graphs: dict[str | None, dict[str, dict[str, Any]]] = {}
    for s, p, o, g in message:
        graph = None if g is None or g == _DEFAULT else _node(g, "a graph name")
        subject = _node(s, "a subject")
        predicate = _NT.unpack(p)
        if predicate[0] != IRI:
            raise UsageError(f"JSON-LD cannot hold {p} as a predicate: write .nq or .jelly")
        node = graphs.setdefault(graph, {}).setdefault(subject, {"@id": subject})
        node.setdefault(str(predicate[1]), []).append(_object(o))
    document: list[dict[str, Any]] = list(graphs.pop(None, {}).values())
    document.extend({"@id": name, "@graph": list(nodes.values())} for name, nodes in graphs.items())
    return document


def write_json_messages(messages: Sequence[Sequence[Quad]], fmt: str) -> str:
    """``messages`` as an NDJSON-LD or YAML-LD log (text)."""
    documents = [_document(message) for message in messages]
    if fmt == "ndjsonld":
        return "".join(json.dumps(d, ensure_ascii=False, separators=(",", ":")) + "\n" for d in documents)
    yaml = _yaml()
    # Every document starts with "---", so an empty first message is a document too.
    return str(yaml.safe_dump_all(documents, explicit_start=True, allow_unicode=True, sort_keys=False))
