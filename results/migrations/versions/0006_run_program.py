"""runs.program and runs.profile: the compiled step's fingerprint, summary and XLA cost analysis, and where a
profiled run's time went, so that an incident can say whether its first bad run compiled the same program as
its last good one, and compare their time by kind of op

Runs stored before have neither; their incidents say nothing about either.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 21:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("program", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("profile", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("profile")
        batch_op.drop_column("program")
