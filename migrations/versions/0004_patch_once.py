"""A patch id is recorded at most once per target under the strict chain policy.

``ps_patches.chained`` is true for a record made under the strict chain policy, which
applies a patch id once per target (a patch found applied is skipped). A partial unique
index holds those records to one per id, whatever process or source made them: the last
guard behind the applier's check under the target's write lock. Records made with
``--chain ignore`` (which applies a repeated id again, by design) and the records of older
revisions keep ``chained`` false and are not constrained, so existing histories that repeat
an id upgrade without change.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ps_patches") as batch:
        batch.add_column(sa.Column("chained", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index(
        "ux_ps_patches_chained_id",
        "ps_patches",
        ["patch_id"],
        unique=True,
        postgresql_where=sa.text("chained"),
        sqlite_where=sa.text("chained"),
    )


def downgrade() -> None:
    op.drop_index("ux_ps_patches_chained_id", table_name="ps_patches")
    with op.batch_alter_table("ps_patches") as batch:
        batch.drop_column("chained")
