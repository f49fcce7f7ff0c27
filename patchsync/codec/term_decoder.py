"""Lookups and term decoding shared by the Jelly-Patch and Jelly-RDF decoders.

This module holds the rules of the Jelly-RDF specification sections "Prefix, name, and
datatype lookup entries", "Repeated terms" and "RDF terms and graph nodes", which
Jelly-Patch adopts unchanged. A rule broken here raises :class:`RuleViolation` with the
rule's text; the stream decoder adds the position and turns it into a ``DecodeError``.

Hot path notes: every protobuf field access costs a C call, so each term is classified
with one ``WhichOneof`` and built through small caches keyed by the decoded string, which
spares the adapter (rdflib's constructors validate and are slow) for repeated terms.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

from patchsync.codec.decoder_state import LookupState, TermState
from patchsync.terms import TermAdapter
from patchsync.terms.caches import DECODER_CACHE_LIMIT, NEW_CACHE_CHARS

T = TypeVar("T")

IriSlot = tuple[int, str | None, T] | dict[int, tuple[str | None, T]]
"""A name's cached IRI terms (see ``TermDecoder._by_name``)."""

#: Characters of stream text (lexical forms, blank node labels, plus :data:`_ENTRY_CHARS` per
#: entry) the caches keyed by such text may hold before all of them are dropped at once. The
#: count limit alone bounds each cache by entries, not bytes: 65,536 literals of kilobytes
#: each, and a cache per language tag or datatype without limit, would stay for the whole
#: stream, so a long log's decoder would hold far more than a few of its frames.
_CACHE_CHARS = 1 << 21
#: What an entry costs besides its text (dict slot, term object), in characters' worth.
_ENTRY_CHARS = 16
#: The one type a restored entry's value may have.
_STR = frozenset({str})

# RFC 3987 absolute IRI: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then ":".
_ABSOLUTE_IRI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def check_absolute_iri(value: str) -> None:
    """Raise :class:`RuleViolation` unless ``value`` is an absolute IRI (it has a scheme)."""
    if _ABSOLUTE_IRI.match(value) is None:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise RuleViolation(
            f"IRI <{shown}> is not absolute (RFC 3987: an absolute IRI starts with a scheme, "
            'ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) then ":"); logs joined with cat decode '
            "against the first log's lookups, join them with patchsync append "
            "(or allow relative IRIs if they are meant)"
        )


# Oneof field name -> (position kind, needs generalized, needs rdf-star).
# Kinds: 0 IRI, 1 blank node, 2 literal, 3 quoted triple, 4 default graph.
_FIELDS: dict[str, tuple[int, bool, bool]] = {
    "s_iri": (0, False, False),
    "s_bnode": (1, False, False),
    "s_literal": (2, True, False),
    "s_triple_term": (3, False, True),
    "p_iri": (0, False, False),
    "p_bnode": (1, True, False),
    "p_literal": (2, True, False),
    "p_triple_term": (3, True, True),
    "o_iri": (0, False, False),
    "o_bnode": (1, False, False),
    "o_literal": (2, False, False),
    "o_triple_term": (3, False, True),
    "g_iri": (0, False, False),
    "g_bnode": (1, False, False),
    "g_default_graph": (4, False, False),
    "g_literal": (2, True, False),
    "h_iri": (0, False, False),
    "h_bnode": (1, False, False),
    "h_literal": (2, False, False),
    "h_triple_term": (3, False, True),
}


class RuleViolation(Exception):
    """A broken format rule, before the decoder has attached a position."""

    def __init__(self, rule: str) -> None:
        super().__init__(rule)
        self.rule = rule


class Lookup:
    """One lookup table with the 0-id rule for its entries (Jelly-RDF "lookup entries")."""

    __slots__ = ("kind", "last_id", "size", "values")

    def __init__(self, kind: str, size: int) -> None:
        self.kind = kind
        self.size = size
        self.values: list[str | None] = [None] * (size + 1)
        self.last_id = 0

    def set(self, entry_id: int, value: str) -> bool:
        """Store an entry; ``True`` if it replaced an earlier value."""
        if self.size == 0:
            raise RuleViolation(
                f"{self.kind} entry in a stream whose max_{self.kind}_table_size is 0 "
                f"(the {self.kind} lookup MUST NOT be used)"
            )
        if entry_id == 0:
            entry_id = self.last_id + 1
        if entry_id > self.size:
            raise RuleViolation(
                f"{self.kind} entry id {entry_id} exceeds max_{self.kind}_table_size {self.size} "
                "(the producer MUST NOT exceed the maximum size of the lookup)"
            )
        self.last_id = entry_id
        replaced = self.values[entry_id] is not None
        self.values[entry_id] = value
        return replaced

    def export_state(self) -> LookupState:
        """The table's entries and 0-id state."""
        runs: list[tuple[int, int]] = []
        first = 0  # the first id of the run under way (0: none)
        for entry_id, value in enumerate([*self.values, None]):
            if value is not None and not first:
                first = entry_id
            elif value is None and first:
                runs.append((first, entry_id - first))
                first = 0
        values = tuple(v for v in self.values if v is not None)
        return LookupState(self.size, self.last_id, tuple(runs), values)

    def restore_state(self, state: LookupState) -> None:
        """Load entries exported from a table of the same size; raises :class:`RuleViolation`."""
        if state.size != self.size:
            raise RuleViolation(f"{self.kind} lookup of size {state.size} restored into one of size {self.size}")
        if type(state.last_id) is not int or not 0 <= state.last_id <= self.size:
            raise RuleViolation(f"{self.kind} lookup's last id {state.last_id!r} is outside [0, {self.size}]")
        if not set(map(type, state.values)) <= _STR:
            raise RuleViolation(f"{self.kind} entry value not a string")
        values: list[str | None] = [None] * (self.size + 1)
        taken = 0  # values placed
        after = 0  # the last id of the run before
        for run in state.runs:
            first, count = run
            if (
                type(first) is not int
                or type(count) is not int
                or not after < first <= first + count - 1 <= self.size
                or taken + count > len(state.values)
            ):
                raise RuleViolation(f"{self.kind} entries {run!r} out of range [1, {self.size}] or out of order")
            values[first : first + count] = state.values[taken : taken + count]
            taken, after = taken + count, first + count - 1
        if taken != len(state.values):
            raise RuleViolation(f"{self.kind} lookup has {taken} ids for {len(state.values)} values")
        self.values = values
        self.last_id = state.last_id

    def get(self, ref: int) -> str:
        if ref > self.size or ref < 1:
            raise RuleViolation(
                f"{self.kind} id {ref} is outside the lookup of size {self.size} (lookup reference out of bounds)"
            )
        value = self.values[ref]
        if value is None:
            raise RuleViolation(
                f"{self.kind} id {ref} used before it was defined "
                "(the first use of a lookup element MUST be after it is defined)"
            )
        return value


class TermDecoder(Generic[T]):
    """Decoding state of one stream: lookups, IRI 0-id state, repeated terms, caches."""

    # Text held by the blank node and literal caches (see _CACHE_CHARS). A class default, so
    # that decoders pickled before it existed (tail snapshots) stay loadable.
    _cache_chars = 0
    # The last stream's name and prefix entries and its IRI cache, kept by restart() when
    # the next stream's lookups have the same sizes (None otherwise; also a class default
    # for decoders pickled before these existed).
    _prev_names: list[str | None] | None = None
    _prev_prefixes: list[str | None] | None = None
    _prev_by_name: list[Any] | None = None

    def __init__(
        self,
        adapter: TermAdapter[T],
        *,
        max_names: int,
        max_prefixes: int,
        max_datatypes: int,
        generalized: bool,
        rdf_star: bool,
        max_nesting: int,
        require_absolute_iris: bool = False,
    ) -> None:
        self.adapter = adapter
        self.require_absolute_iris = require_absolute_iris
        self.names = Lookup("name", max_names)
        self.prefixes = Lookup("prefix", max_prefixes)
        self.datatypes = Lookup("datatype", max_datatypes)
        self.generalized = generalized
        self.rdf_star = rdf_star
        self.max_nesting = max_nesting
        # IRI 0-rules: last explicit prefix id (0 = empty prefix) and last name id.
        self.last_prefix = 0
        self.last_name = 0
        # Repeated-term state; the graph slot is shared with namespace rows (Jelly-Patch).
        self.last_s: Any = None
        self.last_p: Any = None
        self.last_o: Any = None
        self.last_g: Any = None
        # IRI terms cached per name id, then per prefix id, each with the prefix string it
        # was built from. Replacing a name entry drops its slot; a replaced prefix is
        # noticed by identity (the new string is a new object), so prefix churn costs no
        # sweep. New entries need no invalidation: nothing was cached for an undefined id.
        # A slot is ``(prefix id, prefix, term)`` while its name was seen with one prefix
        # (nearly always), a dict ``{prefix id: (prefix, term)}`` after a second: a tuple of
        # strings is untracked by the garbage collector, a dict per name is not, and a
        # long-lived dict per name made every full collection rescan thousands of them.
        self._by_name: list[IriSlot[T] | None] = [None] * (max_names + 1)
        self._bnodes: dict[str, T] = {}
        # Literal terms by lexical form: simple ones, and per language tag / datatype IRI.
        self._simple: dict[str, T] = {}
        self._by_lang: dict[str, dict[str, T]] = {}
        self._by_datatype: dict[str, dict[str, T]] = {}
        self._default_graph = adapter.default_graph()
        # Oneof field name -> builder for terms outside quoted triples, called with this
        # decoder: ``handlers[field](decoder, value)``. Fields the options forbid map to a
        # builder that raises, so the hot path needs no feature checks. The builders are
        # the class's functions, not this decoder's bound methods: a table of bound methods
        # would be a reference cycle, leaving every decoder and its term caches (a patch's
        # megabyte literal) to the garbage collector instead of freeing them when dropped.
        self.handlers: dict[str, Callable[[TermDecoder[T], Any], T]] = {}
        for field, (kind, needs_generalized, needs_star) in _FIELDS.items():
            if (needs_generalized and not generalized) or (needs_star and not rdf_star):
                self.handlers[field] = partial(_refuse_field, field)
            elif kind == 0:
                self.handlers[field] = TermDecoder.iri
            elif kind == 1:
                self.handlers[field] = TermDecoder.bnode
            elif kind == 2:
                self.handlers[field] = TermDecoder.literal
            elif kind == 4:
                self.handlers[field] = TermDecoder.default_graph_term
            else:
                self.handlers[field] = _quoted_top

    # -- resumable state --------------------------------------------------------------

    def export_state(self) -> TermState[T]:
        """The lookups, IRI 0-id state and repeated terms (not the caches of built terms)."""
        return TermState(
            self.names.export_state(),
            self.prefixes.export_state(),
            self.datatypes.export_state(),
            self.last_prefix,
            self.last_name,
            self.last_s,
            self.last_p,
            self.last_o,
            self.last_g,
        )

    def restore_state(self, state: TermState[T]) -> None:
        """Load a state exported from a decoder of the same stream options (a fresh one).

        Raises :class:`RuleViolation` if the state does not fit this decoder's lookups.
        """
        self.names.restore_state(state.names)
        self.prefixes.restore_state(state.prefixes)
        self.datatypes.restore_state(state.datatypes)
        for what, value, size in (
            ("prefix", state.last_prefix, self.prefixes.size),
            ("name", state.last_name, self.names.size),
        ):
            if type(value) is not int or not 0 <= value <= size:
                raise RuleViolation(f"last {what} id {value!r} is outside [0, {size}]")
        self.last_prefix = state.last_prefix
        self.last_name = state.last_name
        self.last_s, self.last_p, self.last_o, self.last_g = state.last_s, state.last_p, state.last_o, state.last_g
        # Nothing is cached yet for the restored entries: the caches fill on first use.
        self._by_name = [None] * (self.names.size + 1)
        self._prev_names = self._prev_prefixes = self._prev_by_name = None

    def restart(self, *, max_names: int, max_prefixes: int, max_datatypes: int) -> None:
        """Start over as a fresh decoder of the same features with these lookup sizes.

        For many short streams (one per stream message): lookups, IRI 0-id state, repeated
        terms and every cache start empty, as in a new decoder; what is kept is what the
        features and the adapter fix (the term builders), which is most of what a new
        decoder costs. When the name and prefix lookups keep their sizes, the last stream's
        entries and the IRI terms built from them are kept aside, not in use: an entry the
        new stream defines with the value it had in the last one brings back the terms
        built from it (:meth:`name_entry`, :meth:`prefix_entry`). An entry the new stream
        does not define stays undefined, so every lookup rule holds as in a new decoder.
        """
        if max_names == self.names.size and max_prefixes == self.prefixes.size:
            self._prev_names, self._prev_prefixes = self.names.values, self.prefixes.values
            self._prev_by_name = self._by_name
        else:
            self._prev_names = self._prev_prefixes = self._prev_by_name = None
        self.names = Lookup("name", max_names)
        self.prefixes = Lookup("prefix", max_prefixes)
        self.datatypes = Lookup("datatype", max_datatypes)
        self.last_prefix = self.last_name = 0
        self.last_s = self.last_p = self.last_o = self.last_g = None
        self._by_name = [None] * (max_names + 1)
        self._cache_chars = 0
        self._bnodes = {}
        self._simple = {}
        self._by_lang = {}
        self._by_datatype = {}

    def default_graph_term(self, _value: Any) -> T:
        """The default graph (a ``g_default_graph`` field: its value says nothing more)."""
        return self._default_graph

    # -- lookup entries -------------------------------------------------------------

    def name_entry(self, entry_id: int, value: str) -> None:
        replaced = self.names.set(entry_id, value)
        eid = self.names.last_id
        prev = self._prev_names
        if prev is not None and prev[eid] == value:
            # The last stream's terms of this name (see restart()); each stays valid only
            # with a prefix entry holding the very string object it was built with.
            self._by_name[eid] = self._prev_by_name[eid]  # type: ignore[index]
        elif replaced:
            self._by_name[eid] = None

    def prefix_entry(self, entry_id: int, value: str) -> None:
        self.prefixes.set(entry_id, value)
        prev = self._prev_prefixes
        if prev is not None:
            eid = self.prefixes.last_id
            old = prev[eid]
            if old is not None and old == value:
                # The last stream's string object: the IRI terms cached with it (found by
                # identity) are those of this same prefix.
                self.prefixes.values[eid] = old

    def datatype_entry(self, entry_id: int, value: str) -> None:
        self.datatypes.set(entry_id, value)

    # -- terms ----------------------------------------------------------------------

    def iri_string(self, msg: Any) -> str:
        """The IRI an ``RdfIri`` message stands for, applying both 0-id rules."""
        pid: int = msg.prefix_id
        nid: int = msg.name_id
        if pid == 0:
            pid = self.last_prefix
        else:
            self.last_prefix = pid
        if nid == 0:
            nid = self.last_name + 1
        self.last_name = nid
        names = self.names
        if nid > names.size:
            raise RuleViolation(
                f"name id {nid} is outside the lookup of size {names.size}"
                + (" (a 0 name_id means previous + 1)" if msg.name_id == 0 else "")
            )
        name: str | None = names.values[nid]
        if name is None:
            raise RuleViolation(
                f"name id {nid} used before it was defined (the first use of a lookup element MUST be after it is defined)"
            )
        if pid == 0:
            return name
        return self.prefixes.get(pid) + name

    def iri(self, msg: Any) -> T:
        pid: int = msg.prefix_id
        nid: int = msg.name_id
        # Fast path: both ids resolved by the 0-rules and the term already built.
        rp = self.last_prefix if pid == 0 else pid
        rn = self.last_name + 1 if nid == 0 else nid
        if rn <= self.names.size:
            slot = self._by_name[rn]
            # Index 0 of the prefix values is always None: the empty prefix.
            if type(slot) is tuple:
                if slot[0] == rp and slot[1] is self.prefixes.values[rp]:
                    self.last_prefix = rp
                    self.last_name = rn
                    return slot[2]
            elif type(slot) is dict:
                hit = slot.get(rp)
                if hit is not None and hit[0] is self.prefixes.values[rp]:
                    self.last_prefix = rp
                    self.last_name = rn
                    return hit[1]
        value = self.iri_string(msg)  # applies the rules again and validates the ids
        if self.require_absolute_iris:
            # Once per newly built term: cached terms were checked when they were built.
            check_absolute_iri(value)
        try:
            term = self.adapter.iri(value)
        except ValueError as exc:
            raise RuleViolation(f"IRI rejected by the term adapter: {exc}") from None
        cache_iri(self._by_name, rn, rp, self.prefixes.values[rp] if rp else None, term)
        return term

    def bnode(self, label: str) -> T:
        term = self._bnodes.get(label)
        if term is None:
            if len(self._bnodes) >= DECODER_CACHE_LIMIT:
                self._bnodes.clear()
            try:
                term = self.adapter.bnode(label)
            except ValueError as exc:
                raise RuleViolation(f"blank node rejected by the term adapter: {exc}") from None
            self.count_cached(label)
            self._bnodes[label] = term
        return term

    def count_cached(self, text: str, extra: int = _ENTRY_CHARS) -> None:
        """Count ``text`` about to be cached (and ``extra`` for its entry); past
        :data:`_CACHE_CHARS`, drop every cache keyed by stream text. The compiled core calls
        this too, so both paths keep the same bound."""
        self._cache_chars += len(text) + extra
        if self._cache_chars > _CACHE_CHARS:
            self._cache_chars = 0
            self._bnodes.clear()
            self._simple.clear()
            # The per-tag and per-datatype caches go as a whole: their number has no other bound.
            self._by_lang.clear()
            self._by_datatype.clear()

    def literal(self, msg: Any) -> T:
        lex: str = msg.lex
        kind = msg.WhichOneof("literalKind")
        lang = dt = None
        if kind is None:
            cache = self._simple
        elif kind == "langtag":
            lang = msg.langtag
            found = self._by_lang.get(lang)
            if found is None:
                self.count_cached(lang, NEW_CACHE_CHARS)  # before: it may drop the caches
                found = self._by_lang.setdefault(lang, {})
            cache = found
        else:
            ref = msg.datatype
            if ref == 0:
                raise RuleViolation("literal datatype id is 0 (the datatype field MUST be greater than 0)")
            dt = self.datatypes.get(ref)
            found = self._by_datatype.get(dt)
            if found is None:
                self.count_cached(dt, NEW_CACHE_CHARS)
                found = self._by_datatype.setdefault(dt, {})
            cache = found
        term = cache.get(lex)
        if term is None:
            if len(cache) >= DECODER_CACHE_LIMIT:
                cache.clear()
            try:
                term = self.adapter.literal(lex, lang, dt)
            except ValueError as exc:
                # rdflib refuses language tags that are not BCP 47 (a SHOULD in the spec).
                raise RuleViolation(f"literal rejected by the term adapter: {exc}") from None
            # If that drops the caches, ``cache`` may be a per-tag cache no longer reachable:
            # the entry is then simply not kept.
            self.count_cached(lex)
            cache[lex] = term
        return term

    def term(self, field: str, value: Any, depth: int = 0) -> T:
        """Decode the set field ``field`` of a term oneof whose value is ``value``."""
        kind, needs_generalized, needs_star = _FIELDS[field]
        if needs_generalized and not self.generalized:
            raise RuleViolation(
                f"{field} in a stream whose generalized_statements option is false "
                "(generalized_statements MUST be true if the stream contains generalized statements)"
            )
        if needs_star and not self.rdf_star:
            raise RuleViolation(
                f"{field} in a stream whose rdf_star option is false (rdf_star MUST be true if the stream uses RDF-star)"
            )
        if kind == 0:
            return self.iri(value)
        if kind == 1:
            return self.bnode(value)
        if kind == 2:
            return self.literal(value)
        if kind == 4:
            return self._default_graph
        return self.quoted(value, depth + 1)

    def quoted(self, msg: Any, depth: int) -> T:
        """An RDF-star quoted triple: no repeated terms, bounded nesting."""
        if depth > self.max_nesting:
            raise RuleViolation(f"quoted triples nested deeper than the limit of {self.max_nesting}")
        ks = msg.WhichOneof("subject")
        kp = msg.WhichOneof("predicate")
        ko = msg.WhichOneof("object")
        if ks is None or kp is None or ko is None:
            raise RuleViolation(
                "repeated term inside a quoted triple (repeated terms MUST NOT occur in quoted triples)"
            )
        s = self.term(ks, getattr(msg, ks), depth)
        p = self.term(kp, getattr(msg, kp), depth)
        o = self.term(ko, getattr(msg, ko), depth)
        try:
            return self.adapter.triple(s, p, o)
        except ValueError as exc:
            raise RuleViolation(f"quoted triple rejected by the term adapter: {exc}") from None

    def spo(self, msg: Any) -> tuple[T, T, T]:
        """Subject, predicate and object of a statement, resolving repeated terms."""
        k = msg.WhichOneof("subject")
        if k is None:
            s = self.last_s
            if s is None:
                raise RuleViolation(
                    "repeated subject in the first statement (repeated terms MUST NOT occur in the first statement row)"
                )
        else:
            s = self.last_s = self.handlers[k](self, getattr(msg, k))
        k = msg.WhichOneof("predicate")
        if k is None:
            p = self.last_p
            if p is None:
                raise RuleViolation(
                    "repeated predicate in the first statement (repeated terms MUST NOT occur in the first statement row)"
                )
        else:
            p = self.last_p = self.handlers[k](self, getattr(msg, k))
        k = msg.WhichOneof("object")
        if k is None:
            o = self.last_o
            if o is None:
                raise RuleViolation(
                    "repeated object in the first statement (repeated terms MUST NOT occur in the first statement row)"
                )
        else:
            o = self.last_o = self.handlers[k](self, getattr(msg, k))
        return s, p, o

    def graph(self, msg: Any) -> T:
        """The graph oneof of a quad or namespace row, resolving a repeated graph."""
        k = msg.WhichOneof("graph")
        if k is None:
            g = self.last_g
            if g is None:
                raise RuleViolation(
                    "repeated graph before any graph was given (repeated terms MUST NOT occur in the first statement row)"
                )
            return g  # type: ignore[no-any-return]
        g = self.last_g = self.handlers[k](self, getattr(msg, k))
        return g


def cache_iri(by_name: list[Any], rn: int, rp: int, prefix: str | None, term: Any) -> None:
    """Cache ``term``, built from name ``rn`` and prefix ``rp`` (string ``prefix``)."""
    slot = by_name[rn]
    if slot is None or (type(slot) is tuple and slot[0] == rp):
        by_name[rn] = (rp, prefix, term)
    elif type(slot) is tuple:
        by_name[rn] = {slot[0]: (slot[1], slot[2]), rp: (prefix, term)}
    else:
        slot[rp] = (prefix, term)


def _refuse_field(field: str, decoder: TermDecoder[Any], value: Any) -> Any:
    """The builder of a field the stream's options forbid: :meth:`TermDecoder.term` refuses it."""
    return decoder.term(field, value)


def _quoted_top(decoder: TermDecoder[Any], value: Any) -> Any:
    """The builder of a quoted triple outside another (nesting depth 1)."""
    return decoder.quoted(value, depth=1)
