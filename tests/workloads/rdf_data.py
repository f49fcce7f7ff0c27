"""A deterministic dataset of N-Triples term strings for Jelly-RDF tests and benchmarks.

:func:`generate_quads` yields ``(s, p, o, g)`` tuples of N-Triples strings (``g`` is
``None`` for the default graph) using every RDF 1.1 term kind in every position it may
take: IRIs from several namespaces (with and without ``/`` or ``#``), blank node subjects,
objects and graph names, simple, language-tagged and typed literals (including non-ASCII,
quotes, newlines and long texts), the default graph, named IRI graphs and blank node
graphs. Statements come in subject bursts, as in real data, so repeated terms and lookups
get realistic use.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from patchsync.terms.ntriples import NTriplesTerms

NT = NTriplesTerms()
XSD = "http://www.w3.org/2001/XMLSchema#"

_NAMESPACES = [
    "http://example.org/resource/",
    "https://www.wikidata.org/entity/Q",
    "http://dbpedia.org/resource/",
    "urn:uuid:",
    "http://example.com/a/deep/path/to/things/",
    "http://example.net/doc#",
]
_PREDICATES = [NT.iri(f"http://example.org/vocab/p{i}") for i in range(40)] + [
    NT.iri("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
    NT.iri("http://www.w3.org/2000/01/rdf-schema#label"),
    NT.iri("http://schema.org/name"),
    NT.iri("http://purl.org/dc/terms/created"),
]
_CLASSES = [NT.iri(f"http://example.org/vocab/Class{i}") for i in range(20)]
_GRAPHS = [NT.iri(f"http://example.org/graph/{i}") for i in range(20)] + [NT.bnode(f"graph{i}") for i in range(3)]
_WORDS = ["alpha", "beta", "Zürich", "東京", "Москва", "naïve café", 'say "hi"', "line\nbreak", "emoji 🎉", "tab\there"]
_LANGS = ["en", "de", "fr", "ja", "en-GB", "pt-BR"]


def _literal(rng: random.Random, i: int) -> str:
    kind = rng.randrange(10)
    if kind == 0:
        return NT.literal(str(rng.randrange(-1000, 100000)), None, XSD + "integer")
    if kind == 1:
        return NT.literal(f"20{rng.randrange(10, 30)}-0{rng.randrange(1, 10)}-1{rng.randrange(10)}", None, XSD + "date")
    if kind == 2:
        return NT.literal(f"{rng.random() * 1000:.3f}", None, XSD + "decimal")
    if kind == 3:
        return NT.literal(rng.choice(["true", "false"]), None, XSD + "boolean")
    if kind in (4, 5):
        return NT.literal(f"{rng.choice(_WORDS)} {i}", rng.choice(_LANGS))
    if kind == 6 and rng.randrange(50) == 0:
        return NT.literal(" ".join(rng.choice(_WORDS) for _ in range(rng.randrange(50, 400))))
    return NT.literal(f"{rng.choice(_WORDS)} {rng.randrange(1000)}")


def generate_quads(
    count: int, *, seed: int = 20240601, quads: bool = True
) -> Iterator[tuple[str, str, str, str | None]]:
    """``count`` statements; with ``quads=False`` every statement is in the default graph."""
    rng = random.Random(seed)
    made = 0
    entity = 0
    while made < count:
        entity += 1
        if rng.randrange(8) == 0:
            subject = NT.bnode(f"b{entity}")
        else:
            ns = rng.choice(_NAMESPACES)
            subject = NT.iri(f"{ns}{entity}")
        graph = None
        if quads and rng.randrange(2):
            graph = rng.choice(_GRAPHS)
        burst = min(rng.randrange(3, 12), count - made)
        for j in range(burst):
            if j == 0:
                p, o = _PREDICATES[40], rng.choice(_CLASSES)
            else:
                p = rng.choice(_PREDICATES)
                r = rng.randrange(6)
                if r == 0:
                    o = NT.iri(f"{rng.choice(_NAMESPACES)}{rng.randrange(max(entity, 1))}")
                elif r == 1:
                    o = NT.bnode(f"b{rng.randrange(max(entity, 1))}")
                else:
                    o = _literal(rng, made)
            yield subject, p, o, graph
            made += 1
