"""A deterministic, seeded RDF Patch log for the codec benchmarks.

:func:`generate` returns patchsync events holding rdflib terms: a sequence of patches,
each ``H id <uuid:…>`` / ``H prev <uuid:…>`` followed by ``TX`` … ``TC`` and a
:class:`~patchsync.events.PatchEnd`. "Rows" are content rows, one per line of the RDF
Patch text form (``H``, ``TX``, ``TC``, ``A``, ``D``, ``PA``, ``PD``); ``PatchEnd`` is not
a row. The total is exactly the number asked for.

The data is meant to look like a real change log rather than a best case:

* subjects come from many namespaces (numeric ids, Wikidata/DBpedia-style names, UUID
  URNs without any ``/`` or ``#``, deep paths, fragment IRIs); about 70% of entity bursts
  introduce a new subject, the rest revisit recent ones, so the name lookup churns;
* few predicates (about 40, from rdf, rdfs, owl, foaf, schema, dcterms, skos, prov, an
  application vocabulary), each with its own object shape;
* objects: IRIs, simple literals, language-tagged literals, typed literals
  (xsd:integer, xsd:dateTime, xsd:decimal, xsd:boolean, xsd:date), some long (about 0.5% of
  statements carry a text of 3-24 sentences, up to a few kilobytes, with newlines and quotes), some non-ASCII (accents, CJK, Cyrillic, emoji);
* blank nodes as objects and as subjects (structured values such as addresses);
* about half the statements in the default graph, the rest in ~25 named graphs;
* about 20% of statement rows are deletes of statements added earlier (value updates
  ``D old`` + ``A new``, and whole-entity removals);
* occasional ``PA`` rows at the start of a patch and rarer ``PD`` rows (default graph).

Literals are built with ``normalize=False`` so that lexical forms survive unchanged,
which is also what the decoder's rdflib adapter produces.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from rdflib.term import BNode, Literal, URIRef

from patchsync.events import (
    Add,
    Delete,
    Event,
    Header,
    PatchEnd,
    PrefixAdd,
    PrefixDelete,
    TxCommit,
    TxStart,
)

#: Bump when the generated data changes, so cached files are not reused.
GENERATOR_VERSION = 2
DEFAULT_SEED = 20240601
DEFAULT_PATCH_ROWS = 1000

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
FOAF = "http://xmlns.com/foaf/0.1/"
SCHEMA = "https://schema.org/"
DCT = "http://purl.org/dc/terms/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
PROV = "http://www.w3.org/ns/prov#"
APP = "https://vocab.example.com/app#"
GEO = "http://www.opengis.net/ont/geosparql#"

XSD_INTEGER = URIRef(XSD + "integer")
XSD_DECIMAL = URIRef(XSD + "decimal")
XSD_DATETIME = URIRef(XSD + "dateTime")
XSD_DATE = URIRef(XSD + "date")
XSD_BOOLEAN = URIRef(XSD + "boolean")
WKT = URIRef(GEO + "wktLiteral")

PREFIXES = [
    ("rdf", RDF),
    ("rdfs", RDFS),
    ("owl", OWL),
    ("foaf", FOAF),
    ("schema", SCHEMA),
    ("dct", DCT),
    ("skos", SKOS),
    ("prov", PROV),
    ("app", APP),
    ("xsd", XSD),
    ("geo", GEO),
    ("ex", "http://example.org/resource/"),
]

# Subject namespaces: (weight, kind, base). The kind picks how local names look.
SUBJECT_SPACES = [
    (20, "num", "http://example.org/resource/item/"),
    (14, "num", "https://data.example.com/person/"),
    (10, "wd", "http://www.wikidata.org/entity/"),
    (8, "dbp", "http://dbpedia.org/resource/"),
    (8, "uuid", "urn:uuid:"),
    (7, "deep", "https://id.example.net/org/"),
    (6, "num", "https://shop.example.com/catalog/product/"),
    (5, "frag", "http://purl.example.org/dataset/2023/records#"),
    (5, "num", "https://api.example.io/v2/orders/"),
    (4, "dbp", "https://en.wikipedia.org/wiki/"),
    (4, "num", "http://sensors.example.org/obs/"),
    (3, "num", "https://geo.example.org/place/"),
    (3, "frag", "https://w3id.example.org/kg/concepts#"),
    (3, "num", "http://library.example.edu/book/"),
]

CLASSES = [
    URIRef(SCHEMA + c)
    for c in (
        "Person",
        "Organization",
        "Product",
        "Place",
        "CreativeWork",
        "Event",
        "Offer",
        "Book",
        "Dataset",
        "Order",
        "PostalAddress",
        "Review",
    )
]
CLASSES += [
    URIRef(FOAF + "Person"),
    URIRef(FOAF + "Agent"),
    URIRef(SKOS + "Concept"),
    URIRef(PROV + "Entity"),
    URIRef(APP + "Sensor"),
    URIRef(APP + "Observation"),
    URIRef(OWL + "Thing"),
]

LANGS = ["en", "en", "en", "de", "fr", "es", "it", "nl", "pl", "ja", "zh-Hans", "ru", "pt-BR", "sv", "ar"]

SYLLABLES = {
    "latin": [
        "ka",
        "lo",
        "mi",
        "ne",
        "ra",
        "to",
        "su",
        "vi",
        "el",
        "an",
        "or",
        "is",
        "tek",
        "bar",
        "sol",
        "dan",
        "mar",
        "lin",
        "gro",
        "fel",
        "ost",
        "ber",
        "qui",
        "zan",
    ],
    "accent": ["é", "ü", "ö", "ñ", "ç", "å", "ø", "ł", "ž", "ő", "ã", "ß", "à", "ê"],
    "ja": ["東京", "大阪", "さくら", "やま", "かわ", "データ", "研究", "株式会社", "センター", "図書館"],
    "zh": ["北京", "上海", "数据", "研究所", "大学", "图书", "公司", "中心", "知识", "网络"],
    "ru": ["Москва", "данные", "город", "улица", "книга", "завод", "центр", "Пётр", "Иван", "река"],
    "ar": ["مدينة", "بيانات", "كتاب", "مركز", "جامعة"],
}
EMOJI = ["🚀", "✨", "📚", "🌍", "🔥", "✅", "🎉", "💡"]
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "were",
    "which",
    "this",
    "are",
    "be",
    "had",
    "not",
    "or",
    "one",
    "first",
    "new",
    "data",
    "record",
    "value",
    "system",
    "update",
    "version",
    "source",
    "station",
    "sample",
    "library",
    "river",
    "city",
    "north",
    "south",
    "product",
    "order",
    "quality",
    "measurement",
    "agreement",
    "research",
    "network",
    "energy",
    "archive",
    "report",
]


@dataclass
class WorkloadStats:
    """What the generator produced (counted over content rows)."""

    rows: int = 0
    patches: int = 0
    adds: int = 0
    deletes: int = 0
    headers: int = 0
    tx: int = 0
    prefix_adds: int = 0
    prefix_deletes: int = 0
    literal_objects: int = 0
    bnode_terms: int = 0
    named_graph_statements: int = 0
    default_graph_statements: int = 0
    distinct_subjects: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        d = dict(self.__dict__)
        d.pop("extra")
        d.update(self.extra)
        return d


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.iris: dict[str, URIRef] = {}
        self.subject_count = 0
        self.recent_subjects: list[URIRef | BNode] = []
        self.bnode_count = 0
        # Statements that may be deleted later: (s, p, o, g), most recent last.
        self.live: list[tuple[object, URIRef, object, URIRef | None]] = []
        self.by_subject: dict[object, list[int]] = {}
        self.graphs: list[URIRef | None] = [None] * 25 + [
            URIRef(u)
            for u in (
                [f"http://example.org/graph/source-{i}" for i in range(12)]
                + [f"https://data.example.com/graphs/tenant/{i}/current" for i in range(8)]
                + [f"urn:x-graph:ingest:{i}" for i in range(5)]
            )
        ]
        self.space_weights = [w for w, _, _ in SUBJECT_SPACES]
        self.predicates = self._predicates()
        self.pred_weights = [w for w, _, _ in self.predicates]
        self.pred_kind = {p: kind for _, p, kind in self.predicates}

    # -- terms ------------------------------------------------------------------------

    def iri(self, value: str) -> URIRef:
        term = self.iris.get(value)
        if term is None:
            if len(self.iris) > 200_000:
                self.iris.clear()
            term = self.iris[value] = URIRef(value)
        return term

    def new_subject(self) -> URIRef:
        rng = self.rng
        self.subject_count += 1
        n = self.subject_count
        _, kind, base = rng.choices(SUBJECT_SPACES, self.space_weights)[0]
        if kind == "num":
            local = str(100000 + n * 7 + rng.randrange(7))
        elif kind == "wd":
            local = f"Q{rng.randrange(1, 120_000_000)}"
        elif kind == "dbp":
            local = "_".join(self.word().capitalize() for _ in range(rng.randint(1, 3))) + f"_{n}"
        elif kind == "uuid":
            local = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        elif kind == "deep":
            local = f"{rng.randrange(400)}/dept/{rng.randrange(30)}/staff/{n}"
        else:  # frag
            local = f"r{n:08d}"
        return self.iri(base + local)

    def bnode(self) -> BNode:
        self.bnode_count += 1
        return BNode(f"b{self.bnode_count}")

    def word(self) -> str:
        rng = self.rng
        return "".join(rng.choice(SYLLABLES["latin"]) for _ in range(rng.randint(2, 4)))

    def name(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.70:
            return f"{self.word().capitalize()} {self.word().capitalize()}"
        if r < 0.82:
            w = self.word()
            i = rng.randrange(len(w))
            return (w[:i] + rng.choice(SYLLABLES["accent"]) + w[i:]).capitalize() + " " + self.word().capitalize()
        script = rng.choice(["ja", "zh", "ru", "ar"])
        return "".join(rng.choice(SYLLABLES[script]) for _ in range(rng.randint(1, 3)))

    def sentence(self, n_words: int) -> str:
        rng = self.rng
        words = [rng.choice(WORDS) for _ in range(n_words)]
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def long_text(self) -> str:
        rng = self.rng
        parts = []
        for _ in range(rng.randint(3, 24)):
            s = self.sentence(rng.randint(6, 30))
            r = rng.random()
            if r < 0.15:
                s += " " + self.name()
            elif r < 0.20:
                s += " " + rng.choice(EMOJI)
            elif r < 0.25:
                s = f'"{s}" (quoted \\ with a backslash)'
            parts.append(s)
            if rng.random() < 0.2:
                parts.append("\n")
        return " ".join(parts)

    def lit(self, lex: str, lang: str | None = None, datatype: URIRef | None = None) -> Literal:
        if datatype is not None:
            return Literal(lex, datatype=datatype, normalize=False)
        return Literal(lex, lang=lang, normalize=False)

    def datetime(self) -> str:
        rng = self.rng
        s = (
            f"{rng.randint(2015, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            f"T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
        )
        r = rng.random()
        if r < 0.5:
            return s + "Z"
        if r < 0.8:
            return s + f".{rng.randrange(1000):03d}+02:00"
        return s

    # -- predicates and their objects -------------------------------------------------

    def _predicates(self) -> list[tuple[int, URIRef, str]]:
        spec = [
            (30, RDF + "type", "class"),
            (14, RDFS + "label", "lang"),
            (8, FOAF + "name", "name"),
            (6, SCHEMA + "name", "name"),
            (6, DCT + "modified", "datetime"),
            (4, DCT + "created", "datetime"),
            (3, SCHEMA + "dateCreated", "date"),
            (5, SCHEMA + "identifier", "id"),
            (4, SCHEMA + "price", "decimal"),
            (5, APP + "count", "integer"),
            (3, APP + "value", "decimal"),
            (2, APP + "active", "boolean"),
            (3, RDFS + "comment", "comment"),
            (2, SCHEMA + "description", "long"),
            (6, FOAF + "knows", "subject"),
            (4, SCHEMA + "isPartOf", "subject"),
            (3, SKOS + "broader", "subject"),
            (3, DCT + "subject", "subject"),
            (3, OWL + "sameAs", "external"),
            (2, RDFS + "seeAlso", "external"),
            (2, SKOS + "prefLabel", "lang"),
            (1, SKOS + "altLabel", "lang"),
            (2, SCHEMA + "address", "bnode"),
            (1, PROV + "qualifiedGeneration", "bnode"),
            (2, PROV + "wasDerivedFrom", "subject"),
            (2, PROV + "wasAttributedTo", "subject"),
            (2, APP + "status", "status"),
            (1, GEO + "asWKT", "wkt"),
            (1, SCHEMA + "email", "email"),
            (1, FOAF + "homepage", "external"),
            (1, DCT + "language", "langcode"),
            (1, APP + "score", "decimal"),
            (1, APP + "tag", "tag"),
            (1, SCHEMA + "url", "external"),
        ]
        return [(w, self.iri(p), kind) for w, p, kind in spec]

    def obj(self, kind: str) -> object:
        rng = self.rng
        if kind == "class":
            return rng.choice(CLASSES)
        if kind == "lang":
            lang = rng.choice(LANGS)
            return self.lit(self.name() if rng.random() < 0.5 else self.sentence(rng.randint(1, 5)), lang=lang)
        if kind == "name":
            return self.lit(self.name())
        if kind == "datetime":
            return self.lit(self.datetime(), datatype=XSD_DATETIME)
        if kind == "date":
            return self.lit(self.datetime()[:10], datatype=XSD_DATE)
        if kind == "id":
            return self.lit(f"{rng.choice('ABCDEFGH')}-{rng.randrange(10**7):07d}")
        if kind == "decimal":
            return self.lit(f"{rng.randrange(100000) / 100:.2f}", datatype=XSD_DECIMAL)
        if kind == "integer":
            return self.lit(str(rng.randrange(-50, 1_000_000)), datatype=XSD_INTEGER)
        if kind == "boolean":
            return self.lit(rng.choice(("true", "false")), datatype=XSD_BOOLEAN)
        if kind == "comment":
            if rng.random() < 0.3:
                return self.lit(self.sentence(rng.randint(5, 25)), lang="en")
            return self.lit(self.sentence(rng.randint(5, 25)))
        if kind == "long":
            lang = "en" if rng.random() < 0.5 else None
            if rng.random() < 0.4:
                return self.lit(self.long_text(), lang=lang)
            return self.lit(" ".join(self.sentence(rng.randint(8, 30)) for _ in range(rng.randint(1, 3))), lang=lang)
        if kind == "subject":
            if self.recent_subjects and rng.random() < 0.8:
                return rng.choice(self.recent_subjects)
            return self.new_subject()
        if kind == "external":
            r = rng.random()
            if r < 0.4:
                return self.iri(f"http://www.wikidata.org/entity/Q{rng.randrange(1, 120_000_000)}")
            if r < 0.7:
                return self.iri(f"http://dbpedia.org/resource/{self.word().capitalize()}_{rng.randrange(10**6)}")
            return self.iri(f"https://www.example-{rng.randrange(500)}.com/{self.word()}/{rng.randrange(10**5)}.html")
        if kind == "status":
            return self.iri(APP + rng.choice(("Draft", "Published", "Retired", "Pending", "Archived")))
        if kind == "wkt":
            return self.lit(f"POINT({rng.uniform(-180, 180):.6f} {rng.uniform(-90, 90):.6f})", datatype=WKT)
        if kind == "email":
            return self.iri(f"mailto:{self.word()}.{self.word()}@example.org")
        if kind == "langcode":
            return self.lit(rng.choice(LANGS))
        if kind == "tag":
            return self.lit(self.word(), lang=None)
        raise AssertionError(kind)

    def recent_subject(self) -> URIRef | BNode:
        rec = self.recent_subjects
        # Skewed towards the most recent subjects.
        i = len(rec) - 1 - int(len(rec) * self.rng.random() ** 3)
        return rec[max(i, 0)]

    # -- statements ---------------------------------------------------------------------

    def remember(self, quad: tuple[object, URIRef, object, URIRef | None]) -> None:
        live = self.live
        if len(live) >= 100_000:
            # Forget the oldest half; they are unlikely to be deleted any more.
            del live[:50_000]
            self.by_subject.clear()
            for i, q in enumerate(live):
                if q is not None:
                    self.by_subject.setdefault(q[0], []).append(i)
        self.by_subject.setdefault(quad[0], []).append(len(live))
        live.append(quad)

    def take_live(self, index: int) -> tuple[object, URIRef, object, URIRef | None] | None:
        quad = self.live[index]
        if quad is None:  # type: ignore[comparison-overlap]
            return None
        self.live[index] = None  # type: ignore[call-overload]
        return quad

    def burst(self) -> list[tuple[str, tuple[object, URIRef, object, URIRef | None]]]:
        """One unit of change: an entity written, updated or removed."""
        rng = self.rng
        out: list[tuple[str, tuple[object, URIRef, object, URIRef | None]]] = []
        r = rng.random()
        if r < 0.22 and self.live:
            # Update: D old value, A new value (same s, p, g).
            i = len(self.live) - 1 - int(len(self.live) * rng.random() ** 2)
            old = self.take_live(max(i, 0))
            if old is not None:
                s, p, _o, g = old
                kind = self.pred_kind.get(p, "name")
                new = (s, p, self.bnode() if kind == "bnode" else self.obj(kind), g)
                out.append(("D", old))
                out.append(("A", new))
                self.remember(new)
                return out
        if r < 0.30 and self.live:
            # Remove what is still known of one entity.
            i = len(self.live) - 1 - int(len(self.live) * rng.random() ** 2)
            quad = self.live[max(i, 0)]
            if quad is not None:
                for j in self.by_subject.get(quad[0], [])[:12]:
                    if j < len(self.live):
                        q = self.take_live(j)
                        if q is not None:
                            out.append(("D", q))
                if out:
                    return out
        # Write an entity: a new subject or a recent one, 1-10 statements in one graph.
        if self.recent_subjects and rng.random() < 0.3:
            s: URIRef | BNode = self.recent_subject()
        else:
            s = self.new_subject()
            self.recent_subjects.append(s)
            if len(self.recent_subjects) > 20_000:
                del self.recent_subjects[:10_000]
        g = rng.choice(self.graphs)
        n = rng.choice((1, 1, 2, 3, 3, 4, 5, 6, 8, 10))
        for _ in range(n):
            _, p, kind = rng.choices(self.predicates, self.pred_weights)[0]
            if kind == "bnode":
                b = self.bnode()
                quad = (s, p, b, g)
                out.append(("A", quad))
                self.remember(quad)
                for sub_p, sub_kind in (
                    (SCHEMA + "streetAddress", "name"),
                    (SCHEMA + "addressLocality", "name"),
                    (SCHEMA + "postalCode", "id"),
                    (PROV + "atTime", "datetime"),
                ):
                    if rng.random() < 0.6:
                        bq = (b, self.iri(sub_p), self.obj(sub_kind), g)
                        out.append(("A", bq))
                        self.remember(bq)
            else:
                quad = (s, p, self.obj(kind), g)
                out.append(("A", quad))
                self.remember(quad)
        return out


def _patch_id(rng: random.Random) -> URIRef:
    return URIRef(f"uuid:{uuid.UUID(int=rng.getrandbits(128), version=4)}")


def iter_events(
    rows: int, seed: int = DEFAULT_SEED, patch_rows: int = DEFAULT_PATCH_ROWS, stats: WorkloadStats | None = None
) -> Iterator[Event]:
    """Yield the events of a log of exactly ``rows`` content rows (see the module docstring)."""
    if rows < 4:
        raise ValueError("rows must be at least 4 (H id, TX, one statement, TC)")
    st = stats if stats is not None else WorkloadStats()
    gen = _Gen(seed)
    rng = gen.rng
    id_rng = random.Random(seed ^ 0x5EED)
    prev: URIRef | None = None
    subjects: set[object] = set()
    pending: list[tuple[str, tuple[object, URIRef, object, URIRef | None]]] = []
    remaining = rows
    while remaining > 0:
        pid = _patch_id(id_rng)
        budget = min(patch_rows, remaining)
        if budget < patch_rows and budget < 4 + (prev is not None):
            budget = remaining  # the tail is too short for a patch of its own
        head: list[Event] = [Header("id", pid)]
        if prev is not None:
            head.append(Header("prev", prev))
        head.append(TxStart())
        body: list[Event] = []
        space = budget - len(head) - 1  # TC
        if space < 1:
            head = [head[0], TxStart()]
            space = budget - len(head) - 1
        # Prefix rows: a few patches (re)declare prefixes, rarer ones drop one.
        if rng.random() < 0.1 and space > 20:
            for name, ns in rng.sample(PREFIXES, rng.randint(1, 4)):
                body.append(PrefixAdd(name, gen.iri(ns)))
        if rng.random() < 0.03 and space > 20:
            body.append(PrefixDelete(rng.choice(PREFIXES)[0]))
        while len(body) < space:
            if not pending:
                pending = gen.burst()
                pending.reverse()
            op, (s, p, o, g) = pending.pop()
            body.append((Add if op == "A" else Delete)(s, p, o, g))
        for ev in head:
            yield ev
        for ev in body:
            kind = type(ev)
            if kind is Add or kind is Delete:
                if kind is Add:
                    st.adds += 1
                else:
                    st.deletes += 1
                if isinstance(ev.o, Literal):  # type: ignore[union-attr]
                    st.literal_objects += 1
                st.bnode_terms += isinstance(ev.s, BNode) + isinstance(ev.o, BNode)  # type: ignore[union-attr]
                if ev.g is None:  # type: ignore[union-attr]
                    st.default_graph_statements += 1
                else:
                    st.named_graph_statements += 1
                subjects.add(ev.s)  # type: ignore[union-attr]
            elif kind is PrefixAdd:
                st.prefix_adds += 1
            else:
                st.prefix_deletes += 1
            yield ev
        yield TxCommit()
        yield PatchEnd()
        st.headers += len(head) - 1
        st.tx += 2
        st.patches += 1
        st.rows += len(head) + len(body) + 1
        remaining -= len(head) + len(body) + 1
        prev = pid
    st.distinct_subjects = len(subjects)


def generate(
    rows: int, seed: int = DEFAULT_SEED, patch_rows: int = DEFAULT_PATCH_ROWS
) -> tuple[list[Event], WorkloadStats]:
    """The whole log as a list of events, with its statistics."""
    stats = WorkloadStats()
    events = list(iter_events(rows, seed, patch_rows, stats))
    return events, stats


def count_rows(events: list[Event]) -> int:
    """Content rows among ``events`` (everything but options and patch ends)."""
    from patchsync.events import CONTENT_EVENTS

    return sum(1 for e in events if isinstance(e, CONTENT_EVENTS))


# -- text form ------------------------------------------------------------------------------
#
# A minimal RDF Patch text writer, used only when patchsync.codec.rdfp is not available yet
# (and to build a variant that rdflib's patch parser accepts). N-Triples term syntax;
# the default graph is written as no graph term.

_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r"}
_PREFIX_IRIS = dict(PREFIXES)


def _nt(term: object) -> str:
    if isinstance(term, Literal):
        lex = '"' + str(term).translate(_ESCAPES) + '"'
        if term.language:
            return lex + "@" + term.language
        if term.datatype is not None:
            return lex + "^^<" + str(term.datatype) + ">"
        return lex
    if isinstance(term, BNode):
        return "_:" + str(term)
    if isinstance(term, URIRef):
        return "<" + str(term) + ">"
    raise TypeError(f"no text form for {term!r}")


def _is_default(g: object) -> bool:
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID

    return g is None or g == DATASET_DEFAULT_GRAPH_ID


def simple_text(events: list[Event], *, for_rdflib: bool = False) -> str:
    """The log as RDF Patch text.

    ``for_rdflib`` makes the variant rdflib 7's ``format="patch"`` parser reads: it needs
    an IRI in ``PD`` rows (``PD name <iri> .``) and no graph term in ``PA``/``PD`` rows.
    """
    out: list[str] = []
    append = out.append
    for ev in events:
        kind = type(ev)
        if kind is Add or kind is Delete:
            s, p, o, g = ev[0], ev[1], ev[2], ev[3]  # type: ignore[misc]
            op = "A " if kind is Add else "D "
            if _is_default(g):
                append(f"{op}{_nt(s)} {_nt(p)} {_nt(o)} .\n")
            else:
                append(f"{op}{_nt(s)} {_nt(p)} {_nt(o)} {_nt(g)} .\n")
        elif kind is Header:
            append(f"H {ev.key} {_nt(ev.value)} .\n")  # type: ignore[union-attr]
        elif kind is TxStart:
            append("TX .\n")
        elif kind is TxCommit:
            append("TC .\n")
        elif kind is PrefixAdd:
            g = "" if for_rdflib or _is_default(ev.g) else " " + _nt(ev.g)  # type: ignore[union-attr]
            append(f"PA {ev.name} {_nt(ev.iri)}{g} .\n")  # type: ignore[union-attr]
        elif kind is PrefixDelete:
            iri = ev.iri  # type: ignore[union-attr]
            if for_rdflib and iri is None:
                iri = URIRef(_PREFIX_IRIS.get(ev.name, "urn:x-unknown-prefix"))  # type: ignore[union-attr]
            g = "" if for_rdflib or _is_default(ev.g) else " " + _nt(ev.g)  # type: ignore[union-attr]
            append(f"PD {ev.name}{'' if iri is None else ' ' + _nt(iri)}{g} .\n")  # type: ignore[union-attr]
        elif kind.__name__ == "TxAbort":
            append("TA .\n")
    return "".join(out)
