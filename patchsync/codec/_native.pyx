# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""The compiled core of the Jelly-Patch decoder: frames read straight from the protobuf wire.

The pure-Python decoder (:mod:`patchsync.codec.patch_decoder`) parses a frame into generated
protobuf messages and then walks them; building those message objects costs more than
decoding the rows. This module reads the frame's bytes itself (varints, length-delimited
fields) in two passes:

1. :func:`scan` checks the whole frame against the schema of ``proto/patch.proto`` and
   ``proto/rdf.proto`` before any row is decoded, because the pure decoder refuses a
   malformed frame as a whole (protobuf parses it whole) before handing out any event. It
   accepts only the *plain* encoding every producer writes: known fields with their own
   wire type, each field and each oneof at most once per message, valid UTF-8 in strings,
   32-bit values in 32-bit fields. Anything else (unknown fields, a field repeated, which
   protobuf merges, groups, deep nesting, invalid bytes) answers ``None`` and the decoder
   parses that frame with protobuf as before, so the protobuf library stays the judge of
   what a valid frame means and the two paths cannot disagree on it.
2. :func:`decode_rows` decodes the rows of a scanned frame, a batch at a time, into the
   decoder's event queue. Statement rows whose terms are IRIs, blank nodes, literals and
   the default graph (nearly every row) are decoded here; the few other rows (options,
   headers, namespaces, transactions, punctuation, generalized and RDF-star terms) are
   parsed with protobuf and handed to the pure decoder's own code, so their rules live in
   one place.

All state stays in the Python objects (the ``TermDecoder``'s lookups, caches, 0-id and
repeated-term state, the ``UnitTracker``): the hot values are held in C variables during
a batch and written back before any Python code that reads them runs, so
``export_state()`` / ``restore_state()`` and the pure path see one consistent decoder.
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_1BYTE_KIND

from patchsync._proto import patch_pb2, rdf_pb2
from patchsync.codec.driver import ROW_BATCH
from patchsync.codec.term_decoder import RuleViolation, check_absolute_iri
from patchsync.events import Add, Delete, FrameEnd, PhysicalType, Statement
from patchsync.terms.ntriples import NTriplesTerms
from patchsync.terms.ntriples import _DATATYPE_SUFFIX as _NT_DATATYPE_SUFFIX
from patchsync.terms.ntriples import _LANG_SUFFIX as _NT_LANG_SUFFIX
from patchsync.units import QUIET, Kind, TransactionError

cdef extern from *:
    """
    /* An instance of the named tuple type t (a tuple subclass without a __dict__) holding
       seven items, without first building a plain tuple to copy (what tuple.__new__ does). */
    static PyObject* patchsync_tuple7(PyObject* t, PyObject* a, PyObject* b, PyObject* c, PyObject* d,
                                      PyObject* e, PyObject* f, PyObject* g) {
        PyObject* items[7] = {a, b, c, d, e, f, g};
        PyObject* out = ((PyTypeObject*)t)->tp_alloc((PyTypeObject*)t, 7);
        if (out == NULL) return NULL;
        int tracked = 0;
        for (int i = 0; i < 7; i++) {
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(out, i, items[i]);
            tracked |= PyObject_GC_IsTracked(items[i]);
        }
        /* What the cyclic GC would do at its first pass over the tuple (a tuple of untracked
           objects, e.g. N-Triples strings, cannot be part of a cycle), done at once: the
           events waiting in the queue then cost the collector nothing. */
        if (!tracked) PyObject_GC_UnTrack(out);
        return out;
    }
    """
    object patchsync_tuple7(object t, object a, object b, object c, object d, object e, object f, object g)
cdef object _ADD = Add
cdef object _DELETE = Delete
cdef object _CHANGE = Kind.CHANGE
cdef object _CHANGE_QUIET = QUIET[Kind.CHANGE]
cdef object _ROW_FROM = patch_pb2.RdfPatchRow.FromString
cdef object _STREAM_ROW_FROM = rdf_pb2.RdfStreamRow.FromString
cdef object _STATEMENT = Statement
cdef object _FRAME_END = FrameEnd
cdef int _TRIPLES = PhysicalType.TRIPLES
cdef int _QUADS = PhysicalType.QUADS
cdef int _GRAPHS = PhysicalType.GRAPHS
cdef Py_ssize_t _BATCH = ROW_BATCH
cdef Py_ssize_t _CACHE_LIMIT = 1 << 16

# -- pass 1: the schema check --------------------------------------------------------------

# Message types of the schema.
cdef enum:
    M_FRAME = 0
    M_ROW
    M_QUAD
    M_TRIPLE
    M_IRI
    M_LIT
    M_EMPTY
    M_ENTRY
    M_NS
    M_HEADER
    M_OPTIONS
    M_SFRAME  # Jelly-RDF: RdfStreamFrame, RdfStreamRow, RdfStreamOptions, RdfGraphStart,
    M_SROW    # RdfNamespaceDeclaration
    M_SOPTIONS
    M_GSTART
    M_NSDECL
    M_COUNT

# Field kinds: 0 is "no such field".
cdef enum:
    F_NONE = 0
    F_U32
    F_ENUM
    F_BOOL
    F_STR
    F_MSG

cdef unsigned char KIND[M_COUNT][17]
cdef unsigned char SUB[M_COUNT][17]
cdef unsigned char GROUP[M_COUNT][17]  # oneof group (1-4) of the field, 0 outside a oneof

cdef unsigned long long _U32_MAX = 0xFFFFFFFFULL
cdef unsigned long long _I32_MAX = 0x7FFFFFFFULL

# Beyond this nesting protobuf's own limit may apply: such frames go to protobuf.
cdef int _MAX_DEPTH = 60


cdef void _field(int m, int f, int kind, int sub, int group):
    KIND[m][f] = kind
    SUB[m][f] = sub
    GROUP[m][f] = group


cdef void _term_fields(int m, int first, int group, bint graph):
    # RdfTriple / RdfQuad positions: iri, bnode, literal, quoted triple (graph: iri, bnode,
    # default graph, literal).
    _field(m, first, F_MSG, M_IRI, group)
    _field(m, first + 1, F_STR, 0, group)
    if graph:
        _field(m, first + 2, F_MSG, M_EMPTY, group)
        _field(m, first + 3, F_MSG, M_LIT, group)
    else:
        _field(m, first + 2, F_MSG, M_LIT, group)
        _field(m, first + 3, F_MSG, M_TRIPLE, group)


cdef void _schema():
    cdef int f
    _field(M_FRAME, 1, F_MSG, M_ROW, 0)
    _field(M_ROW, 1, F_MSG, M_OPTIONS, 1)
    for f in (2, 3):
        _field(M_ROW, f, F_MSG, M_QUAD, 1)
    for f in (4, 5):
        _field(M_ROW, f, F_MSG, M_NS, 1)
    for f in (6, 7, 8, 15):
        _field(M_ROW, f, F_MSG, M_EMPTY, 1)
    for f in (11, 12, 13):
        _field(M_ROW, f, F_MSG, M_ENTRY, 1)
    _field(M_ROW, 14, F_MSG, M_HEADER, 1)
    for m in (M_QUAD, M_TRIPLE):
        _term_fields(m, 1, 1, False)
        _term_fields(m, 5, 2, False)
        _term_fields(m, 9, 3, False)
    _term_fields(M_QUAD, 13, 4, True)
    _field(M_IRI, 1, F_U32, 0, 0)
    _field(M_IRI, 2, F_U32, 0, 0)
    _field(M_LIT, 1, F_STR, 0, 0)
    _field(M_LIT, 2, F_STR, 0, 1)
    _field(M_LIT, 3, F_U32, 0, 1)
    _field(M_ENTRY, 1, F_U32, 0, 0)
    _field(M_ENTRY, 2, F_STR, 0, 0)
    _field(M_NS, 1, F_STR, 0, 0)
    _field(M_NS, 2, F_MSG, M_IRI, 0)
    _field(M_NS, 3, F_MSG, M_IRI, 1)
    _field(M_NS, 4, F_STR, 0, 1)
    _field(M_NS, 5, F_MSG, M_EMPTY, 1)
    _field(M_NS, 6, F_MSG, M_LIT, 1)
    _field(M_HEADER, 1, F_STR, 0, 0)
    _field(M_HEADER, 2, F_MSG, M_IRI, 1)
    _field(M_HEADER, 3, F_STR, 0, 1)
    _field(M_HEADER, 4, F_MSG, M_LIT, 1)
    _field(M_HEADER, 5, F_MSG, M_TRIPLE, 1)
    _field(M_OPTIONS, 1, F_ENUM, 0, 0)
    _field(M_OPTIONS, 2, F_ENUM, 0, 0)
    _field(M_OPTIONS, 3, F_BOOL, 0, 0)
    _field(M_OPTIONS, 4, F_BOOL, 0, 0)
    for f in (9, 10, 11, 15):
        _field(M_OPTIONS, f, F_U32, 0, 0)
    # Jelly-RDF. The frame's metadata map (field 15) is left to protobuf.
    _field(M_SFRAME, 1, F_MSG, M_SROW, 0)
    _field(M_SROW, 1, F_MSG, M_SOPTIONS, 1)
    _field(M_SROW, 2, F_MSG, M_TRIPLE, 1)
    _field(M_SROW, 3, F_MSG, M_QUAD, 1)
    _field(M_SROW, 4, F_MSG, M_GSTART, 1)
    _field(M_SROW, 5, F_MSG, M_EMPTY, 1)
    _field(M_SROW, 6, F_MSG, M_NSDECL, 1)
    for f in (9, 10, 11):
        _field(M_SROW, f, F_MSG, M_ENTRY, 1)
    _field(M_SOPTIONS, 1, F_STR, 0, 0)
    _field(M_SOPTIONS, 2, F_ENUM, 0, 0)
    _field(M_SOPTIONS, 3, F_BOOL, 0, 0)
    _field(M_SOPTIONS, 4, F_BOOL, 0, 0)
    for f in (9, 10, 11, 15):
        _field(M_SOPTIONS, f, F_U32, 0, 0)
    _field(M_SOPTIONS, 14, F_ENUM, 0, 0)
    _field(M_GSTART, 1, F_MSG, M_IRI, 1)
    _field(M_GSTART, 2, F_STR, 0, 1)
    _field(M_GSTART, 3, F_MSG, M_EMPTY, 1)
    _field(M_GSTART, 4, F_MSG, M_LIT, 1)
    _field(M_NSDECL, 1, F_STR, 0, 0)
    _field(M_NSDECL, 2, F_MSG, M_IRI, 0)


_schema()


cdef inline Py_ssize_t _varint(const unsigned char* p, Py_ssize_t i, Py_ssize_t end, unsigned long long* out) noexcept nogil:
    """Read a varint of at most 5 bytes at ``i``; the next position, or -1 (truncated or longer)."""
    cdef unsigned long long v = 0
    cdef int shift = 0
    cdef unsigned char b
    while i < end and shift < 35:
        b = p[i]
        i += 1
        v |= (<unsigned long long>(b & 0x7F)) << shift
        if not b & 0x80:
            out[0] = v
            return i
        shift += 7
    return -1


cdef bint _utf8(const unsigned char* s, Py_ssize_t n) noexcept nogil:
    """Whether ``s[:n]`` is well-formed UTF-8 (no surrogates, overlongs or values past U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef unsigned char c, c1
    while i < n:
        c = s[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return False
        if c < 0xE0:
            if i + 1 >= n or (s[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
        elif c < 0xF0:
            if i + 2 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80:
                return False
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return False
            i += 3
        elif c < 0xF5:
            if i + 3 >= n:
                return False
            c1 = s[i + 1]
            if (c1 & 0xC0) != 0x80 or (s[i + 2] & 0xC0) != 0x80 or (s[i + 3] & 0xC0) != 0x80:
                return False
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
                return False
            i += 4
        else:
            return False
    return True


cdef Py_ssize_t _check(const unsigned char* p, Py_ssize_t i, Py_ssize_t end, int m, int depth) noexcept nogil:
    """Check the message of type ``m`` in ``p[i:end]``; its field count, or -1 if not plain."""
    cdef unsigned long long key, value
    cdef unsigned int seen = 0, groups = 0, bit
    cdef int f, wt, kind, group
    cdef Py_ssize_t count = 0, n
    while i < end:
        i = _varint(p, i, end, &key)
        if i < 0:
            return -1
        f = <int>(key >> 3)
        wt = <int>(key & 7)
        if f < 1 or f > 16:
            return -1
        kind = KIND[m][f]
        if kind == F_NONE:
            return -1
        if m != M_FRAME and m != M_SFRAME:  # the frames' rows are their only repeated field
            bit = 1u << f
            if seen & bit:
                return -1
            seen |= bit
            group = GROUP[m][f]
            if group:
                if groups & (1u << group):
                    return -1
                groups |= 1u << group
        count += 1
        if kind == F_STR or kind == F_MSG:
            if wt != 2:
                return -1
            i = _varint(p, i, end, &value)
            if i < 0 or <Py_ssize_t>value > end - i:
                return -1
            n = <Py_ssize_t>value
            if kind == F_STR:
                if not _utf8(p + i, n):
                    return -1
            elif depth >= _MAX_DEPTH or _check(p, i, i + n, SUB[m][f], depth + 1) < 0:
                return -1
            i += n
        else:
            if wt != 0:
                return -1
            i = _varint(p, i, end, &value)
            if i < 0:
                return -1
            # Values protobuf would truncate or sign-extend go to protobuf.
            if (kind == F_U32 and value > _U32_MAX) or (kind == F_ENUM and value > _I32_MAX) or (
                kind == F_BOOL and value > 1
            ):
                return -1
    return count


cdef class Frame:
    """A scanned frame: its bytes, the position of the next row and the number of rows."""

    cdef readonly bytes payload
    cdef readonly Py_ssize_t count
    cdef Py_ssize_t pos


def scan(bytes payload, bint rdf=False):
    """The frame as a :class:`Frame` if it is plainly encoded, else ``None`` (decode with protobuf).

    ``rdf`` selects the Jelly-RDF ``RdfStreamFrame`` schema instead of ``RdfPatchFrame``.
    """
    cdef const unsigned char* p = payload
    cdef Py_ssize_t count, size = len(payload)
    cdef int m = M_SFRAME if rdf else M_FRAME
    with nogil:
        count = _check(p, 0, size, m, 0)
    if count < 0:
        return None
    cdef Frame frame = Frame.__new__(Frame)
    frame.payload = payload
    frame.count = count
    frame.pos = 0
    return frame


# -- pass 2: decoding rows ----------------------------------------------------------------

cdef inline bint _string_plain(const unsigned char* p, Py_ssize_t i, Py_ssize_t end) noexcept:
    """Whether UTF-8 text needs none of the N-Triples string escapes (controls, quote, backslash)."""
    cdef unsigned char c
    while i < end:
        c = p[i]
        if c < 0x20 or c == 0x22 or c == 0x5C or c == 0x7F:
            return False
        i += 1
    return True


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


cdef inline Py_ssize_t _key(const unsigned char* p, Py_ssize_t i, int* field, Py_ssize_t* start, Py_ssize_t* stop) noexcept:
    """Read one field of a scanned message at ``i``: its number, and for a length-delimited
    field its content's bounds (a varint's value is returned in ``start``). Next position."""
    cdef unsigned long long key = 0, value = 0
    i = _varint(p, i, 1 << 62, &key)
    field[0] = <int>(key >> 3)
    i = _varint(p, i, 1 << 62, &value)
    if key & 7 == 2:
        start[0] = i
        stop[0] = i + <Py_ssize_t>value
        return stop[0]
    start[0] = <Py_ssize_t>value
    stop[0] = -1
    return i


cdef class _Rows:
    """The state of one batch: the decoder's hot values in C variables."""

    cdef object dec, terms, adapter, bnodes
    cdef list by_name, name_values, prefix_values, datatype_values
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
        self.names = terms.names
        self.names_last_id = terms.names.last_id
        self.by_name = terms._by_name
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
            if slot is not None:
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
        else:
            try:
                term = self.adapter.iri(value)
            except ValueError as exc:
                raise RuleViolation(f"IRI rejected by the term adapter: {exc}") from None
        slot = self.by_name[rn]
        if slot is None:
            slot = self.by_name[rn] = {}
        (<dict>slot)[rp] = (self.prefix_values[rp] if rp else None, term)
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
        if self.name_values[eid] is not None:
            self.by_name[eid] = None
        self.name_values[eid] = value

    cdef object bnode(self, const unsigned char* p, Py_ssize_t start, Py_ssize_t stop):
        label = _text(p, start, stop - start)
        term = (<dict>self.bnodes).get(label)
        if term is None:
            term = self.terms.bnode(label)
        return term

    cdef object literal(self, const unsigned char* p, Py_ssize_t i, Py_ssize_t end):
        cdef int field, kind = 0
        cdef Py_ssize_t start, stop, ref = 0, lex_start = 0, lex_stop = 0
        lex = ""
        lang = dt = None
        while i < end:
            i = _key(p, i, &field, &start, &stop)
            if field == 1:
                lex_start = start
                lex_stop = stop
                lex = _text(p, start, stop - start)
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
                cache = (<dict>self.by_datatype).setdefault(dt, {})
        if self.nt and _string_plain(p, lex_start, lex_stop):
            # ntriples.format_literal for a lexical form without escapes and a suffix it
            # already checked and cached: as cheap as a cache lookup, so none is made.
            if kind == 2 and lang:
                suffix = _NT_LANG_SUFFIX.get(lang)
            elif kind == 3:
                suffix = _NT_DATATYPE_SUFFIX.get(dt)
            else:
                suffix = ""
            if suffix is not None:
                return '"' + lex + '"' + suffix
        term = (<dict>cache).get(lex)
        if term is None:
            if len(<dict>cache) >= _CACHE_LIMIT:
                (<dict>cache).clear()
            try:
                term = self.adapter.literal(lex, lang, dt)
            except ValueError as exc:
                raise RuleViolation(f"literal rejected by the term adapter: {exc}") from None
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


def decode_rows(object dec, Frame frame, Py_ssize_t offset, Py_ssize_t start):
    """Decode up to ``ROW_BATCH`` rows of ``frame`` from row ``start`` into ``dec``'s queue.

    ``dec`` is the :class:`~patchsync.codec.patch_decoder.PatchDecoder` whose frame this is;
    the contract is the one of its ``_decode_rows``: set ``_row_next`` when rows remain,
    else end the frame, and record an error in ``_pending_error``.
    """
    cdef bytes payload = frame.payload
    cdef const unsigned char* p = payload
    cdef Py_ssize_t i = frame.pos, row_start = 0, rs = 0, re = 0, index = start, stop_index
    cdef Py_ssize_t frame_index = dec.frames
    cdef int field
    cdef bint quads, quiet
    cdef _Rows rows = _Rows.__new__(_Rows)
    append = dec._queue.append
    offset_obj = offset
    frame_obj = frame_index
    units = dec._units
    rows.dec = dec
    rows.load()
    quads = dec._quads
    quiet = units.state in _CHANGE_QUIET
    stop_index = min(frame.count, start + _BATCH)
    failed = True
    try:
        while index < stop_index:
            # The row message (field 1 of the frame), then its one field.
            i = _key(p, i, &field, &row_start, &i)
            if row_start < i:
                _key(p, row_start, &field, &rs, &re)
            else:
                field = 0  # an empty row: no field set
            terms = rows.terms
            if (field == 2 or field == 3) and terms is not None and _statement(rows, p, rs, re, quads):
                append(
                    patchsync_tuple7(
                        _ADD if field == 2 else _DELETE,
                        rows.last_s,
                        rows.last_p,
                        rows.last_o,
                        rows.last_g if quads else None,
                        offset_obj,
                        frame_obj,
                        index,
                    )
                )
                if not quiet:
                    units.send(_CHANGE)
                    quiet = units.state in _CHANGE_QUIET
            elif field == 11 and terms is not None:
                rows.name_entry(p, rs, re)
            elif field == 12 and terms is not None:
                terms.prefix_entry(*_entry(p, rs, re))
            elif field == 13 and terms is not None:
                terms.datatype_entry(*_entry(p, rs, re))
            else:
                # Every other row through the pure decoder's code, the state handed over.
                rows.store()
                row = _ROW_FROM(payload[row_start:i])
                if (field == 2 or field == 3) and terms is not None:
                    dec._statement_row(row, offset, frame_index, index)
                else:
                    dec._row(row, row.WhichOneof("row"), offset, frame_index, index)
                rows.load()
                quads = dec._quads
                quiet = units.state in _CHANGE_QUIET
            index += 1
        failed = False
    except RuleViolation as exc:
        dec._pending_error = dec._error(exc.rule, offset, index)
    except TransactionError as exc:
        dec._pending_error = dec._error(exc.text(), offset, index)
    finally:
        rows.store()
    if failed:
        dec._close_frame()
        return
    if index < frame.count:
        frame.pos = i
        dec._row_next = index
        return
    dec._end_frame(offset, frame_index, frame.count)


def decode_rdf_rows(object dec, Frame frame, Py_ssize_t offset, Py_ssize_t start):
    """Decode up to ``ROW_BATCH`` rows of a Jelly-RDF ``frame`` into ``dec``'s queue.

    ``dec`` is the :class:`~patchsync.codec.rdf_decoder.RdfDecoder` whose frame this is;
    the contract is the one of its ``_decode_rows``. Statement rows of the stream's physical
    type and lookup entries are decoded here, every other row by ``dec._row``.
    """
    cdef bytes payload = frame.payload
    cdef const unsigned char* p = payload
    cdef Py_ssize_t i = frame.pos, row_start = 0, rs = 0, re = 0, index = start, stop_index
    cdef Py_ssize_t frame_index = dec.frames
    cdef int field, physical, statement_field
    cdef bint quads, in_graph
    cdef _Rows rows = _Rows.__new__(_Rows)
    append = dec._queue.append
    offset_obj = offset
    frame_obj = frame_index
    rows.dec = dec
    rows.load()
    physical = dec._physical
    quads = physical == _QUADS
    statement_field = 3 if quads else 2
    in_graph = physical != _GRAPHS or dec._in_graph
    graph = dec._graph
    stop_index = min(frame.count, start + _BATCH)
    failed = True
    try:
        while index < stop_index:
            i = _key(p, i, &field, &row_start, &i)
            if row_start < i:
                _key(p, row_start, &field, &rs, &re)
            else:
                field = 0
            terms = rows.terms
            if (
                field == statement_field
                and terms is not None
                and in_graph
                and _statement(rows, p, rs, re, quads)
            ):
                append(
                    patchsync_tuple7(
                        _STATEMENT,
                        rows.last_s,
                        rows.last_p,
                        rows.last_o,
                        rows.last_g if quads else graph,
                        offset_obj,
                        frame_obj,
                        index,
                    )
                )
            elif field == 9 and terms is not None:
                rows.name_entry(p, rs, re)
            elif field == 10 and terms is not None:
                terms.prefix_entry(*_entry(p, rs, re))
            elif field == 11 and terms is not None:
                terms.datatype_entry(*_entry(p, rs, re))
            else:
                rows.store()
                dec._row(_STREAM_ROW_FROM(payload[row_start:i]), offset, frame_index, index)
                rows.load()
                physical = dec._physical
                quads = physical == _QUADS
                statement_field = 3 if quads else 2
                in_graph = physical != _GRAPHS or dec._in_graph
                graph = dec._graph
            index += 1
        failed = False
    except RuleViolation as exc:
        dec._pending_error = dec._error(exc.rule, offset, index)
    finally:
        rows.store()
    if not failed:
        if index < frame.count:
            frame.pos = i
            dec._row_next = index
            return
        append(_FRAME_END(offset, frame_index, frame.count))
    dec._close_frame()
