"""Applied-patch history with chain ids, counts and headers.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ps_patches",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("patch_id", sa.Text),
        sa.Column("prev", sa.Text),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("pos_offset", sa.BigInteger, nullable=False),
        sa.Column("pos_frame", sa.BigInteger, nullable=False),
        sa.Column("pos_row", sa.BigInteger, nullable=False),
        sa.Column("added", sa.BigInteger, nullable=False),
        sa.Column("deleted", sa.BigInteger, nullable=False),
        sa.Column("noop", sa.BigInteger, nullable=False),
        sa.Column("applied_at", sa.Float, nullable=False),
        sa.Column("headers", sa.Text, nullable=False),
    )
    op.create_index("ix_ps_patches_id", "ps_patches", ["patch_id"])


def downgrade() -> None:
    op.drop_table("ps_patches")
