# The compiled statement row of the encoders (bench.native_bench measures it), included by _native.pyx.
#
# What it writes is what TermEncoder.statement and PatchEncoder._statement /
# RdfEncoder.statement write, byte for byte (tests/test_native_encoder.py). It holds no
# state of its own: the LRU lookups, the IRI 0-id state and the repeated terms are the
# fields of the encoder's TermEncoder and LruLookups (the compiled subclasses of
# _native_encstate.pxi, whose fields it reads as C members), the frame being built is the
# FrameBuffer's, so the pure path and this one see one encoder.
#
# Only the common rows are written here: every term an IRI, a blank node (not as
# predicate), a literal (as object) or the default graph (as graph), in a stream whose
# rows cannot overflow the prefix lookup. The entry point checks this before it changes
# anything and answers False otherwise, and the caller runs the pure code, which keeps
# its rules and its errors (generalized terms, quoted triples, the prefix-overflow
# fallback) in one place.

from libc.stdlib cimport realloc, free
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE

import sys as _sys
from collections import OrderedDict as _OrderedDict

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject

from cpython.unicode cimport PyUnicode_Compare, PyUnicode_FromObject

from patchsync.codec import wire as _wire
from patchsync.terms.caches import ENCODER_CACHE_CHARS, ENCODER_CACHE_LIMIT, ENCODER_ENTRY_CHARS
from patchsync.terms import XSD_STRING as _XSD_STRING_STR

cdef object _XSD_STRING = _XSD_STRING_STR
cdef object _ENC_CHANGE = Kind.CHANGE
cdef object _ld_str = _wire.ld_str
cdef object _move_to_end = _OrderedDict.move_to_end
# TermEncoder's bounds of its caches (terms/caches.py), held as C integers.
cdef Py_ssize_t _ENC_CACHE_LIMIT = ENCODER_CACHE_LIMIT
cdef Py_ssize_t _ENC_CACHE_CHARS = ENCODER_CACHE_CHARS
cdef Py_ssize_t _ENC_ENTRY_CHARS = ENCODER_ENTRY_CHARS

# Term kinds (patchsync/terms/adapter.py).
cdef int _K_IRI = 0
cdef int _K_BNODE = 1
cdef int _K_LITERAL = 2
cdef int _K_DEFAULT = 4

# One-byte field tags, taken from wire.py so the two paths share their numbers.
cdef unsigned char _S_IRI = _wire.S_TAGS[0][0]
cdef unsigned char _S_BNODE = _wire.S_TAGS[1][0]
cdef unsigned char _P_IRI = _wire.P_TAGS[0][0]
cdef unsigned char _O_IRI = _wire.O_TAGS[0][0]
cdef unsigned char _O_BNODE = _wire.O_TAGS[1][0]
cdef unsigned char _O_LITERAL = _wire.O_TAGS[2][0]
cdef unsigned char _G_IRI = _wire.G_TAGS[0][0]
cdef unsigned char _G_BNODE = _wire.G_TAGS[1][0]
cdef unsigned char _G_DEFAULT = _wire.G_TAGS[3][0]
cdef unsigned char _IRI_PREFIX = _wire.IRI_PREFIX[0]
cdef unsigned char _IRI_NAME = _wire.IRI_NAME[0]
cdef unsigned char _LIT_LEX = _wire.LIT_LEX[0]
cdef unsigned char _LIT_LANG = _wire.LIT_LANG[0]
cdef unsigned char _LIT_DATATYPE = _wire.LIT_DATATYPE[0]
cdef unsigned char _FRAME_ROW = _wire.FRAME_ROW[0]
cdef unsigned char _ENTRY_ID = _wire.ENTRY_ID[0]
cdef unsigned char _ENTRY_VALUE = _wire.ENTRY_VALUE[0]
# RdfStreamRow.triple and .quad (rdf_encoder.ROW_TRIPLE / ROW_QUAD, which imports this module).
cdef unsigned char _ROW_TRIPLE = _wire.tag(2, 2)[0]
cdef unsigned char _ROW_QUAD = _wire.tag(3, 2)[0]
cdef object _FRAME_KIND = None  # StreamType.FRAME, set on first use (options imports nothing of ours)


cdef struct Out:
    unsigned char* data
    Py_ssize_t size
    Py_ssize_t cap


cdef int _reserve(Out* out, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need = out.size + extra
    cdef Py_ssize_t cap
    cdef unsigned char* grown
    if need <= out.cap:
        return 0
    cap = out.cap * 2 if out.cap else 256
    while cap < need:
        cap *= 2
    grown = <unsigned char*>realloc(out.data, cap)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    out.cap = cap
    return 0


cdef inline int _varint_size(unsigned long long v) noexcept:
    cdef int n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


cdef int _put_varint(Out* out, unsigned long long v) except -1:
    _reserve(out, 10)
    while v > 0x7F:
        out.data[out.size] = <unsigned char>((v & 0x7F) | 0x80)
        out.size += 1
        v >>= 7
    out.data[out.size] = <unsigned char>v
    out.size += 1
    return 0


cdef inline Py_ssize_t _write_varint(unsigned char* w, unsigned long long v) noexcept:
    """Write a varint at ``w`` (room checked by the caller); returns its size."""
    cdef Py_ssize_t n = 0
    while v > 0x7F:
        w[n] = <unsigned char>((v & 0x7F) | 0x80)
        n += 1
        v >>= 7
    w[n] = <unsigned char>v
    return n + 1


cdef int _put_byte(Out* out, unsigned char b) except -1:
    _reserve(out, 1)
    out.data[out.size] = b
    out.size += 1
    return 0


cdef int _put_raw(Out* out, bytes data) except -1:
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    _reserve(out, n)
    memcpy(out.data + out.size, PyBytes_AS_STRING(data), n)
    out.size += n
    return 0


cdef bytes _enc_utf8(object text, unsigned char tag):
    """``text`` as UTF-8; a string protobuf cannot carry raises wire.ld_str's EncodeError."""
    try:
        return (<str>text).encode("utf-8")
    except UnicodeEncodeError:
        _ld_str(bytes((tag,)), text)  # raises the pure path's error
        raise


cdef int _put_ld_str(Out* out, unsigned char tag, object text) except -1:
    cdef bytes data = _enc_utf8(text, tag)
    _put_byte(out, tag)
    _put_varint(out, PyBytes_GET_SIZE(data))
    _put_raw(out, data)
    return 0


# rdflib's term types and adapters, once patchsync's rdflib adapter has been imported (the
# codec itself never imports rdflib).
cdef bint _rdflib_ready = False
cdef object _URIREF = None
cdef object _BNODE_T = None
cdef object _LITERAL_T = None
cdef object _DG = None
cdef tuple _RDFLIB_ADAPTERS = ()


cdef int _load_rdflib() except -1:
    global _rdflib_ready, _URIREF, _BNODE_T, _LITERAL_T, _DG, _RDFLIB_ADAPTERS
    if _sys.modules.get("patchsync.terms.rdflib_adapter") is None:
        return 0
    from rdflib import BNode, Literal, URIRef
    from rdflib.graph import DATASET_DEFAULT_GRAPH_ID
    from patchsync.terms.rdflib_adapter import RdflibTerms
    from patchsync.terms.rdflib_fast import FastRdflibTerms
    _URIREF, _BNODE_T, _LITERAL_T, _DG = URIRef, BNode, Literal, DATASET_DEFAULT_GRAPH_ID
    _RDFLIB_ADAPTERS = (RdflibTerms, FastRdflibTerms)
    _rdflib_ready = True
    return 0


cdef object _unpack(TermState t, object term, bint rdflib):
    """TermEncoder.unpack. With an rdflib adapter, a term of rdflib's own URIRef, BNode or
    Literal type is unpacked here as RdflibTerms.unpack does (no cache needed); with the
    N-Triples adapter, a plain IRI or plain literal string as NTriplesTerms.unpack does
    (:func:`_nt_plain`); anything else, and the identity-cache hit, as in
    TermEncoder.unpack."""
    cdef object kind
    cdef object found
    if not rdflib and type(term) is str and type(t.adapter) is _NTRIPLES:
        found = _nt_plain(<str>term)
        if found is not None:
            return found
    if rdflib:
        kind = type(term)
        if kind is _URIREF:
            # URIRef == URIRef compares the strings (rdflib Identifier.__eq__).
            if PyUnicode_Compare(term, _DG) == 0:
                return (_K_DEFAULT,)
            return (_K_IRI, PyUnicode_FromObject(term))
        if kind is _BNODE_T:
            return (_K_BNODE, PyUnicode_FromObject(term))
        if kind is _LITERAL_T:
            # The slots rdflib's Literal.datatype / .language properties return, read
            # without calling the properties' Python functions.
            dt = term._datatype
            return (_K_LITERAL, PyUnicode_FromObject(term), term._language, None if dt is None else str(dt))
    cdef object hit = t._by_id.get(id(term))
    if hit is not None and (<tuple>hit)[0] is term:
        return (<tuple>hit)[1]
    return t.unpack(term)


cdef inline bint _differs(TermState t, object term, object last) except -1:
    """TermEncoder.differs: whether ``term`` is written rather than repeated after ``last``.
    rdflib's URIRef and BNode (equal only to their own type with the same string) and the
    plain cases of its Literal are decided here without running Python code."""
    if term is last:
        return False
    if last is None:
        return True
    cdef object kind = type(term)
    cdef object last_kind
    if _rdflib_ready:
        last_kind = type(last)
        if kind is _URIREF or kind is _BNODE_T:
            return last_kind is not kind or PyUnicode_Compare(term, last) != 0
        if kind is _LITERAL_T:
            if last_kind is _URIREF or last_kind is _BNODE_T:
                return True  # rdflib's Literal equals only literals
            if last_kind is kind:
                # rdflib's Literal.__eq__ needs equal strings, datatypes and languages
                # (these ignoring case): different strings differ, identical parts are
                # equal; any other pair (a language in other case) is the Python method's.
                if PyUnicode_Compare(term, last) != 0:
                    return True
                if _same_text(term._language, last._language) and _same_iri(term._datatype, last._datatype):
                    return False
    return t.differs(term, last)


cdef inline bint _same_text(object a, object b) except -1:
    """Both ``None`` or equal exact strings."""
    if a is b:
        return True
    return a is not None and b is not None and type(a) is str and type(b) is str and PyUnicode_Compare(a, b) == 0


cdef inline bint _same_iri(object a, object b) except -1:
    """Both ``None`` or equal URIRefs (rdflib compares URIRefs by their strings)."""
    if a is b:
        return True
    return (
        a is not None and b is not None and type(a) is _URIREF and type(b) is _URIREF
        and PyUnicode_Compare(a, b) == 0
    )


cdef struct IriState:
    # The IRI 0-id state of a TermEncoder while one row is written (written back after).
    long last_prefix
    long last_name


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_FindChar(object text, Py_UCS4 ch, Py_ssize_t start, Py_ssize_t end, int direction) except -2


cdef tuple _split_iri(str iri):
    """term_encoder.split_iri: split after the last ``#`` or ``/``."""
    cdef Py_ssize_t n = len(iri)
    cdef Py_ssize_t i = PyUnicode_FindChar(iri, 0x23, 0, n, -1)
    cdef Py_ssize_t j = PyUnicode_FindChar(iri, 0x2F, 0, n, -1)
    if j > i:
        i = j
    if i < 0:
        return ("", iri)
    return (iri[: i + 1], iri[i + 1 :])


cdef int _put_iri(Out* out, unsigned char tag, TermState t, str iri, IriState* st) except -1:
    """TermEncoder.iri and the IRI branch of TermEncoder.term."""
    cdef long prefix_id = 0
    cdef long name_id
    cdef bint write_prefix = False
    cdef LruLookup prefixes = t.prefixes
    cdef object emit = t.emit
    cdef object split
    cdef dict splits
    cdef PyObject* hit
    cdef Py_ssize_t chars
    if prefixes is None:
        name_id = _lookup_id(t.names, iri, emit)
    else:
        splits = t._splits
        hit = PyDict_GetItem(splits, iri)
        if hit != NULL:
            split = <object>hit
        else:
            split = _split_iri(iri)
            # TermEncoder.count_cached, inline: the key and its two parts.
            chars = t._cache_chars + 2 * len(iri) + _ENC_ENTRY_CHARS
            if chars > _ENC_CACHE_CHARS:
                t.drop_caches()  # clears ``splits`` too (the same dict)
            else:
                t._cache_chars = chars
            if len(splits) >= _ENC_CACHE_LIMIT:
                splits.clear()
            splits[iri] = split
        prefix_id = _lookup_id(prefixes, (<tuple>split)[0], emit)
        name_id = _lookup_id(t.names, (<tuple>split)[1], emit)
        if prefix_id != st.last_prefix:
            write_prefix = True
            st.last_prefix = prefix_id
    cdef int size = 0
    if write_prefix:
        size += 1 + _varint_size(prefix_id)
    cdef bint write_name = name_id != st.last_name + 1
    if write_name:
        size += 1 + _varint_size(name_id)
    st.last_name = name_id
    _put_byte(out, tag)
    _put_byte(out, <unsigned char>size)
    if write_prefix:
        _put_byte(out, _IRI_PREFIX)
        _put_varint(out, prefix_id)
    if write_name:
        _put_byte(out, _IRI_NAME)
        _put_varint(out, name_id)
    return 0


cdef int _put_literal(Out* out, TermState t, tuple u) except -1:
    """TermEncoder.literal in the object position."""
    cdef object lex = u[1]
    cdef object lang = u[2]
    cdef object datatype = u[3]
    cdef bytes lex_bytes = _enc_utf8(lex, _LIT_LEX) if lex else None
    cdef bytes lang_bytes = None
    cdef long dt_id = 0
    cdef Py_ssize_t size = 0
    if lex_bytes is not None:
        size += 1 + _varint_size(PyBytes_GET_SIZE(lex_bytes)) + PyBytes_GET_SIZE(lex_bytes)
    if lang:
        lang_bytes = _enc_utf8(lang, _LIT_LANG)
        size += 1 + _varint_size(PyBytes_GET_SIZE(lang_bytes)) + PyBytes_GET_SIZE(lang_bytes)
    elif datatype is not None and datatype != _XSD_STRING:
        dt_id = _lookup_id(t.datatypes, datatype, t.emit)
        size += 1 + _varint_size(dt_id)
    _put_byte(out, _O_LITERAL)
    _put_varint(out, size)
    if lex_bytes is not None:
        _put_byte(out, _LIT_LEX)
        _put_varint(out, PyBytes_GET_SIZE(lex_bytes))
        _put_raw(out, lex_bytes)
    if lang_bytes is not None:
        _put_byte(out, _LIT_LANG)
        _put_varint(out, PyBytes_GET_SIZE(lang_bytes))
        _put_raw(out, lang_bytes)
    elif dt_id:
        _put_byte(out, _LIT_DATATYPE)
        _put_varint(out, dt_id)
    return 0


cdef int _put_term(Out* out, TermState t, tuple u, unsigned char iri_tag, unsigned char bnode_tag,
                   IriState* st) except -1:
    cdef int kind = u[0]
    if kind == _K_IRI:
        return _put_iri(out, iri_tag, t, u[1], st)
    if kind == _K_BNODE:
        return _put_ld_str(out, bnode_tag, u[1])
    if kind == _K_LITERAL:
        return _put_literal(out, t, u)
    # The default graph (only reached in the graph position).
    _put_byte(out, _G_DEFAULT)
    return _put_byte(out, 0)


cdef bint _plain(TermState t, tuple u, int position) except -1:
    """Whether term ``u`` in ``position`` (0 s, 1 p, 2 o, 3 g) is one this module writes."""
    cdef int kind = u[0]
    if kind == _K_IRI:
        return True
    if kind == _K_BNODE:
        return position != 1
    if kind == _K_LITERAL:
        if position != 2:
            return False
        # A typed literal without a datatype lookup is the pure path's error.
        return bool(u[2]) or u[3] is None or u[3] == _XSD_STRING or t.datatypes is not None
    return kind == _K_DEFAULT and position == 3


cdef int _put_body(Out* out, TermState t, object s, object p, object o, object g, bint quads,
                   tuple us, tuple up, tuple uo, tuple ug) except -1:
    """TermEncoder.statement, the repeated terms included, in its order."""
    cdef IriState st
    st.last_prefix = t.last_prefix
    st.last_name = t.last_name
    cdef object last
    try:
        last = t.last_s
        if _differs(t, s, last):
            _put_term(out, t, us, _S_IRI, _S_BNODE, &st)
            t.last_s = s
        last = t.last_p
        if _differs(t, p, last):
            _put_term(out, t, up, _P_IRI, 0, &st)
            t.last_p = p
        last = t.last_o
        if _differs(t, o, last):
            _put_term(out, t, uo, _O_IRI, _O_BNODE, &st)
            t.last_o = o
        if quads:
            last = t.last_g
            if _differs(t, g, last):
                _put_term(out, t, ug, _G_IRI, _G_BNODE, &st)
                t.last_g = g
    finally:
        t.last_prefix = st.last_prefix
        t.last_name = st.last_name
    return 0


cdef int _add_row(object frames, unsigned char row_tag, Out* body) except -1:
    """FrameBuffer.add(wire.ld(row_tag, body)): the row framed as a ``rows`` field."""
    cdef Py_ssize_t row_size = 1 + _varint_size(body.size) + body.size
    cdef Py_ssize_t total = 1 + _varint_size(row_size) + row_size
    cdef bytes framed = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(framed)
    cdef Py_ssize_t at = 0
    w[at] = _FRAME_ROW
    at += 1
    at += _write_varint(w + at, row_size)
    w[at] = row_tag
    at += 1
    at += _write_varint(w + at, body.size)
    if body.size:
        memcpy(w + at, body.data, body.size)
    (<list>frames.rows).append(framed)
    frames.size += total
    frames.rows_written += 1
    return 0


cdef extern from "Python.h":
    int PyList_SetSlice(object lst, Py_ssize_t low, Py_ssize_t high, PyObject* items) except -1


cdef inline int _clear(list items) except -1:
    """``items.clear()`` without a bound-method call (and no slice object, as ``del items[:]`` makes)."""
    cdef Py_ssize_t n = len(items)
    if n:
        PyList_SetSlice(items, 0, n, NULL)
    return 0


cdef int _begin_row(TermState t) except -1:
    """TermEncoder.begin_row."""
    _clear(t.names.row_keys)
    if t.prefixes is not None:
        _clear(t.prefixes.row_keys)
    if t.datatypes is not None:
        _clear(t.datatypes.row_keys)
    return 0


cdef bint _write_statement(TermState t, object frames, unsigned char row_tag, object s, object p, object o,
                           object g, bint quads) except -1:
    """Check the row is one of ours (nothing changed if not), then write it to ``frames``."""
    if t.may_overflow or t.no_split:
        return False
    if not _rdflib_ready:
        _load_rdflib()
    cdef bint rdflib = _rdflib_ready and type(t.adapter) in _RDFLIB_ADAPTERS
    cdef tuple us, up, uo
    cdef tuple ug = None
    try:
        us = _unpack(t, s, rdflib)
        up = _unpack(t, p, rdflib)
        uo = _unpack(t, o, rdflib)
        if quads:
            ug = _unpack(t, g, rdflib)
    except Exception:
        return False  # not an RDF term: the pure path reports it
    if not (_plain(t, us, 0) and _plain(t, up, 1) and _plain(t, uo, 2)):
        return False
    if quads and not _plain(t, ug, 3):
        return False
    _begin_row(t)
    cdef Out body
    body.data = NULL
    body.size = 0
    body.cap = 0
    try:
        _put_body(&body, t, s, p, o, g, quads, us, up, uo, ug)
        _add_row(frames, row_tag, &body)
    finally:
        free(body.data)
    return True


def patch_statement(object enc, bytes row_tag, object s, object p, object o, object g):
    """PatchEncoder._statement for a common row; False (nothing done) for any other."""
    global _FRAME_KIND
    if enc._finished:
        return False
    cdef object terms = enc._terms
    if not isinstance(terms, TermState):
        return False  # a pure TermEncoder: its own code writes the row
    cdef TermState t = <TermState>terms
    cdef bint quads = enc._quads
    if not quads:
        if g is not None:
            try:
                if _unpack(t, g, False)[0] != _K_DEFAULT:
                    return False  # a named graph in a TRIPLES stream: the pure path's error
            except Exception:
                return False
        g = None
    elif g is None:
        g = enc._default_graph
    cdef object frames = enc._frames
    if not _write_statement(t, frames, row_tag[0], s, p, o, g, quads):
        return False
    # PatchEncoder._content: the frame caps, then the transaction rules.
    if _FRAME_KIND is None:
        from patchsync.options import StreamType
        _FRAME_KIND = StreamType.FRAME
    if enc._stream_type is not _FRAME_KIND and (
        len(frames.rows) >= enc.max_frame_rows or frames.size >= enc.max_frame_bytes
    ):
        enc._flush_frame()
    enc._units.send(_ENC_CHANGE)
    return True


def rdf_encoder_statement(object enc, object s, object p, object o, object g):
    """RdfEncoder.statement for a common row in a TRIPLES or QUADS stream; False (nothing
    done) for any other row, and for every row of a GRAPHS stream (see rdf_statement)."""
    if enc._finished:
        return False
    cdef object terms = enc._terms
    if not isinstance(terms, TermState):
        return False  # a pure TermEncoder: its own code writes the row
    cdef TermState t = <TermState>terms
    cdef int physical = enc._physical
    cdef bint quads = physical == _QUADS
    if quads:
        if g is None:
            g = enc.adapter.default_graph()
    elif physical == _TRIPLES:
        if g is not None:
            try:
                if _unpack(t, g, False)[0] != _K_DEFAULT:
                    return False  # a named graph in a TRIPLES stream: the pure path's error
            except Exception:
                return False
        g = None
    else:
        return False
    cdef object frames = enc._frames
    if not _write_statement(t, frames, _ROW_QUAD if quads else _ROW_TRIPLE, s, p, o, g, quads):
        return False
    # RdfEncoder._after_content.
    enc.content_rows += 1
    if enc._auto_frames and (len(frames.rows) >= enc.max_frame_rows or frames.size >= enc.max_frame_bytes):
        enc._flush_frame(force=False)
    return True


def rdf_statement(object t, object frames, bytes row_tag, object s, object p, object o, object g, bint quads):
    """The body of RdfEncoder.statement after its graph handling: the row added to
    ``frames``; False (nothing done) for a row this module does not write."""
    if not isinstance(t, TermState):
        return False  # a pure TermEncoder: its own code writes the row
    return _write_statement(<TermState>t, frames, row_tag[0], s, p, o, g, quads)
