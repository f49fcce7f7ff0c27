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
    void PyObject_GC_UnTrack(object o)

from patchsync._proto import patch_pb2, rdf_pb2
from patchsync.codec.driver import ROW_BATCH
from patchsync.codec.term_decoder import RuleViolation, check_absolute_iri
from patchsync.events import Add, Delete, FrameEnd, PhysicalType, Statement
from patchsync.terms.caches import DATATYPE_SUFFIX as _NT_DATATYPE_SUFFIX
from patchsync.terms.caches import DECODER_CACHE_LIMIT, NEW_CACHE_CHARS
from patchsync.terms.caches import LANG_SUFFIX as _NT_LANG_SUFFIX
from patchsync.terms.ntriples import NTriplesTerms
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

cdef extern from *:
    """
    /* A copy of each event of the list events (named tuples ending in offset, frame, row)
       with offset set to the given object and row to the event's index in the list. */
    static PyObject* patchsync_restamp(PyObject* events, PyObject* offset) {
        Py_ssize_t n = PyList_GET_SIZE(events);
        PyObject* out = PyList_New(n);
        if (out == NULL) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject* e = PyList_GET_ITEM(events, i);
            if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 3) {
                Py_DECREF(out);
                PyErr_SetString(PyExc_TypeError, "an event is a tuple ending in offset, frame and row");
                return NULL;
            }
            Py_ssize_t k = PyTuple_GET_SIZE(e);
            PyObject* row = PyLong_FromSsize_t(i);
            if (row == NULL) { Py_DECREF(out); return NULL; }
            PyTypeObject* t = Py_TYPE(e);
            PyObject* x = t->tp_alloc(t, k);
            if (x == NULL) { Py_DECREF(row); Py_DECREF(out); return NULL; }
            int tracked = 0;
            for (Py_ssize_t j = 0; j < k; j++) {
                PyObject* v = j == k - 3 ? offset : (j == k - 1 ? row : PyTuple_GET_ITEM(e, j));
                if (j != k - 1) Py_INCREF(v);
                PyTuple_SET_ITEM(x, j, v);
                tracked |= PyObject_GC_IsTracked(v);
            }
            /* As patchsync_tuple7: a tuple of untracked objects is left to no GC pass. */
            if (!tracked && PyObject_GC_IsTracked(x)) PyObject_GC_UnTrack(x);
            PyList_SET_ITEM(out, i, x);
        }
        return out;
    }
    """
    list patchsync_restamp(list events, object offset)
cdef object _ADD = Add
cdef object _DELETE = Delete
cdef object _CHANGE = Kind.CHANGE
cdef object _CHANGE_QUIET = QUIET[Kind.CHANGE]
cdef object _ROW_FROM = patch_pb2.RdfPatchRow.FromString
cdef object _STREAM_ROW_FROM = rdf_pb2.RdfStreamRow.FromString
cdef object _STATEMENT = Statement
cdef object _FRAME_END = FrameEnd
# An adapter's native_iri_type T: its iri(value) is str.__new__(T, value), built here
# without a Python call per new IRI (see FastRdflibTerms).
cdef object _STR_NEW = str.__new__
cdef int _TRIPLES = PhysicalType.TRIPLES
cdef int _QUADS = PhysicalType.QUADS
cdef int _GRAPHS = PhysicalType.GRAPHS
cdef Py_ssize_t _BATCH = ROW_BATCH
cdef Py_ssize_t _CACHE_LIMIT = DECODER_CACHE_LIMIT

# Pass 1 (the schema check) and the wire readers; pass 2's term building. Textual includes:
# one extension module, split into files by what they hold.
include "_native_wire.pxi"
include "_native_terms.pxi"
include "_native_encstate.pxi"
include "_native_encode.pxi"


# -- pass 2: decoding rows ----------------------------------------------------------------

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


def restamp(list events, object offset):
    """Copies of ``events`` placed at ``offset``, each with its index in the list as its row.

    ``events`` are named tuples ending in ``(offset, frame, row)``; the frame is kept. What
    a stream message's events become (:class:`~patchsync.streams.payloads.MessageDecoder`),
    without building an intermediate tuple per event.
    """
    return patchsync_restamp(events, offset)


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
