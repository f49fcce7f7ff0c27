"""A log of small transactions with prefix rows, the shape RDF Delta and Jena clients write.

:func:`small_tx_events` returns the events of a seeded log (rdflib terms): chained patches
of one to three transactions each, of 1-40 rows (about 24 on average). Of the rows, 60% add
a quad, 30% delete a quad stored before and 10% delete a quad that may never have been
added; 15% of the transactions are aborted (``TX … TA``); a fifth of them carry a ``PA``
row binding one of a few prefixes (now and then to another IRI); some rows come outside any
transaction (an implicit unit ending at the patch end). Subjects include blank nodes, a
third of the quads are in one of four named graphs, and literals are often non-ASCII.
``prefixes=False`` leaves the ``PA`` rows out and changes nothing else, so the two logs
differ only in them.

:func:`write_text` writes the log as RDF Patch text (``.rdfp``); the Jelly-Patch form is
written with :func:`bench.apply_workload.save_log`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from rdflib import BNode, Literal, URIRef

from .workload import simple_text

EX = "http://example.org/small/"
GRAPHS = [
    None,
    None,
    None,
    None,
    None,
    None,
    URIRef(EX + "g/a"),
    URIRef(EX + "g/b"),
    URIRef(EX + "g/c"),
    URIRef(EX + "g/d"),
]
PROPS = [URIRef(EX + p) for p in ("title", "label", "size", "seeAlso", "comment", "created", "author")]
#: Prefixes the ``PA`` rows bind; every so often one is bound to an alternative IRI.
NAMES = ("ex", "dc", "foaf", "schema", "skos", "prov", "app", "geo")
WORDS = ("café", "naïve", "Ærø", "straße", "東京", "Москва", "ελληνικά", "plain", "text", "señal", "🙂 ok")


def _object(rng: random.Random, p: URIRef, n: int) -> Any:
    if p == PROPS[3]:
        return URIRef(f"{EX}thing/{rng.randrange(20_000)}")
    if p == PROPS[2]:
        return Literal(rng.randrange(10**5))
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
    return Literal(f"{words} {n}", lang=rng.choice((None, None, "en", "de", "ja")))


def small_tx_events(patches: int = 4000, seed: int = 35, *, prefixes: bool = True) -> list[Any]:
    """The events of the log (see the module docstring)."""
    from patchsync.events import Add, Delete, Header, PatchEnd, PrefixAdd, TxAbort, TxCommit, TxStart

    rng = random.Random(seed)
    live: list[tuple[Any, Any, Any, Any]] = []
    events: list[Any] = []
    for n in range(patches):
        events.append(Header("id", URIRef(f"urn:small:{n}")))
        if n:
            events.append(Header("prev", URIRef(f"urn:small:{n - 1}")))
        units = rng.choice((1, 2, 3))
        for u in range(units):
            implicit = u == units - 1 and rng.random() < 0.1
            aborted = not implicit and rng.random() < 0.15
            if not implicit:
                events.append(TxStart())
            if rng.random() < 0.2:
                name = rng.choice(NAMES)
                iri = URIRef(f"http://ns.example.org/{name}/" + ("v2/" if rng.random() < 0.2 else ""))
                if prefixes:
                    events.append(PrefixAdd(name, iri))
            added: list[tuple[Any, Any, Any, Any]] = []
            removed: list[int] = []
            for _ in range(rng.randint(1, 40)):
                kind = rng.random()
                if kind < 0.3 and live:
                    index = rng.randrange(len(live))
                    events.append(Delete(*live[index]))
                    removed.append(index)
                    continue
                e = rng.randrange(30_000)
                s = BNode(f"n{e}") if e % 8 == 0 else URIRef(f"{EX}thing/{e}")
                p = rng.choice(PROPS)
                quad = (s, p, _object(rng, p, rng.randrange(n + 1)), rng.choice(GRAPHS))
                if kind < 0.4:  # a delete of a quad that may be absent
                    events.append(Delete(*quad))
                    continue
                events.append(Add(*quad))
                added.append(quad)
            if aborted:
                events.append(TxAbort())
                continue
            for index in sorted(set(removed), reverse=True):
                live[index] = live[-1]
                live.pop()
            live.extend(added)
            if not implicit:
                events.append(TxCommit())
        events.append(PatchEnd())
    return events


def write_text(events: list[Any], path: Path) -> None:
    """The log as RDF Patch text at ``path``."""
    path.write_text(simple_text(events), encoding="utf-8")


__all__ = ["small_tx_events", "write_text"]
