# Included by _native.pyx (one extension module): pass 2's term building. ``_Rows`` holds a
# decoder's hot state in C variables during a batch and builds terms the way
# TermDecoder does (same caches, rules, texts), with N-Triples strings made in C.

from libc.stdlib cimport malloc, free


cdef inline bint _string_plain(const unsigned char* p, Py_ssize_t i, Py_ssize_t end) noexcept:
    """Whether UTF-8 text needs none of the N-Triples string escapes (controls, quote, backslash)."""
    cdef unsigned char c
    while i < end:
        c = p[i]
        if c < 0x20 or c == 0x22 or c == 0x5C or c == 0x7F:
            return False
        i += 1
    return True


cdef object _quoted_escaped(const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
    """ntriples.format_string of UTF-8 text that needs escapes: ``"text"`` with \\t \\b \\n
    \\r \\f \\" \\\\ and ``\\uXXXX`` for the other controls. (Text off the wire is valid
    UTF-8, so it holds no lone surrogates, the one error format_string raises.)"""
    cdef Py_ssize_t n = end - i
    cdef unsigned char* out = <unsigned char*>malloc(6 * n + 2)
    cdef Py_ssize_t o = 0
    cdef unsigned char c
    if out == NULL:
        raise MemoryError()
    try:
        out[o] = 0x22
        o += 1
        while i < end:
            c = p[i]
            i += 1
            if c >= 0x20 and c != 0x22 and c != 0x5C and c != 0x7F:
                out[o] = c
                o += 1
                continue
            out[o] = 0x5C
            o += 1
            if c == 0x09:
                out[o] = 0x74  # t
            elif c == 0x08:
                out[o] = 0x62  # b
            elif c == 0x0A:
                out[o] = 0x6E  # n
            elif c == 0x0D:
                out[o] = 0x72  # r
            elif c == 0x0C:
                out[o] = 0x66  # f
            elif c == 0x22 or c == 0x5C:
                out[o] = c
            else:  # \u00XX, upper-case hex as format_string writes it
                out[o] = 0x75
                out[o + 1] = 0x30
                out[o + 2] = 0x30
                out[o + 3] = _HEX[c >> 4]
                out[o + 4] = _HEX[c & 15]
                o += 4
            o += 1
        out[o] = 0x22
        o += 1
        return PyUnicode_DecodeUTF8(<char*>out, o, NULL)
    finally:
        free(out)


cdef const unsigned char* _HEX = b"0123456789ABCDEF"


cdef inline bint _alnum(const unsigned char* p, Py_ssize_t i, Py_ssize_t end) noexcept:
    """Whether UTF-8 text is ASCII letters and digits only (``str.isascii() and str.isalnum()``)."""
    cdef unsigned char c
    while i < end:
        c = p[i] | 0x20  # folds upper-case letters onto lower-case (digits keep their bit)
        if not ((0x61 <= c <= 0x7A) or (0x30 <= p[i] <= 0x39)):
            return False
        i += 1
    return True


cdef int _cache_iri_c(list by_name, unsigned int rn, unsigned int rp, object prefix, object term) except -1:
    """term_decoder.cache_iri: cache ``term``, built from name ``rn`` and prefix ``rp``."""
    slot = by_name[rn]
    if slot is None or (type(slot) is tuple and <unsigned int>(<tuple>slot)[0] == rp):
        by_name[rn] = (rp, prefix, term)
    elif type(slot) is tuple:
        by_name[rn] = {(<tuple>slot)[0]: ((<tuple>slot)[1], (<tuple>slot)[2]), rp: (prefix, term)}
    else:
        (<dict>slot)[rp] = (prefix, term)
    return 0


cdef inline bint _iri_plain(str value):
    """Whether ``value`` needs no IRIREF escapes and cannot be read as a blank node (``_:``).

    Only one-byte (Latin-1) strings are checked here; others take the adapter's way.
    """
    if PyUnicode_KIND(value) != PyUnicode_1BYTE_KIND:
        return False
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_DATA(value)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(value)
    cdef unsigned char c
    if n >= 2 and s[0] == 0x5F and s[1] == 0x3A:
        return False
    for i in range(n):
        c = s[i]
        if c <= 0x20 or c == 0x3C or c == 0x3E or c == 0x22 or c == 0x7B or c == 0x7D or c == 0x7C or c == 0x5E or c == 0x60 or c == 0x5C:
            return False
    return True


cdef inline bint _has_scheme(str value):
    """Whether a one-byte string starts with an RFC 3987 scheme and ":" (term_decoder._ABSOLUTE_IRI)."""
    if PyUnicode_KIND(value) != PyUnicode_1BYTE_KIND:
        return False
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_DATA(value)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(value)
    cdef unsigned char c
    if n == 0 or not ((0x41 <= s[0] <= 0x5A) or (0x61 <= s[0] <= 0x7A)):
        return False
    for i in range(1, n):
        c = s[i]
        if c == 0x3A:
            return True
        if not ((0x41 <= c <= 0x5A) or (0x61 <= c <= 0x7A) or (0x30 <= c <= 0x39) or c == 0x2B or c == 0x2E or c == 0x2D):
            return False
    return False


cdef inline str _text(const unsigned char* p, Py_ssize_t start, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p + start, n, NULL)


cdef class _Rows:
    """The state of one batch: the decoder's hot values in C variables."""

    cdef object dec, terms, adapter, bnodes, iri_type
    cdef tuple untracked
    cdef list by_name, name_values, prefix_values, datatype_values
    cdef object prev_names, prev_by_name
    cdef object simple, by_lang, by_datatype, default_graph
    cdef object last_s, last_p, last_o, last_g
    cdef object names
    cdef Py_ssize_t names_last_id
    cdef Py_ssize_t names_size, prefixes_size, datatypes_size
    cdef bint absolute, nt
    cdef unsigned int last_prefix, last_name

    cdef void load(self):
        terms = self.terms = self.dec._terms
        if terms is None:
            return
        self.adapter = terms.adapter
        self.nt = type(self.adapter) is NTriplesTerms
        self.iri_type = getattr(self.adapter, "native_iri_type", None)
        self.untracked = tuple(getattr(self.adapter, "untracked_terms", ()))
        self.names = terms.names
        self.names_last_id = terms.names.last_id
        self.by_name = terms._by_name
        self.prev_names = terms._prev_names
        self.prev_by_name = terms._prev_by_name
        self.name_values = terms.names.values
        self.prefix_values = terms.prefixes.values
        self.prefixes_size = terms.prefixes.size
        self.absolute = terms.require_absolute_iris
        self.datatype_values = terms.datatypes.values
        self.names_size = terms.names.size
        self.datatypes_size = terms.datatypes.size
        self.bnodes = terms._bnodes
        self.simple = terms._simple
        self.by_lang = terms._by_lang
        self.by_datatype = terms._by_datatype
        self.default_graph = terms._default_graph
        self.last_prefix = terms.last_prefix
        self.last_name = terms.last_name
        self.last_s = terms.last_s
        self.last_p = terms.last_p
        self.last_o = terms.last_o
        self.last_g = terms.last_g

    cdef void store(self):
        terms = self.terms
        if terms is None:
            return
        self.names.last_id = self.names_last_id
        terms.last_prefix = self.last_prefix
        terms.last_name = self.last_name
        terms.last_s = self.last_s
        terms.last_p = self.last_p
        terms.last_o = self.last_o
        terms.last_g = self.last_g

    cdef object iri(self, const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
        cdef unsigned int pid = 0, nid = 0, rp, rn
        cdef int field
        cdef Py_ssize_t value, stop
        while i < end:
            i = _key(p, i, &field, &value, &stop)
            if field == 1:
                pid = <unsigned int>value
            else:
                nid = <unsigned int>value
        # The fast path of TermDecoder.iri: both ids resolved by the 0-rules, term built.
        rp = self.last_prefix if pid == 0 else pid
        rn = self.last_name + 1 if nid == 0 else nid
        if rn <= self.names_size:
            slot = self.by_name[rn]
            # TermDecoder._by_name: (prefix id, prefix, term), or a dict after a 2nd prefix.
            if type(slot) is tuple:
                if <unsigned int>(<tuple>slot)[0] == rp and (<tuple>slot)[1] is self.prefix_values[rp]:
                    self.last_prefix = rp
                    self.last_name = rn
                    return (<tuple>slot)[2]
            elif slot is not None:
                hit = (<dict>slot).get(rp)
                if hit is not None and (<tuple>hit)[0] is self.prefix_values[rp]:
                    self.last_prefix = rp
                    self.last_name = rn
                    return (<tuple>hit)[1]
        return self.iri_miss(pid, nid, rp, rn)

    cdef object iri_miss(self, unsigned int pid, unsigned int nid, unsigned int rp, unsigned int rn):
        # TermDecoder.iri_string and the slow half of TermDecoder.iri: the same rules in the
        # same order (the 0-id state moves before an error is raised), then build and cache.
        self.last_prefix = rp
        self.last_name = rn
        if rn > self.names_size:
            raise RuleViolation(
                f"name id {rn} is outside the lookup of size {self.names_size}"
                + (" (a 0 name_id means previous + 1)" if nid == 0 else "")
            )
        name = self.name_values[rn]
        if name is None:
            raise RuleViolation(
                f"name id {rn} used before it was defined (the first use of a lookup element MUST be after it is defined)"
            )
        if rp == 0:
            value = name
        else:
            prefix = self.prefix_values[rp] if rp <= self.prefixes_size else None
            if prefix is None:
                prefix = self.terms.prefixes.get(rp)  # raises the rule's error
            value = prefix + name
        if self.absolute and not _has_scheme(value):
            check_absolute_iri(value)  # raises the rule's error (or decides a wide string)
        if self.nt and _iri_plain(value):
            term = "<" + value + ">"  # ntriples.format_iri of an IRI that needs no escapes
        elif self.iri_type is not None:
            term = _STR_NEW(self.iri_type, value)
        else:
            try:
                term = self.adapter.iri(value)
            except ValueError as exc:
                raise RuleViolation(f"IRI rejected by the term adapter: {exc}") from None
        self.untrack(term)
        _cache_iri_c(<list>self.by_name, rn, rp, self.prefix_values[rp] if rp else None, term)
        return term

    cdef void name_entry(self, const unsigned char* p, Py_ssize_t i, Py_ssize_t end) except *:
        # TermDecoder.name_entry (Lookup.set, then the replaced name's cached IRIs dropped);
        # the entries that break a rule go to it for the error.
        entry_id, value = _entry(p, i, end)
        cdef Py_ssize_t eid = entry_id
        if eid == 0:
            eid = self.names_last_id + 1
        if self.names_size == 0 or eid > self.names_size:
            self.names.last_id = self.names_last_id
            self.terms.name_entry(entry_id, value)
            return
        self.names_last_id = eid
        if self.prev_names is not None and (<list>self.prev_names)[eid] == value:
            # TermDecoder.restart(): the last stream's terms of this same name.
            self.by_name[eid] = (<list>self.prev_by_name)[eid]
        elif self.name_values[eid] is not None:
            self.by_name[eid] = None
        self.name_values[eid] = value

    cdef object bnode(self, const unsigned char* p, Py_ssize_t start, Py_ssize_t stop):
        if self.nt and stop > start and _alnum(p, start, stop):
            # ntriples.format_bnode of an ASCII letters-and-digits label: as cheap as a
            # cache lookup, so none is made (as for literals).
            return "_:" + _text(p, start, stop - start)
        label = _text(p, start, stop - start)
        term = (<dict>self.bnodes).get(label)
        if term is None:
            term = self.terms.bnode(label)
            self.untrack(term)
        return term

    cdef inline void untrack(self, object term):
        # A new term the caches keep: of a type the adapter says holds no references that
        # could close a cycle (rdflib's terms), it leaves the garbage collector's lists, so
        # the collections a stream of new terms sets off do not rescan every cached one
        # (and everything else the process holds). Freed by reference counting as before.
        if self.untracked and type(term) in self.untracked:
            PyObject_GC_UnTrack(term)

    cdef object literal(self, const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
        cdef int field, kind = 0
        cdef Py_ssize_t start, stop, ref = 0, lex_start = 0, lex_stop = 0
        lang = dt = None
        while i < end:
            i = _key(p, i, &field, &start, &stop)
            if field == 1:
                # Decoded below, where it is used: an escaped N-Triples form is made
                # from the bytes and needs no str of the lexical form.
                lex_start = start
                lex_stop = stop
            elif field == 2:
                kind = 2
                lang = _text(p, start, stop - start)
            else:
                kind = 3
                ref = start
        if kind == 0:
            cache = self.simple
        elif kind == 2:
            cache = (<dict>self.by_lang).get(lang)
            if cache is None:
                self.terms.count_cached(lang, NEW_CACHE_CHARS)  # TermDecoder.literal's order
                cache = (<dict>self.by_lang).setdefault(lang, {})
        else:
            if ref == 0:
                raise RuleViolation("literal datatype id is 0 (the datatype field MUST be greater than 0)")
            if ref <= self.datatypes_size:
                dt = self.datatype_values[ref]
            if dt is None:
                dt = self.terms.datatypes.get(ref)  # raises the rule's error
            cache = (<dict>self.by_datatype).get(dt)
            if cache is None:
                self.terms.count_cached(dt, NEW_CACHE_CHARS)
                cache = (<dict>self.by_datatype).setdefault(dt, {})
        if self.nt:
            # ntriples.format_literal for a suffix it already checked and cached: as cheap
            # as a cache lookup, so none is made.
            if kind == 2 and lang:
                suffix = _NT_LANG_SUFFIX.get(lang)
            elif kind == 3:
                suffix = _NT_DATATYPE_SUFFIX.get(dt)
            else:
                suffix = ""
            if suffix is not None:
                if _string_plain(p, lex_start, lex_stop):
                    return '"' + _text(p, lex_start, lex_stop - lex_start) + '"' + suffix
                return _quoted_escaped(p, lex_start, lex_stop) + suffix
        lex = _text(p, lex_start, lex_stop - lex_start)
        term = (<dict>cache).get(lex)
        if term is None:
            if len(<dict>cache) >= _CACHE_LIMIT:
                (<dict>cache).clear()
            try:
                term = self.adapter.literal(lex, lang, dt)
            except ValueError as exc:
                raise RuleViolation(f"literal rejected by the term adapter: {exc}") from None
            self.untrack(term)
            # TermDecoder.literal: the text budget of the caches first (it may drop them all).
            self.terms.count_cached(lex)
            (<dict>cache)[lex] = term
        return term

    cdef object term(self, const unsigned char* p, int kind, Py_ssize_t start, Py_ssize_t stop):
        # kind: 0 IRI, 1 blank node, 2 literal, 4 default graph (fields the fast path takes).
        if kind == 0:
            return self.iri(p, start, stop)
        if kind == 1:
            return self.bnode(p, start, stop)
        if kind == 2:
            return self.literal(p, start, stop)
        return self.default_graph


# The position kind of each RdfQuad field the fast path decodes (-1: the pure path's).
# Fields 1-4 subject, 5-8 predicate, 9-12 object, 13-16 graph.
cdef int FAST[17]
FAST[:] = [-1, 0, 1, -1, -1, 0, -1, -1, -1, 0, 1, 2, -1, 0, 1, 4, -1]

_REPEATED = (
    "repeated subject in the first statement (repeated terms MUST NOT occur in the first statement row)",
    "repeated predicate in the first statement (repeated terms MUST NOT occur in the first statement row)",
    "repeated object in the first statement (repeated terms MUST NOT occur in the first statement row)",
    "repeated graph before any graph was given (repeated terms MUST NOT occur in the first statement row)",
)


cdef int _statement(_Rows rows, const unsigned char* p, Py_ssize_t i, Py_ssize_t end, bint quads) except -1:
    """Decode the terms of an ``RdfQuad`` into ``rows.last_s`` .. ``last_g``; False if the pure path must.

    After a statement every position's term is the last one of its position, given or repeated.
    """
    cdef Py_ssize_t starts[4]
    cdef Py_ssize_t stops[4]
    cdef int kinds[4]
    cdef int field, pos, kind
    cdef Py_ssize_t start, stop
    kinds[0] = kinds[1] = kinds[2] = kinds[3] = -2  # -2: absent (a repeated term)
    while i < end:
        i = _key(p, i, &field, &start, &stop)
        pos = (field - 1) >> 2
        if pos == 3 and not quads:
            continue  # TRIPLES streams ignore the graph
        kind = FAST[field]
        if kind < 0:
            return False
        kinds[pos] = kind
        starts[pos] = start
        stops[pos] = stop
    for pos in range(4 if quads else 3):
        kind = kinds[pos]
        if kind == -2:
            if (rows.last_s, rows.last_p, rows.last_o, rows.last_g)[pos] is None:
                raise RuleViolation(_REPEATED[pos])
            continue
        term = rows.term(p, kind, starts[pos], stops[pos])
        if pos == 0:
            rows.last_s = term
        elif pos == 1:
            rows.last_p = term
        elif pos == 2:
            rows.last_o = term
        else:
            rows.last_g = term
    return True


cdef tuple _entry(const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
    """``(id, value)`` of a lookup entry message."""
    cdef int field
    cdef Py_ssize_t start, stop
    cdef Py_ssize_t entry_id = 0
    value = ""
    while i < end:
        i = _key(p, i, &field, &start, &stop)
        if field == 1:
            entry_id = start
        else:
            value = _text(p, start, stop - start)
    return entry_id, value
