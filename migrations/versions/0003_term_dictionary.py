"""Term dictionary: quads become four integer term ids.

Each distinct N-Triples term is stored once in ``ps_terms`` (sequential id, 64-bit hash
``h``, text; ``(h, md5(term))`` unique on PostgreSQL, where appliers run concurrently); ``ps_quads`` holds (s, p, o, g) ids with the quad as primary key
(``WITHOUT ROWID`` on SQLite) and three covering indexes for pattern lookups. Compared to
revision 0002 (a 128-bit quad hash key, four hash indexes and the text repeated in every
quad) a row is a fifth of the size and an insert touches four small B-trees instead of
six large ones.

The data moves in SQL alone: the old per-position hash columns are exactly ``h`` of the
new dictionary (BLAKE2b-64 of the term's UTF-8 text), so terms are gathered with their
hash and quads joined back through hash and text.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# SQLite: INTEGER PRIMARY KEY is the rowid itself (no separate key index).
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.rename_table("ps_quads", "ps_quads_0002")
    for name in ("ix_ps_quads_sp", "ix_ps_quads_po", "ix_ps_quads_og", "ix_ps_quads_g"):
        op.drop_index(name, table_name="ps_quads_0002")
    op.create_table(
        "ps_terms",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("h", sa.BigInteger, nullable=False),
        sa.Column("term", sa.Text, nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ux_ps_terms_h", "ps_terms", [sa.text("h"), sa.text("md5(term)")], unique=True)
    else:
        op.create_index("ix_ps_terms_h", "ps_terms", ["h"])
    op.create_table(
        "ps_quads",
        sa.Column("s", sa.BigInteger, nullable=False),
        sa.Column("p", sa.BigInteger, nullable=False),
        sa.Column("o", sa.BigInteger, nullable=False),
        sa.Column("g", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("s", "p", "o", "g", name="pk_ps_quads"),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    bind.exec_driver_sql(
        "INSERT INTO ps_terms (h, term) SELECT h, t FROM (SELECT gh AS h, g AS t FROM ps_quads_0002 "
        "UNION SELECT sh, s FROM ps_quads_0002 UNION SELECT ph, p FROM ps_quads_0002 "
        "UNION SELECT oh, o FROM ps_quads_0002) AS terms ORDER BY h"
    )
    bind.exec_driver_sql(
        "INSERT INTO ps_quads (s, p, o, g) SELECT ts.id, tp.id, tob.id, tg.id FROM ps_quads_0002 q "
        "JOIN ps_terms ts ON ts.h = q.sh AND ts.term = q.s JOIN ps_terms tp ON tp.h = q.ph AND tp.term = q.p "
        "JOIN ps_terms tob ON tob.h = q.oh AND tob.term = q.o JOIN ps_terms tg ON tg.h = q.gh AND tg.term = q.g"
    )
    op.drop_table("ps_quads_0002")
    # Built after the data went in: a sorted build, not one insert per row.
    op.create_index("ix_ps_quads_posg", "ps_quads", ["p", "o", "s", "g"])
    op.create_index("ix_ps_quads_ogsp", "ps_quads", ["o", "g", "s", "p"])
    op.create_index("ix_ps_quads_gspo", "ps_quads", ["g", "s", "p", "o"])


def downgrade() -> None:
    op.rename_table("ps_quads", "ps_quads_0003")
    op.create_table(
        "ps_quads",
        sa.Column("qh", sa.LargeBinary(16), primary_key=True),
        sa.Column("gh", sa.BigInteger, nullable=False),
        sa.Column("sh", sa.BigInteger, nullable=False),
        sa.Column("ph", sa.BigInteger, nullable=False),
        sa.Column("oh", sa.BigInteger, nullable=False),
        sa.Column("g", sa.Text, nullable=False),
        sa.Column("s", sa.Text, nullable=False),
        sa.Column("p", sa.Text, nullable=False),
        sa.Column("o", sa.Text, nullable=False),
    )
    # The 0002 quad key is a BLAKE2b-128 of the quad's text, which SQL cannot compute.
    from hashlib import blake2b

    bind = op.get_bind()
    rows = bind.exec_driver_sql(
        "SELECT tg.h, ts.h, tp.h, tob.h, tg.term, ts.term, tp.term, tob.term FROM ps_quads_0003 q "
        "JOIN ps_terms ts ON ts.id = q.s JOIN ps_terms tp ON tp.id = q.p "
        "JOIN ps_terms tob ON tob.id = q.o JOIN ps_terms tg ON tg.id = q.g"
    ).all()
    old = sa.table(
        "ps_quads",
        *(sa.column(c) for c in ("qh", "gh", "sh", "ph", "oh", "g", "s", "p", "o")),
    )
    batch = [
        {
            "qh": blake2b(f"{g}\n{s}\n{p}\n{o}".encode(), digest_size=16).digest(),
            "gh": gh,
            "sh": sh,
            "ph": ph,
            "oh": oh,
            "g": g,
            "s": s,
            "p": p,
            "o": o,
        }
        for gh, sh, ph, oh, g, s, p, o in rows
    ]
    if batch:
        bind.execute(old.insert(), batch)
    op.drop_table("ps_quads_0003")
    op.drop_table("ps_terms")
    op.create_index("ix_ps_quads_sp", "ps_quads", ["sh", "ph"])
    op.create_index("ix_ps_quads_po", "ps_quads", ["ph", "oh"])
    op.create_index("ix_ps_quads_og", "ps_quads", ["oh", "gh"])
    op.create_index("ix_ps_quads_g", "ps_quads", ["gh"])
