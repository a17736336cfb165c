"""run schedule: "nightly" (a run of the nightly plan, judged) or "ad-hoc" (by hand, only reported)

Every run stored before is a nightly one: the stores so far were filled by the nightly, and the server
default keeps their series judged as before.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26 03:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("schedule", sa.String(length=20), server_default="nightly", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("schedule")
