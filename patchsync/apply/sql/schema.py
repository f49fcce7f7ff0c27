"""The SQL schema as SQLAlchemy Core tables (reads, dumps, status) and its design notes.

The schema itself is created only by the Alembic migrations in ``migrations/``; these
table objects describe the head revision for queries and must match it.

Design for set semantics at scale:

* ``ps_quads`` holds each quad once. Terms are stored as their N-Triples text (so literals
  of any length, any Unicode, blank node labels and RDF-star quoted triples ``<< … >>``
  all round-trip as text); the default graph is ``''``. Unbounded text cannot be a
  B-tree key (PostgreSQL caps index rows near 2.7 kB), so the key is ``qh``, a 128-bit
  BLAKE2b of the quad, and each position has a 64-bit hash column (``sh``, ``ph``,
  ``oh``, ``gh``) indexed for pattern lookups; a lookup filters on the hash and checks
  the text.
* ``ps_namespaces``: one binding per (graph, prefix).
* ``ps_sources``: the checkpoint per source log, with a ``version`` bumped on every
  write so two appliers cannot interleave units of one source (compare-and-set).
* ``ps_patches``: applied patches with ids, position, counts and all headers (JSON).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Integer, LargeBinary, MetaData, Table, Text

VERSION_TABLE = "ps_alembic_version"

metadata = MetaData()

quads = Table(
    "ps_quads",
    metadata,
    Column("qh", LargeBinary(16), primary_key=True),
    Column("gh", BigInteger, nullable=False),
    Column("sh", BigInteger, nullable=False),
    Column("ph", BigInteger, nullable=False),
    Column("oh", BigInteger, nullable=False),
    Column("g", Text, nullable=False),
    Column("s", Text, nullable=False),
    Column("p", Text, nullable=False),
    Column("o", Text, nullable=False),
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
)
