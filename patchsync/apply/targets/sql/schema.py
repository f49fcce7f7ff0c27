"""The SQL schema as SQLAlchemy Core tables (reads, dumps, status) and its design notes.

The schema itself is created only by the Alembic migrations in ``migrations/``; these
table objects describe the head revision for queries and must match it.

Design for set semantics at scale:

* ``ps_terms`` is a term dictionary: each distinct term once, as its N-Triples text (so
  literals of any length, any Unicode, blank node labels and RDF-star quoted triples
  ``<< … >>`` all round-trip as text; the default graph is the empty string), with a
  sequential ``id`` and ``h``, a 64-bit hash of the text (:data:`term_hash`). Text of
  unbounded length cannot be a B-tree key (PostgreSQL caps index rows near 2.7 kB), so a
  term is found by its hash and the text is compared; distinct terms may share a hash.
  On PostgreSQL ``(h, md5(term))`` is unique, so concurrent appliers adding the same new
  term end up with one row; SQLite has one writer at a time and a plain index on ``h``.
  Terms are never deleted, so an id, once read, stays valid.
* ``ps_quads`` holds each quad once as four term ids with the quad as primary key
  (S, SP, SPO lookups; ``WITHOUT ROWID`` on SQLite) and covering indexes ``posg`` (P,
  PO), ``ogsp`` (O, OG) and ``gspo`` (whole graphs).
* ``ps_namespaces``: one binding per (graph, prefix).
* ``ps_sources``: the checkpoint per source log, with a ``version`` bumped on every
  write so two appliers cannot interleave units of one source (compare-and-set).
* ``ps_patches``: applied patches with ids, position, counts and all headers (JSON);
  ``chained`` marks a record made under the strict chain policy, and a partial unique
  index allows one such record per patch id (``--chain ignore`` records are not held to it).
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import blake2b
from typing import cast

from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, MetaData, PrimaryKeyConstraint, Table, Text

from patchsync.apply.targets.sql import speedups

VERSION_TABLE = "ps_alembic_version"

metadata = MetaData()

terms = Table(
    "ps_terms",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("h", BigInteger, nullable=False),
    Column("term", Text, nullable=False),
)

quads = Table(
    "ps_quads",
    metadata,
    Column("s", BigInteger, nullable=False),
    Column("p", BigInteger, nullable=False),
    Column("o", BigInteger, nullable=False),
    Column("g", BigInteger, nullable=False),
    PrimaryKeyConstraint("s", "p", "o", "g", name="pk_ps_quads"),
    sqlite_with_rowid=False,
)

namespaces = Table(
    "ps_namespaces",
    metadata,
    Column("g", Text, primary_key=True),
    Column("prefix", Text, primary_key=True),
    Column("iri", Text, nullable=False),
)

sources = Table(
    "ps_sources",
    metadata,
    Column("source", Text, primary_key=True),
    Column("fingerprint", Text),
    Column("pos_offset", BigInteger, nullable=False),
    Column("pos_frame", BigInteger, nullable=False),
    Column("pos_row", BigInteger, nullable=False),
    Column("patches", BigInteger, nullable=False),
    Column("last_id", Text),
    Column("updated_at", Float, nullable=False),
    Column("version", BigInteger, nullable=False),
)

patches = Table(
    "ps_patches",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("patch_id", Text),
    Column("prev", Text),
    Column("source", Text, nullable=False),
    Column("pos_offset", BigInteger, nullable=False),
    Column("pos_frame", BigInteger, nullable=False),
    Column("pos_row", BigInteger, nullable=False),
    Column("added", BigInteger, nullable=False),
    Column("deleted", BigInteger, nullable=False),
    Column("noop", BigInteger, nullable=False),
    Column("applied_at", Float, nullable=False),
    Column("headers", Text, nullable=False),
    Column("chained", Boolean, nullable=False),
)


def term_hash_pure(text: str) -> int:
    """The dictionary hash ``h`` of a term's N-Triples text: BLAKE2b-64, signed, big-endian.

    Part of the stored format (revision 0003 takes it over from revision 0002's hash
    columns): it must never change. This is the reference; :data:`term_hash` is the one
    the target uses.
    """
    return int.from_bytes(blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def _term_hash() -> Callable[[str], int]:
    # The compiled copy (2.5 to 5 times faster: hashlib's object and digest cost more than
    # the hash on short text) unless it is not built or PATCHSYNC_PURE is set.
    core = speedups.native()
    return term_hash_pure if core is None else cast("Callable[[str], int]", core.term_hash)


#: :func:`term_hash_pure`, computed in C when the SQL speed-ups are built
#: (tests/test_native_hash.py holds the two to the same numbers).
term_hash: Callable[[str], int] = _term_hash()
