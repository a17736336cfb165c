"""series backend: who trained the recipe ("native", "maxtext", "levanter", ...)

Every series stored before is a native one: the server default fills them, so their identity hashes (which
leave a native backend out) still match their rows.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 03:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("backend", sa.String(length=40), server_default="native", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("series", schema=None) as batch_op:
        batch_op.drop_column("backend")
