"""Lookups and term encoding shared by the Jelly-Patch and Jelly-RDF encoders.

The producer side of the Jelly-RDF lookup mechanism: IRIs are split into prefix and name,
each kept in an LRU table bounded by the stream options; a new or evicted entry emits an
entry row before the row that uses it. Ids and references are written as 0 wherever the
0-rules make that legal, since a 0 costs no bytes on the wire.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from patchsync.codec import wire
from patchsync.errors import EncodeError
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, KIND_NAMES, LITERAL, TRIPLE, XSD_STRING, TermAdapter, Unpacked
from patchsync.terms.caches import ENCODER_CACHE_CHARS, ENCODER_CACHE_LIMIT, ENCODER_ENTRY_CHARS

T = TypeVar("T")

#: A new object of a term already unpacked (most terms of a parsed stream take this path)
#: gets an identity entry that keeps its text alive. Up to this many characters that text is
#: not counted, so the path stays a length check: the entry count bounds it (65,536 x 128
#: characters at most), and the caches hold at most about twice ENCODER_CACHE_CHARS in all.
_SHORT_CHARS = 128

# A value no id equals: after an append to an existing log the decoder's 0-rule state is
# unknown to us, so nothing may be written relative to it (docs/design.md §6).
UNKNOWN = -2


_LENGTH_BYTE = [bytes((n,)) for n in range(128)]

_PLURAL = {"name": "names", "prefix": "prefixes", "datatype": "datatypes"}


def _always(a: Any, b: Any) -> bool:
    """``writes_same`` of an adapter whose equal terms always write the same."""
    return True


class PrefixOverflow(EncodeError):
    """A row needs more distinct prefixes than the prefix lookup holds (see ``guarded``)."""


def held_chars(u: Unpacked) -> int:
    """Characters of text an unpacked term holds (a quoted triple's terms are counted by
    their own entries)."""
    kind = u[0]
    if kind in (IRI, BNODE):
        return len(u[1])
    if kind == LITERAL:
        return len(u[1]) + len(u[2] or "") + len(u[3] or "")
    return 0


def split_iri(iri: str) -> tuple[str, str]:
    """Split after the last ``#`` or ``/`` (the usual Jelly producer strategy)."""
    i = max(iri.rfind("#"), iri.rfind("/"))
    if i < 0:
        return "", iri
    return iri[: i + 1], iri[i + 1 :]


def lookup_overflow_message(kind: str, size: int) -> str:
    """The error of a row needing more distinct entries of ``kind`` than the lookup holds."""
    return f"one row needs more distinct {_PLURAL[kind]} than max_{kind}_table_size {size} allows"


@functools.lru_cache(maxsize=16)
def _id_fields(tag: bytes, size: int) -> tuple[bytes, ...]:
    """``tag`` followed by the varint of each id from 0 to ``size`` (read-only, shared)."""
    return tuple(tag + wire.varint(i) for i in range(size + 1))


class LruLookup:
    """Producer-side lookup: value -> id, evicting the least recently used entry."""

    __slots__ = ("ids", "kind", "last_id", "row_keys", "row_tag", "size")

    def __init__(self, kind: str, row_tag: bytes, size: int, *, fresh: bool = True) -> None:
        self.kind = kind
        self.row_tag = row_tag
        self.size = size
        self.ids: OrderedDict[str, int] = OrderedDict()
        self.last_id = 0 if fresh else UNKNOWN
        # Values used by the row being built: they must not be evicted before it is written.
        self.row_keys: list[str] = []

    def id_for(self, value: str, emit: Callable[[bytes], None]) -> int:
        ids = self.ids
        found = ids.get(value)
        self.row_keys.append(value)
        if found is not None:
            ids.move_to_end(value)
            return found
        if len(ids) < self.size:
            new_id = len(ids) + 1
        else:
            victim = next(iter(ids))
            if len(self.row_keys) > self.size and victim in self.row_keys:
                # Checked before evicting: the table must stay as the decoder sees it.
                error = PrefixOverflow if self.kind == "prefix" else EncodeError
                raise error(lookup_overflow_message(self.kind, self.size))
            new_id = ids.pop(victim)
        ids[value] = new_id
        payload = (b"" if new_id == self.last_id + 1 else wire.ENTRY_ID + wire.varint(new_id)) + wire.ld_str(
            wire.ENTRY_VALUE, value
        )
        self.last_id = new_id
        emit(wire.ld(self.row_tag, payload))
        return new_id


class TermEncoder(Generic[T]):
    """Encoder state of one stream: LRU lookups, IRI 0-rule state, repeated terms, caches.

    ``emit`` receives each lookup-entry row (the bytes of the row message's field, i.e.
    a serialized ``RdfPatchRow``/``RdfStreamRow`` body) the moment it becomes necessary.
    ``entry_tags`` gives the row tags for (name, prefix, datatype) entries. ``fresh``
    False starts in append mode: no id is written relative to unknown earlier state.
    """

    #: The lookup class (the compiled core's subclass keeps its fields in C).
    lookup_type: ClassVar[Any] = LruLookup

    def __init__(
        self,
        adapter: TermAdapter[T],
        emit: Callable[[bytes], None],
        *,
        entry_tags: tuple[bytes, bytes, bytes],
        max_names: int,
        max_prefixes: int,
        max_datatypes: int,
        generalized: bool,
        rdf_star: bool,
        fresh: bool = True,
    ) -> None:
        self.adapter = adapter
        self.emit = emit
        # An adapter whose terms can be equal yet write differently (rdflib: literals whose
        # language tags differ in case) names those term types and tests two equal terms;
        # equality alone may not reuse such a term.
        self._loose_types: tuple[type, ...] = getattr(adapter, "loose_types", ())
        self._writes_same: Callable[[Any, Any], bool] = getattr(adapter, "writes_same", _always)
        lookup = self.lookup_type
        self._entry_tags = entry_tags
        self.names = lookup("name", entry_tags[0], max_names, fresh=fresh)
        self.prefixes = lookup("prefix", entry_tags[1], max_prefixes, fresh=fresh) if max_prefixes else None
        self.datatypes = lookup("datatype", entry_tags[2], max_datatypes, fresh=fresh) if max_datatypes else None
        self._splits: dict[str, tuple[str, str]] = {}
        self._unpacked: dict[Any, Unpacked] = {}
        self._by_id: dict[int, tuple[Any, Unpacked]] = {}
        # Text the three caches above keep alive (see ENCODER_CACHE_CHARS); the compiled core
        # counts its IRI splits here too.
        self._cache_chars = 0
        self._begin(max_names, max_prefixes, generalized, rdf_star, fresh)

    def _begin(self, max_names: int, max_prefixes: int, generalized: bool, rdf_star: bool, fresh: bool) -> None:
        """The state of a stream's start besides its lookups: a new encoder's and, with
        ``fresh``, a restarted one's (:meth:`restart`)."""
        self.generalized = generalized
        self.rdf_star = rdf_star
        self.last_prefix = 0 if fresh else UNKNOWN
        self.last_name = 0 if fresh else UNKNOWN
        self.last_s: Any = None
        self.last_p: Any = None
        self.last_o: Any = None
        self.last_g: Any = None
        # The RdfIri fields for every possible id, precomputed (ids are bounded by the options)
        # and shared: a stream writer starts an encoder per message.
        self._prefix_fields = _id_fields(wire.IRI_PREFIX, max_prefixes)
        self._name_fields = _id_fields(wire.IRI_NAME, max_names)
        self.used_generalized = False
        self.used_rdf_star = False
        # Set while a row is re-encoded with unsplit IRIs (see ``guarded``).
        self.no_split = False
        # Whether a row can need more distinct prefixes than the lookup holds: a quad
        # has at most four IRIs, so only tiny lookups or quoted triples can overflow.
        self.may_overflow = self.prefixes is not None and (max_prefixes < 4 or rdf_star)

    def restart(
        self, *, max_names: int, max_prefixes: int, max_datatypes: int, generalized: bool, rdf_star: bool
    ) -> None:
        """Start another stream from its start, exactly as a new encoder (``fresh``) with
        these sizes would, keeping the caches (they only save work: the output never depends
        on them). Cheaper than a new encoder for many short streams (one per message)."""
        self.names = self._reset(self.names, "name", 0, max_names)
        self.prefixes = self._reset(self.prefixes, "prefix", 1, max_prefixes)
        self.datatypes = self._reset(self.datatypes, "datatype", 2, max_datatypes)
        self._begin(max_names, max_prefixes, generalized, rdf_star, fresh=True)

    def _reset(self, lookup: Any, kind: str, tag: int, size: int) -> Any:
        """``lookup`` emptied for a new stream with ``size`` entries (``None`` for 0)."""
        if not size:
            return None
        if lookup is None:
            return self.lookup_type(kind, self._entry_tags[tag], size, fresh=True)
        lookup.ids.clear()
        lookup.row_keys.clear()
        lookup.size = size
        lookup.last_id = 0
        return lookup

    def guarded(self, build: Callable[[], bytes]) -> bytes:
        """Build a row; if its IRIs need more distinct prefixes than the lookup holds,
        build it again with every IRI unsplit (empty prefix, whole IRI as the name), so
        that a single prefix entry serves the whole row. Entry rows emitted by the first
        attempt stay valid; the 0-id and repeated-term state is rolled back."""
        saved = (self.last_prefix, self.last_name, self.last_s, self.last_p, self.last_o, self.last_g)
        try:
            return build()
        except PrefixOverflow:
            self.last_prefix, self.last_name, self.last_s, self.last_p, self.last_o, self.last_g = saved
            self.begin_row()
            self.no_split = True
            try:
                return build()
            finally:
                self.no_split = False

    def begin_row(self) -> None:
        """Forget which entries the previous row used (see :class:`LruLookup`)."""
        self.names.row_keys.clear()
        if self.prefixes is not None:
            self.prefixes.row_keys.clear()
        if self.datatypes is not None:
            self.datatypes.row_keys.clear()

    def unpack(self, term: T) -> Unpacked:
        # Keyed by identity first: hashing an rdflib term runs Python code. The entry
        # holds the term, so its id cannot be reused while the entry exists.
        hit = self._by_id.get(id(term))
        if hit is not None and hit[0] is term:
            return hit[1]
        try:
            found = self._unpacked.get(term)
        except TypeError:
            raise EncodeError(f"not an RDF term: {term!r}") from None
        if found is None:
            found = self._unpack_new(term)
        else:
            if self._loose_types and found[0] == LITERAL and found[2]:
                # An equal literal, not the same: its language tag may differ in case.
                found = self.adapter.unpack(term)
            if found[0] <= LITERAL and len(found[1]) > _SHORT_CHARS:
                # A new object of a known long term: the identity entry keeps its text alive too.
                self.count_cached(len(found[1]) + ENCODER_ENTRY_CHARS)
        if len(self._by_id) >= ENCODER_CACHE_LIMIT:
            self._by_id.clear()
        self._by_id[id(term)] = (term, found)
        return found

    def _unpack_new(self, term: T) -> Unpacked:
        """A term missing from the caches, unpacked and cached (the identity entry is the caller's)."""
        found = self.adapter.unpack(term)
        # The term as key, its parts (new strings), the identity entry: its text thrice.
        # Counted before storing, as it may drop the caches.
        self.count_cached(3 * held_chars(found) + 2 * ENCODER_ENTRY_CHARS)
        if len(self._unpacked) >= ENCODER_CACHE_LIMIT:
            self._unpacked.clear()
        self._unpacked[term] = found
        return found

    def count_cached(self, chars: int) -> None:
        """Count ``chars`` characters about to be cached; past :data:`ENCODER_CACHE_CHARS`, drop
        every cache. The compiled core does the same for its IRI splits, so both paths
        keep the same bound."""
        self._cache_chars += chars
        if self._cache_chars > ENCODER_CACHE_CHARS:
            self.drop_caches()

    def drop_caches(self) -> None:
        """Empty the caches (they only save work: the output does not depend on them)."""
        self._cache_chars = 0
        self._splits.clear()
        self._unpacked.clear()
        self._by_id.clear()

    def iri(self, iri: str) -> bytes:
        """The body of an ``RdfIri`` message for ``iri``."""
        if self.prefixes is None:
            prefix_id = 0
            name_id = self.names.id_for(iri, self.emit)
            pid_bytes = b""
        else:
            split = ("", iri) if self.no_split else self._splits.get(iri)
            if split is None:
                split = split_iri(iri)
                # The key and its two parts (new strings).
                self.count_cached(2 * len(iri) + ENCODER_ENTRY_CHARS)
                if len(self._splits) >= ENCODER_CACHE_LIMIT:
                    self._splits.clear()
                self._splits[iri] = split
            prefix_id = self.prefixes.id_for(split[0], self.emit)
            name_id = self.names.id_for(split[1], self.emit)
            if prefix_id == self.last_prefix:
                pid_bytes = b""
            else:
                pid_bytes = self._prefix_fields[prefix_id]
                self.last_prefix = prefix_id
        body = pid_bytes if name_id == self.last_name + 1 else pid_bytes + self._name_fields[name_id]
        self.last_name = name_id
        return body

    def literal(self, lex: str, lang: str | None, datatype: str | None) -> bytes:
        """The body of an ``RdfLiteral`` message."""
        body = wire.ld_str(wire.LIT_LEX, lex) if lex else b""
        if lang:
            return body + wire.ld_str(wire.LIT_LANG, lang)
        # RDF 1.1: a simple literal is an xsd:string literal; Jelly has one form for both.
        if datatype is not None and datatype != XSD_STRING:
            if self.datatypes is None:
                raise EncodeError(
                    f"typed literal with datatype <{datatype}> in a stream whose max_datatype_table_size is 0"
                )
            dt_id = self.datatypes.id_for(datatype, self.emit)
            return body + wire.LIT_DATATYPE + wire.varint(dt_id)
        return body

    def term(self, term: T, tags: tuple[bytes, bytes, bytes, bytes], position: str, depth: int = 0) -> bytes:
        """The oneof field (tag, length, body) for ``term`` in ``position`` (s, p, o, g, h)."""
        u = self.unpack(term)
        kind = u[0]
        if kind == IRI:
            body = self.iri(u[1])
            # An RdfIri body is at most 12 bytes: its length is a single varint byte.
            return tags[0] + _LENGTH_BYTE[len(body)] + body
        if kind == BNODE:
            if position == "p":
                self._generalized("a blank node predicate")
            return wire.ld_str(tags[1], u[1])
        if kind == LITERAL:
            if position in "spg":
                self._generalized(f"a literal in {position} position")
            return wire.ld(tags[2], self.literal(u[1], u[2], u[3]))
        if kind == TRIPLE:
            if position == "g":
                raise EncodeError("a quoted triple cannot name a graph")
            if not self.rdf_star:
                raise EncodeError("quoted triple in a stream whose rdf_star option is false")
            if position == "p":
                self._generalized("a quoted triple predicate")
            if depth >= 64:
                raise EncodeError("quoted triples nested deeper than 64 levels")
            self.used_rdf_star = True
            body = (
                self.term(u[1], wire.S_TAGS, "s", depth + 1)
                + self.term(u[2], wire.P_TAGS, "p", depth + 1)
                + self.term(u[3], wire.O_TAGS, "o", depth + 1)
            )
            return wire.ld(tags[3], body)
        if kind == DEFAULT_GRAPH:
            if position != "g":
                raise EncodeError(f"the default graph cannot stand in {position} position")
            return wire.ld(tags[3], b"")
        raise EncodeError(f"unknown term kind {kind!r} ({KIND_NAMES})")

    def _generalized(self, what: str) -> None:
        if not self.generalized:
            raise EncodeError(f"{what} needs the generalized_statements option")
        self.used_generalized = True

    def differs(self, term: T, last: T | None) -> bool:
        """Whether ``term`` is written rather than repeated after ``last``: it is another
        term, or an equal one that writes differently (see ``_writes_same``).

        :meth:`statement` inlines this test; the compiled core calls it where it does not
        decide itself."""
        if term is last:
            return False
        if last is None or term != last:
            return True
        return type(term) in self._loose_types and not self._writes_same(term, last)

    def statement(self, s: T, p: T, o: T, g: T | None, quads: bool) -> bytes:
        """The body of an ``RdfQuad`` with repeated-term compression."""
        # Identity first: equal terms are often the same object, and rdflib's __eq__ is
        # Python code. Each test is :meth:`differs`, inline.
        parts = []
        loose, same = self._loose_types, self._writes_same
        last = self.last_s
        if s is not last and (last is None or s != last or (type(s) in loose and not same(s, last))):
            parts.append(self.term(s, wire.S_TAGS, "s"))
            self.last_s = s
        last = self.last_p
        if p is not last and (last is None or p != last or (type(p) in loose and not same(p, last))):
            parts.append(self.term(p, wire.P_TAGS, "p"))
            self.last_p = p
        last = self.last_o
        if o is not last and (last is None or o != last or (type(o) in loose and not same(o, last))):
            parts.append(self.term(o, wire.O_TAGS, "o"))
            self.last_o = o
        if quads:
            last = self.last_g
            if g is not last and (last is None or g != last or (type(g) in loose and not same(g, last))):
                parts.append(self.term(g, wire.G_TAGS, "g"))  # type: ignore[arg-type]
                self.last_g = g
        return b"".join(parts)

    def graph_field(self, g: T, tags: tuple[bytes, bytes, bytes, bytes]) -> bytes:
        """A graph oneof outside a quad (namespace rows), sharing the repeated graph."""
        last = self.last_g
        if last is not None and not self.differs(g, last):
            return b""
        self.last_g = g
        return self.term(g, tags, "g")
