"""Resume points: decoder snapshots as plain, validated data (no pickle), for the tail daemon
and apply.

A *resume point* (the code's word for what users and logs call a *decoder snapshot*, so
that "snapshot" in code names only a dataset snapshot; docs/glossary.md) lets a restarted
tail daemon, or the next ``apply`` of a log, resume decoding it in the middle instead of
from its first byte (docs/design.md §3: "persisting the decoder state with the checkpoint
is faster"). It holds exactly the state a :class:`~patchsync.codec.patch_decoder.PatchDecoder` carries
from one patch to the next at a frame boundary: the stream options, the three lookup
tables, the IRI 0-id state, the repeated terms and the position. Caches of built terms are
left out: they are rebuilt on demand.

File layout: one ASCII header line, then the body: the length of a JSON head (4 bytes,
little-endian), the JSON head (every field but the lookup entries), then the three lookup
tables' entries (names, prefixes, datatypes, when the stream's options are known)::

    patchsync-tail-snapshot 3 sha256=<hex digest of the body>\n
    <head length> {"source": ..., "fingerprint": ..., "offset": ..., ...}
    <runs> <values> <text bytes> <first id, count of each run> <the values' UTF-8 text, joined by U+0000>

(counts and ids are 4-byte little-endian integers; a run is entries of consecutive ids).
The same bytes are the tail daemon's snapshot files and the version index's checkpoints
(:mod:`patchsync.logs.version_index`), where a fetch restores one: a table is read with a
few C-level calls (one decode and one split of its text, a slice assignment a run), where
the JSON of version 2 cost a parse and Python steps per entry (decision 0030). A decoder
whose lookups hold a value with U+0000 (no IRI can) is not snapshotted.

The file is read as data only: it is checked for the magic, the format version, its size,
the checksum, then every field for type and range against the reader's limits, and the
decoder is rebuilt through the same validation the stream's own rows go through. Anyone who
can write the state directory can at worst make the daemon decode the log from its start
(a snapshot only accelerates; the target's checkpoint is authoritative), never run code as
the daemon, which the pickle files of format 1 allowed. Version 2 (all JSON) is not read
either: such a snapshot is ignored once, like any unusable one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from patchsync.codec.decoder_state import DecoderState, LookupState, TermState
from patchsync.codec.patch_decoder import PatchDecoder
from patchsync.codec.term_decoder import RuleViolation
from patchsync.errors import PatchsyncError
from patchsync.options import Limits
from patchsync.terms import BNODE, DEFAULT_GRAPH, IRI, LITERAL, TRIPLE, TermAdapter

MAGIC = b"patchsync-tail-snapshot"
#: Version 1 was a pickle, version 2 all JSON; neither is read again.
VERSION = 3
#: A snapshot larger than this is not read (the lookups it can hold are far smaller).
MAX_RESUME_POINT_BYTES = 256 << 20
#: Log bytes before the snapshot's offset whose hash it keeps (see :func:`encode_resume_point`).
ANCHOR_BYTES = 4096
_HEADER_MAX = 128
#: The lookup tables, in the order the body holds their columns.
_TABLES = ("names", "prefixes", "datatypes")
_U32 = struct.Struct("<I")
_COUNTS = struct.Struct("<III")
#: What joins a table's values (no IRI holds it: a table with one is not snapshotted).
_SEPARATOR = "\0"
#: An array type code of 4-byte unsigned integers (``I`` on every platform CPython runs on).
_U32_CODE = next(code for code in "IL" if array(code).itemsize == 4)
_SWAP = sys.byteorder != "little"


class ResumePointError(PatchsyncError):
    """A decoder snapshot file is not a valid resume point for this log (it is then ignored)."""


@dataclass(frozen=True)
class ResumePoint:
    """A decoder restored from a decoder snapshot file, with what it was taken for."""

    source: str
    fingerprint: str
    offset: int
    checkpoint: tuple[int, int]
    decoder: PatchDecoder[Any]
    anchor_len: int
    anchor_sha256: str

    def anchored_in(self, before_offset: bytes) -> bool:
        """Whether ``before_offset`` (the ``anchor_len`` log bytes before the offset) are those seen."""
        return len(before_offset) == self.anchor_len and hashlib.sha256(before_offset).hexdigest() == self.anchor_sha256


# -- writing ---------------------------------------------------------------------------


def encode_resume_point(
    decoder: PatchDecoder[Any], *, source: str, fingerprint: str, checkpoint: tuple[int, int], anchor: bytes
) -> bytes:
    """The snapshot of ``decoder``, which must stand at a frame boundary between patches.

    ``anchor`` is the end of the log just before the decoder's offset (up to
    ``ANCHOR_BYTES``): a log's fingerprint covers only its first frame, so two logs that
    start alike (or a log rewritten after its first frame) are told apart by these bytes.

    Raises :class:`ResumePointError` if it does not (unread input, an open transaction or
    patch, queued events, a failed decoder): such a state is not resumable from a frame
    boundary, so the daemon skips the snapshot.
    """
    if not decoder.resumable:
        raise ResumePointError("the decoder is not at a frame boundary between patches")
    state = decoder.export_state()
    adapter = decoder.adapter
    body: dict[str, Any] = {
        "source": source,
        "fingerprint": fingerprint,
        "offset": state.offset,
        "checkpoint": [checkpoint[0], checkpoint[1]],
        "anchor_len": len(anchor),
        "anchor_sha256": hashlib.sha256(anchor).hexdigest(),
        "frames": state.frames,
        "patches": state.patches,
        "tx_seen": state.tx_seen,
        "options": None,
        "terms": None,
    }
    terms = state.terms
    columns: list[bytes] = []
    if state.options is not None and terms is not None:
        columns = [_columns_out(getattr(terms, table)) for table in _TABLES]
        body["options"] = base64.b64encode(state.options).decode("ascii")
        body["terms"] = {
            "names": _lookup_out(terms.names),
            "prefixes": _lookup_out(terms.prefixes),
            "datatypes": _lookup_out(terms.datatypes),
            "last_prefix": terms.last_prefix,
            "last_name": terms.last_name,
            "last": {
                "s": _term_out(adapter, terms.last_s),
                "p": _term_out(adapter, terms.last_p),
                "o": _term_out(adapter, terms.last_o),
                "g": _term_out(adapter, terms.last_g),
            },
        }
    head = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    data = b"".join([_U32.pack(len(head)), head, *columns])
    header = b"%s %d sha256=%s\n" % (MAGIC, VERSION, hashlib.sha256(data).hexdigest().encode("ascii"))
    return header + data


def _lookup_out(lookup: LookupState) -> dict[str, Any]:
    return {"size": lookup.size, "last_id": lookup.last_id}


def _columns_out(lookup: LookupState) -> bytes:
    """One table's entries: the count of runs, of values and the bytes of their text, each
    run's first id and count, then the values' UTF-8 text, joined by :data:`_SEPARATOR`."""
    joined = _SEPARATOR.join(lookup.values)
    if joined.count(_SEPARATOR) != max(len(lookup.values) - 1, 0):
        raise ResumePointError("a lookup value holds U+0000")
    text = joined.encode("utf-8")
    runs = array(_U32_CODE, [n for run in lookup.runs for n in run])
    if _SWAP:
        runs.byteswap()
    return _COUNTS.pack(len(lookup.runs), len(lookup.values), len(text)) + runs.tobytes() + text


def _term_out(adapter: TermAdapter[Any], term: Any) -> Any:
    if term is None:
        return None
    u = adapter.unpack(term)
    kind = u[0]
    if kind == IRI:
        return ["iri", u[1]]
    if kind == BNODE:
        return ["bnode", u[1]]
    if kind == LITERAL:
        return ["literal", u[1], u[2], u[3]]
    if kind == TRIPLE:
        return ["triple", _term_out(adapter, u[1]), _term_out(adapter, u[2]), _term_out(adapter, u[3])]
    if kind == DEFAULT_GRAPH:
        return ["default"]
    raise ResumePointError(f"unknown term kind {kind!r}")


# -- reading ---------------------------------------------------------------------------


def decode_resume_point(data: bytes, adapter: TermAdapter[Any], *, source: str, limits: Limits) -> ResumePoint:
    """Rebuild the decoder a snapshot file holds; raises :class:`ResumePointError` with the reason."""
    if len(data) > MAX_RESUME_POINT_BYTES:
        raise ResumePointError(f"larger than {MAX_RESUME_POINT_BYTES} bytes")
    end = data.find(b"\n", 0, _HEADER_MAX)
    if not data.startswith(MAGIC + b" ") or end < 0:
        raise ResumePointError("not a patchsync snapshot (an old pickle snapshot or a foreign file)")
    parts = data[:end].split(b" ")
    if len(parts) != 3 or parts[1] != str(VERSION).encode() or not parts[2].startswith(b"sha256="):
        raise ResumePointError(f"unsupported snapshot format {data[:end][len(MAGIC) + 1 :]!r}")
    body = memoryview(data)[end + 1 :]
    if hashlib.sha256(body).hexdigest().encode("ascii") != parts[2][len(b"sha256=") :]:
        raise ResumePointError("checksum mismatch (a truncated or corrupted snapshot)")
    head_end = _U32.size + (_U32.unpack_from(body)[0] if len(body) >= _U32.size else len(body))
    if head_end > len(body):
        raise ResumePointError("the head is cut short")
    try:
        doc = json.loads(str(body[_U32.size : head_end], "utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ResumePointError(f"the head is not JSON: {exc}") from None
    try:
        return _restore(doc, body[head_end:], adapter, source, limits)
    except (RuleViolation, ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
        raise ResumePointError(f"invalid content: {exc}") from None


def _int(doc: Mapping[str, Any], key: str, low: int = 0, high: int = 1 << 62) -> int:
    value = doc[key]
    if type(value) is not int or not low <= value <= high:
        raise ResumePointError(f"{key} is not an integer in [{low}, {high}]")
    return value


def _str(doc: Mapping[str, Any], key: str) -> str:
    value = doc[key]
    if not isinstance(value, str):
        raise ResumePointError(f"{key} is not a string")
    return value


def _restore(doc: Any, columns: memoryview, adapter: TermAdapter[Any], source: str, limits: Limits) -> ResumePoint:
    if not isinstance(doc, dict):
        raise ResumePointError("body is not an object")
    if _str(doc, "source") != source:
        raise ResumePointError("taken for another log")
    fingerprint = _str(doc, "fingerprint")
    offset = _int(doc, "offset", 1)
    cp = doc["checkpoint"]
    if not (isinstance(cp, list) and len(cp) == 2 and all(type(x) is int and x >= 0 for x in cp)):
        raise ResumePointError("checkpoint is not a pair of positions")
    anchor_len = _int(doc, "anchor_len", 0, min(offset, ANCHOR_BYTES))
    anchor_sha256 = _str(doc, "anchor_sha256")
    tx_seen = doc["tx_seen"]
    if not isinstance(tx_seen, bool):
        raise ResumePointError("tx_seen is not a boolean")
    options: bytes | None = None
    terms: TermState[Any] | None = None
    if doc["options"] is not None:
        if not isinstance(doc["options"], str) or not isinstance(doc["terms"], dict):
            raise ResumePointError("options or terms malformed")
        try:
            options = base64.b64decode(doc["options"], validate=True)
        except ValueError as exc:
            raise ResumePointError(f"options are not base64: {exc}") from None
        terms = _terms_in(doc["terms"], columns, adapter, limits)
    elif columns:
        raise ResumePointError("lookup entries without options")
    state: DecoderState[Any] = DecoderState(
        offset=offset,
        frames=_int(doc, "frames"),
        patches=_int(doc, "patches"),
        tx_seen=tx_seen,
        options=options,
        terms=terms,
    )
    # The decoder validates the state like the stream's own rows (options, lookups).
    decoder = PatchDecoder.from_state(state, adapter, source=source, limits=limits)
    return ResumePoint(source, fingerprint, offset, (cp[0], cp[1]), decoder, anchor_len, anchor_sha256)


def _lookup_in(doc: Mapping[str, Any], key: str, columns: memoryview, at: int) -> tuple[LookupState, int]:
    """Table ``key``: its size and 0-id state from the head, its entries from the columns at
    ``at``; and where the next table's columns start. The runs and values are checked by
    the decoder's lookup (:meth:`~patchsync.codec.term_decoder.Lookup.restore_state`)."""
    table = doc[key]
    if not isinstance(table, dict):
        raise ResumePointError(f"{key} lookup malformed")
    if at + _COUNTS.size > len(columns):
        raise ResumePointError(f"{key} entries missing")
    runs_count, count, text_bytes = _COUNTS.unpack_from(columns, at)
    runs_at = at + _COUNTS.size
    text_at = runs_at + 8 * runs_count
    end = text_at + text_bytes
    if end > len(columns):
        raise ResumePointError(f"{key} entries cut short")
    numbers = array(_U32_CODE)
    numbers.frombytes(columns[runs_at:text_at])
    if _SWAP:
        numbers.byteswap()
    runs = tuple(zip(numbers[::2], numbers[1::2], strict=True))
    values = str(columns[text_at:end], "utf-8").split(_SEPARATOR) if count else []
    if len(values) != count or (not count and text_bytes):
        raise ResumePointError(f"{key} holds {len(values)} values, not {count}")
    return LookupState(_int(table, "size"), _int(table, "last_id"), runs, tuple(values)), end


def _terms_in(doc: dict[str, Any], columns: memoryview, adapter: TermAdapter[Any], limits: Limits) -> TermState[Any]:
    last = doc["last"]
    if not isinstance(last, dict):
        raise ResumePointError("repeated terms malformed")
    depth = limits.max_nesting
    names, at = _lookup_in(doc, "names", columns, 0)
    prefixes, at = _lookup_in(doc, "prefixes", columns, at)
    datatypes, at = _lookup_in(doc, "datatypes", columns, at)
    if at != len(columns):
        raise ResumePointError(f"{len(columns) - at} bytes after the lookup entries")
    return TermState(
        names=names,
        prefixes=prefixes,
        datatypes=datatypes,
        last_prefix=_int(doc, "last_prefix"),
        last_name=_int(doc, "last_name"),
        last_s=_term_in(last["s"], adapter, depth),
        last_p=_term_in(last["p"], adapter, depth),
        last_o=_term_in(last["o"], adapter, depth),
        last_g=_term_in(last["g"], adapter, depth),
    )


def _term_in(doc: Any, adapter: TermAdapter[Any], depth_left: int) -> Any:
    if doc is None:
        return None
    if not isinstance(doc, list) or not doc:
        raise ResumePointError("a term is not a tagged list")
    kind, args = doc[0], doc[1:]
    if kind == "iri" and len(args) == 1 and isinstance(args[0], str):
        return adapter.iri(args[0])
    if kind == "bnode" and len(args) == 1 and isinstance(args[0], str):
        return adapter.bnode(args[0])
    if kind == "literal" and len(args) == 3 and isinstance(args[0], str):
        lang, dt = args[1], args[2]
        if (lang is None or isinstance(lang, str)) and (dt is None or isinstance(dt, str)):
            return adapter.literal(args[0], lang, dt)
    if kind == "triple" and len(args) == 3:
        if depth_left <= 0:
            raise ResumePointError("quoted triples nested too deeply")
        s, p, o = (_term_in(a, adapter, depth_left - 1) for a in args)
        if s is None or p is None or o is None:
            raise ResumePointError("a quoted triple lacks a term")
        return adapter.triple(s, p, o)
    if kind == "default" and not args:
        return adapter.default_graph()
    raise ResumePointError(f"malformed term {doc!r:.60}")
