# Included by _native.pyx (one extension module): pass 1, the schema check of a frame, and
# the wire-level readers (varints, UTF-8, fields) that pass 2 shares.

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


cdef enum:
    # Frames from this size on are checked without holding the interpreter lock.
    _NOGIL_SCAN_BYTES = 65536


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
    # Only a large frame is worth letting go of the interpreter for: a small one is checked
    # in microseconds, while handing the lock to a busy thread (a stream client's reader)
    # can make this one wait for it for a whole switch interval.
    if size >= _NOGIL_SCAN_BYTES:
        with nogil:
            count = _check(p, 0, size, m, 0)
    else:
        count = _check(p, 0, size, m, 0)
    if count < 0:
        return None
    cdef Frame frame = Frame.__new__(Frame)
    frame.payload = payload
    frame.count = count
    frame.pos = 0
    return frame


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
