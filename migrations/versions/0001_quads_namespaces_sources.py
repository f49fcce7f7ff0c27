"""Quads, namespaces and per-source checkpoints.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
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
    # Pattern lookups: S / SP / SPO, P / PO, O, and whole graphs.
    op.create_index("ix_ps_quads_sp", "ps_quads", ["sh", "ph"])
    op.create_index("ix_ps_quads_po", "ps_quads", ["ph", "oh"])
    op.create_index("ix_ps_quads_og", "ps_quads", ["oh", "gh"])
    op.create_index("ix_ps_quads_g", "ps_quads", ["gh"])
    op.create_table(
        "ps_namespaces",
        sa.Column("g", sa.Text, primary_key=True),
        sa.Column("prefix", sa.Text, primary_key=True),
        sa.Column("iri", sa.Text, nullable=False),
    )
    op.create_table(
        "ps_sources",
        sa.Column("source", sa.Text, primary_key=True),
        sa.Column("fingerprint", sa.Text),
        sa.Column("pos_offset", sa.BigInteger, nullable=False),
        sa.Column("pos_frame", sa.BigInteger, nullable=False),
        sa.Column("pos_row", sa.BigInteger, nullable=False),
        sa.Column("patches", sa.BigInteger, nullable=False),
        sa.Column("last_id", sa.Text),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ps_sources")
    op.drop_table("ps_namespaces")
    op.drop_table("ps_quads")
