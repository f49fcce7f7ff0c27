"""Every statement the SQL target's write path sends, per dialect, in one table.

Each dialect (:mod:`.dialects`) holds its column of the table; they are kept side by side
here so that one test holds them all to the rule below.

The rule for each of them: its cost per row must not depend on how many rows the tables
hold, whatever they held when the statement was planned (tests/test_sql_plans.py). A statement is
written so that no plan the database may choose for it can scan ``ps_quads`` or
``ps_terms``:

* PostgreSQL plans a join of a table with ``unnest(arrays)`` by cost, and for a batch of a
  few thousand keys a sequential scan plus a hash join is cheaper *by its estimate* than as
  many index probes until the table holds several million rows; a plan made while the
  table was small (psycopg prepares a statement after a few runs, and PostgreSQL keeps a
  generic plan that estimates ten array elements) stays in use after it has grown. So each
  key is looked up in a ``LATERAL`` subquery that cannot be turned into a join (``LIMIT 1``
  on the unique key, ``(s, p, o, g)`` for quads, ``(h, md5(term))`` for terms): the only
  plan left is a nested loop whose inner side is one index probe per key. (``h =
  ANY(array)`` is no better: PostgreSQL hashes a long array and scans the table.) Deletes remove the rows those probes found
  by their ``ctid`` (a TID scan). The target's connections also set ``plan_cache_mode =
  force_custom_plan`` (:data:`PG_SESSION`) so the choice between an index probe and a scan
  inside the subquery is made again with the table's current size every time (a table of a
  page or two is scanned; that scan does not grow with the table, because the plan does not
  outlive the size it was made for).
  ``INSERT … ON CONFLICT`` checks the unique index itself, with no join to plan.
* SQLite uses an index for every equality on its leading columns whatever the table holds
  (it has no statistics unless ``ANALYZE`` runs, and patchsync never runs it), so the
  statements are point statements on the primary key or the hash index run through
  ``executemany``, which costs no round trip in process. The inserts go as statements of
  many rows (``RowInserts`` in ``dialects/sqlite.py``), which read no table.

``tests/test_sql_plans.py`` fills tables of a million quads and checks the plan of every
statement listed here on both dialects.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Session settings of the PostgreSQL connections of the write path (see the module docstring).
PG_SESSION = ("SET plan_cache_mode = force_custom_plan",)

# Arrays go in binary (``%b``): psycopg writes text arrays through a regular expression per
# element, which cost more than the statements themselves on batches of thousands of keys.
_PG_KEYS = "unnest(%b::bigint[], %b::bigint[], %b::bigint[], %b::bigint[]) AS d(s, p, o, g)"
_PG_PROBE = "SELECT q.ctid AS t FROM ps_quads q WHERE q.s = d.s AND q.p = d.p AND q.o = d.o AND q.g = d.g LIMIT 1"
# Terms are probed by the unique (h, md5(term)) key, given hashes and texts. Every term
# statement returns (term, id) pairs of the texts it was given, ready for dict.update.
_PG_TERMS = (
    "SELECT k.term, t.id FROM unnest(%b::bigint[], %b::text[]) AS k(h, term) CROSS JOIN LATERAL "
    "(SELECT id FROM ps_terms WHERE h = k.h AND md5(term) = md5(k.term) LIMIT 1) AS t"
)


@dataclass(frozen=True)
class Statements:
    """The write path's SQL for one dialect (``%s`` or ``?`` placeholders; ``%b`` for PostgreSQL arrays).

    Quad statements take four id columns: arrays on PostgreSQL, one row per execution
    (``executemany``) on SQLite. ``term_lookup`` takes ``LOOKUP_CHUNK`` hashes on SQLite
    (the dictionary builds the statement for fewer), an array of hashes and one of the terms' texts
    on PostgreSQL, whose ``term_insert`` takes them twice.
    """

    dialect: str
    insert_quads: str
    delete_quads: str
    # The same, telling which quads changed the table (add_each, delete_each): on SQLite
    # run one row at a time (the row count tells), on PostgreSQL returning the rows written.
    insert_quads_each: str
    delete_quads_each: str
    # PostgreSQL: the add that fails on a quad already stored (no speculative insertion:
    # cheaper for the server), run where a failure is undone and the write retried.
    insert_quads_new: str
    contains_quads: str
    term_lookup: str
    term_insert: str
    term_insert_new: str
    term_ids: str
    has_patch: str
    record: str
    ns_upsert: str
    ns_delete: str
    # PostgreSQL: the same over arrays of columns, one statement for many pairs.
    ns_upsert_many: str
    ns_delete_many: str
    checkpoint_insert: str
    checkpoint_update: str


#: Hashes per SQLite lookup statement (well below SQLite's limit of bound parameters).
LOOKUP_CHUNK = 500


def _shared(mark: str) -> dict[str, str]:
    m = mark
    return {
        "has_patch": f"SELECT 1 FROM ps_patches WHERE patch_id = {m} LIMIT 1",
        "record": (
            "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, noop, "
            f"applied_at, headers, chained) VALUES ({', '.join([m] * 12)})"
        ),
        "ns_upsert": (
            f"INSERT INTO ps_namespaces (g, prefix, iri) VALUES ({m}, {m}, {m}) "
            "ON CONFLICT (g, prefix) DO UPDATE SET iri = excluded.iri"
        ),
        "ns_delete": f"DELETE FROM ps_namespaces WHERE g = {m} AND prefix = {m}",
        "checkpoint_insert": (
            "INSERT INTO ps_sources (source, fingerprint, pos_offset, pos_frame, pos_row, patches, last_id, "
            f"updated_at, version) VALUES ({', '.join([m] * 9)}) ON CONFLICT (source) DO NOTHING"
        ),
        "checkpoint_update": (
            f"UPDATE ps_sources SET fingerprint = {m}, pos_offset = {m}, pos_frame = {m}, pos_row = {m}, "
            f"patches = {m}, last_id = {m}, updated_at = {m}, version = {m} WHERE source = {m} AND version = {m}"
        ),
    }


POSTGRESQL = Statements(
    dialect="postgresql",
    insert_quads=(
        f"INSERT INTO ps_quads (s, p, o, g) SELECT d.s, d.p, d.o, d.g FROM {_PG_KEYS} ON CONFLICT DO NOTHING"
    ),
    delete_quads=(
        "DELETE FROM ps_quads WHERE ctid = ANY(ARRAY("
        f"SELECT x.t FROM {_PG_KEYS} CROSS JOIN LATERAL ({_PG_PROBE}) AS x))"
    ),
    contains_quads=(f"SELECT d.s, d.p, d.o, d.g FROM {_PG_KEYS} CROSS JOIN LATERAL ({_PG_PROBE}) AS x"),
    insert_quads_each=(
        f"INSERT INTO ps_quads (s, p, o, g) SELECT d.s, d.p, d.o, d.g FROM {_PG_KEYS} ON CONFLICT DO NOTHING "
        "RETURNING s, p, o, g"
    ),
    delete_quads_each=(
        "DELETE FROM ps_quads WHERE ctid = ANY(ARRAY("
        f"SELECT x.t FROM {_PG_KEYS} CROSS JOIN LATERAL ({_PG_PROBE}) AS x)) RETURNING s, p, o, g"
    ),
    insert_quads_new=f"INSERT INTO ps_quads (s, p, o, g) SELECT d.s, d.p, d.o, d.g FROM {_PG_KEYS}",
    term_lookup=_PG_TERMS,
    # One round trip: the inserted rows come back from RETURNING, the ones already there
    # from the lookup (whose snapshot does not show this statement's inserts).
    term_insert=(
        "WITH ins AS (INSERT INTO ps_terms (h, term) "
        "SELECT * FROM unnest(%b::bigint[], %b::text[]) AS i(h, term) ORDER BY h "
        f"ON CONFLICT (h, md5(term)) DO NOTHING RETURNING term, id) SELECT term, id FROM ins UNION ALL {_PG_TERMS}"
    ),
    # Terms a lookup just found absent: a plain insert costs half of ON CONFLICT's
    # speculative one. It fails whole if another applier added one of them since; the
    # dictionary then uses term_insert. Their ids are drawn first (term_ids) and sent with
    # them, so nothing comes back: RETURNING cost the server a sixth of the insert and the
    # client the parsing of every text it had just sent.
    term_insert_new=(
        "INSERT INTO ps_terms (id, h, term) SELECT * FROM unnest(%b::bigint[], %b::bigint[], %b::text[]) "
        "AS i(id, h, term) ORDER BY h"
    ),
    term_ids="SELECT array_agg(nextval('ps_terms_id_seq')) FROM generate_series(1, %s)",
    ns_upsert_many=(
        "INSERT INTO ps_namespaces (g, prefix, iri) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) "
        "ON CONFLICT (g, prefix) DO UPDATE SET iri = excluded.iri"
    ),
    ns_delete_many=(
        "DELETE FROM ps_namespaces n USING unnest(%s::text[], %s::text[]) AS d(g, prefix) "
        "WHERE n.g = d.g AND n.prefix = d.prefix"
    ),
    **_shared("%s"),
)

#: PostgreSQL: patch records given as one JSON array of rows (the ``record`` statement's
#: columns), inserted in its order (``seq`` follows it).
RECORDS_AT_ONCE = (
    "INSERT INTO ps_patches (patch_id, prev, source, pos_offset, pos_frame, pos_row, added, deleted, noop, "
    "applied_at, headers, chained) SELECT e.r->>0, e.r->>1, e.r->>2, (e.r->>3)::bigint, (e.r->>4)::bigint, "
    "(e.r->>5)::bigint, (e.r->>6)::bigint, (e.r->>7)::bigint, (e.r->>8)::bigint, (e.r->>9)::double precision, "
    "e.r->>10, (e.r->>11)::boolean FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS e(r, n) ORDER BY e.n"
)

SQLITE = Statements(
    dialect="sqlite",
    # OR IGNORE / OR FAIL, not ON CONFLICT / plain: the target sends these as statements of
    # many rows (dialects/sqlite.py), and only these conflict modes need no statement journal.
    insert_quads="INSERT OR IGNORE INTO ps_quads (s, p, o, g) VALUES (?, ?, ?, ?)",
    delete_quads="DELETE FROM ps_quads WHERE s = ? AND p = ? AND o = ? AND g = ?",
    contains_quads="SELECT 1 FROM ps_quads WHERE s = ? AND p = ? AND o = ? AND g = ?",
    insert_quads_each="INSERT INTO ps_quads (s, p, o, g) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    delete_quads_each="DELETE FROM ps_quads WHERE s = ? AND p = ? AND o = ? AND g = ?",
    insert_quads_new="INSERT INTO ps_quads (s, p, o, g) VALUES (?, ?, ?, ?)",  # unused: no savepoint per batch
    term_lookup=f"SELECT id, term FROM ps_terms WHERE h IN ({', '.join(['?'] * LOOKUP_CHUNK)})",
    term_insert="INSERT OR FAIL INTO ps_terms (id, h, term) VALUES (?, ?, ?)",
    term_insert_new="INSERT INTO ps_terms (id, h, term) VALUES (?, ?, ?)",  # one writer: term_insert is plain already
    term_ids="SELECT max(id) FROM ps_terms",  # unused: the writer hands out ids itself (terms.py)
    ns_upsert_many="",  # unused: executemany of ns_upsert runs in process
    ns_delete_many="",  # likewise ns_delete
    **_shared("?"),
)

__all__ = ["LOOKUP_CHUNK", "PG_SESSION", "POSTGRESQL", "RECORDS_AT_ONCE", "SQLITE", "Statements"]
