# The encoder's state with its fields in C (bench.native_bench measures it), included by _native.pyx.
#
# term_encoder.TermEncoder and LruLookup keep their state in Python attributes; the
# compiled row writer (_native_encode.pxi) read and wrote about twenty of them per row
# through Python's attribute machinery, a quarter of its time. The classes here hold the
# same fields as C members of extension types: the row writer reads them as struct
# fields, while Python code (TermEncoder's own methods, which still write every row the
# compiled writer leaves to them, and the tests) sees ordinary attributes of the same
# names. So there is still one encoder state, shared by both paths.
#
# TermEncoder below is the Python class term_encoder.TermEncoder over a TermState base:
# its methods are the pure code's, only where the fields live differs. LruLookup is the
# whole lookup in Cython (the row writer's hit and miss paths are its id_for), with the
# pure class's rules and errors.

from patchsync.codec.term_encoder import UNKNOWN as _UNKNOWN
from patchsync.codec.term_encoder import PrefixOverflow as _PrefixOverflow
from patchsync.codec.term_encoder import TermEncoder as _PureTermEncoder
from patchsync.codec.term_encoder import lookup_overflow_message as _overflow_message
from patchsync.errors import EncodeError as _EncodeError


cdef class LruLookup:
    """term_encoder.LruLookup with C fields: value -> id, least recently used evicted."""

    cdef public str kind
    cdef public bytes row_tag
    cdef public long size
    cdef public object ids  # an OrderedDict, read as a dict on the hit path
    cdef public long last_id
    # Values used by the row being built: they must not be evicted before it is written.
    cdef public list row_keys

    def __init__(self, str kind, bytes row_tag, long size, *, bint fresh=True):
        self.kind = kind
        self.row_tag = row_tag
        self.size = size
        self.ids = _OrderedDict()
        self.last_id = 0 if fresh else _UNKNOWN
        self.row_keys = []

    def id_for(self, value, emit):
        """The id of ``value``, emitting an entry row first if it is new (or was evicted)."""
        return _lookup_id(self, value, emit)


cdef class TermState:
    """The fields of term_encoder.TermEncoder the compiled row writer uses, as C members."""

    cdef public object adapter
    cdef public object emit
    cdef public LruLookup names
    cdef public LruLookup prefixes
    cdef public LruLookup datatypes
    cdef public long last_prefix
    cdef public long last_name
    cdef public object last_s
    cdef public object last_p
    cdef public object last_o
    cdef public object last_g
    cdef public dict _splits
    cdef public dict _by_id
    cdef public Py_ssize_t _cache_chars
    cdef public bint may_overflow
    cdef public bint no_split
    cdef public tuple _loose_types
    cdef public object _writes_same


# The N-Triples adapter's type: its plain terms are unpacked here (_nt_plain).
from patchsync.terms.ntriples import NTriplesTerms as _NTriplesTerms

cdef object _NTRIPLES = _NTriplesTerms


cdef inline bint _iri_char(Py_UCS4 c):
    """Whether ``c`` may stand unescaped in an N-Triples IRI (terms/ntriples.py IRI_EXCLUDED)."""
    return c > 0x20 and not (
        c == u'<' or c == u'>' or c == u'"' or c == u'{' or c == u'}' or c == u'|' or c == u'^'
        or c == u'`' or c == u'\\'
    )


cdef object _nt_plain(str term):
    """NTriplesTerms.unpack of the two shapes most N-Triples terms have, a plain IRI
    (``<...>``) and a plain literal without language or datatype (``"..."``), exactly as
    its regular expressions take them; ``None`` for any other shape (the caller asks the
    adapter). Most terms of a stream re-encoded from N-Triples strings take this path,
    which needs no cache."""
    cdef Py_ssize_t n = len(term)
    cdef Py_ssize_t i
    cdef Py_UCS4 c
    if n < 2:
        return None
    cdef Py_UCS4 first = term[0]
    cdef Py_UCS4 last = term[n - 1]
    if first == u'<':
        if last != u'>' or (n >= 4 and term[1] == u'_' and term[2] == u':'):
            return None
        for i in range(1, n - 1):
            if not _iri_char(term[i]):
                return None
        return (_K_IRI, term[1:n - 1])
    if first == u'"':
        if last != u'"':
            return None
        for i in range(1, n - 1):
            c = term[i]
            if c == u'"' or c == u'\\' or c == u'\r' or c == u'\n':
                return None
        return (_K_LITERAL, term[1:n - 1], None, None)
    return None


class TermEncoder(TermState, _PureTermEncoder):
    """term_encoder.TermEncoder, its hot fields in C (see TermState)."""

    lookup_type = LruLookup

    def unpack(self, term):
        """term_encoder.TermEncoder.unpack; a plain N-Triples IRI or literal string of the
        N-Triples adapter is unpacked at once (_nt_plain), without the caches."""
        if type(term) is str and type(self.adapter) is _NTRIPLES:
            found = _nt_plain(<str>term)
            if found is not None:
                return found
        return _PureTermEncoder.unpack(self, term)


cdef long _overflow(LruLookup lookup) except -1:
    """Raise the pure lookup's error for a row needing more entries than the table holds."""
    error = _PrefixOverflow if lookup.kind == "prefix" else _EncodeError
    raise error(_overflow_message(lookup.kind, lookup.size))


cdef long _lookup_id(LruLookup lookup, object value, object emit) except -1:
    """LruLookup.id_for (term_encoder.py), statement for statement."""
    cdef object ids = lookup.ids
    cdef list row_keys = lookup.row_keys
    # An OrderedDict is a dict: reading it as one sees the same entries (str keys: no error).
    cdef PyObject* hit = PyDict_GetItem(ids, value)
    row_keys.append(value)
    if hit != NULL:
        _move_to_end(ids, value)
        return <object>hit
    cdef Py_ssize_t n = len(ids)
    cdef long size = lookup.size
    cdef long new_id
    if n < size:
        new_id = n + 1
    else:
        for victim in ids:  # the least recently used entry
            break
        if len(row_keys) > size and victim in row_keys:
            # Checked before evicting: the table must stay as the decoder sees it.
            _overflow(lookup)
        new_id = ids.pop(victim)
    ids[value] = new_id
    cdef bytes data = _enc_utf8(value, _ENTRY_VALUE)
    cdef long last_id = lookup.last_id
    cdef Py_ssize_t size_payload = 1 + _varint_size(PyBytes_GET_SIZE(data)) + PyBytes_GET_SIZE(data)
    cdef bint write_id = new_id != last_id + 1
    if write_id:
        size_payload += 1 + _varint_size(new_id)
    cdef bytes row_tag = lookup.row_tag
    cdef Py_ssize_t total = PyBytes_GET_SIZE(row_tag) + _varint_size(size_payload) + size_payload
    cdef bytes row = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(row)
    memcpy(w, PyBytes_AS_STRING(row_tag), PyBytes_GET_SIZE(row_tag))
    cdef Py_ssize_t at = PyBytes_GET_SIZE(row_tag)
    at += _write_varint(w + at, size_payload)
    if write_id:
        w[at] = _ENTRY_ID
        at += 1
        at += _write_varint(w + at, new_id)
    w[at] = _ENTRY_VALUE
    at += 1
    at += _write_varint(w + at, PyBytes_GET_SIZE(data))
    memcpy(w + at, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))
    lookup.last_id = new_id
    emit(row)
    return new_id
