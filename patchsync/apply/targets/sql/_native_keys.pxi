# The SQL term dictionary's loops over quads in C (included by apply/targets/sql/_native.pyx).
#
# Every quad applied to a SQL target is turned into four term ids by a loop over the
# batch: 0.11 s of the 1.4 s that ``bench.apply_bench --workload`` takes into SQLite, most of
# it the interpreter's per-quad dispatch. These functions are the loops of
# patchsync/apply/targets/sql/term_keys.py (the reference, used without the compiled
# core) with the same results; tests/test_native_keys.py holds the two together.

from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject


cdef inline object _cached(dict ids, object term):
    cdef PyObject* hit = PyDict_GetItem(ids, term)
    return None if hit == NULL else <object>hit


def split_keys(quads, dict ids):
    """(keys, misses, unknown): each quad's cached (s, p, o, g) ids (None for a term not
    cached; the default graph ``None`` or ``""`` as ``""``), the positions of keys with a
    None, and the uncached terms in first-seen order (a dict of None values)."""
    cdef list keys = []
    cdef list misses = []
    cdef dict unknown = {}
    cdef Py_ssize_t n = 0
    for q in quads:
        s, p, o, g = q
        if not g:
            g = ""
        ks = _cached(ids, s)
        kp = _cached(ids, p)
        ko = _cached(ids, o)
        kg = _cached(ids, g)
        if ks is None or kp is None or ko is None or kg is None:
            misses.append(n)
            if ks is None:
                unknown[s] = None
            if kp is None:
                unknown[p] = None
            if ko is None:
                unknown[o] = None
            if kg is None:
                unknown[g] = None
        keys.append((ks, kp, ko, kg))
        n += 1
    return keys, misses, unknown


def fill_keys(quads, list keys, list misses, dict ids):
    """Set ``keys[i]`` for each ``i`` of ``misses`` from ``ids`` again: None if a term is
    still missing."""
    for i in misses:
        s, p, o, g = quads[i]
        if not g:
            g = ""
        ks = _cached(ids, s)
        kp = _cached(ids, p)
        ko = _cached(ids, o)
        kg = _cached(ids, g)
        if ks is None or kp is None or ko is None or kg is None:
            keys[i] = None
        else:
            keys[i] = (ks, kp, ko, kg)


cdef inline object _stored(dict ids, object term, list new, long long* next_id):
    cdef PyObject* hit = PyDict_GetItem(ids, term)
    if hit != NULL:
        return <object>hit
    cdef object fresh = next_id[0]
    ids[term] = fresh
    new.append(term)
    next_id[0] += 1
    return fresh


def store_keys(quads, dict ids, long long next_id, list new):
    """(keys, next id): each quad's (s, p, o, g) ids, a term not in ``ids`` getting the
    next id (stored in ``ids`` and appended to ``new``) in the order met."""
    cdef list keys = []
    for q in quads:
        s, p, o, g = q
        if not g:
            g = ""
        ks = _stored(ids, s, new, &next_id)
        kp = _stored(ids, p, new, &next_id)
        ko = _stored(ids, o, new, &next_id)
        kg = _stored(ids, g, new, &next_id)
        keys.append((ks, kp, ko, kg))
    return keys, next_id


def split_new(list keys, long long first_new):
    """(old, new): the positions of the keys whose four ids are all below ``first_new``, and
    the other keys, in order."""
    cdef list old = []
    cdef list new = []
    cdef Py_ssize_t i = 0
    cdef long long s, p, o, g
    for key in keys:
        s, p, o, g = key
        if s < first_new and p < first_new and o < first_new and g < first_new:
            old.append(i)
        else:
            new.append(key)
        i += 1
    return old, new
