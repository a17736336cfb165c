"""triage_runs.cpu_per_wall: how much CPU each triage run's process got per wall second of its timed steps,
so that a resumed triage leaves out the same starved runs as the first time (triage/clocks.py, starved_runs)

Runs recorded before have none, and are never called starved.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 07:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("triage_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cpu_per_wall", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("triage_runs", schema=None) as batch_op:
        batch_op.drop_column("cpu_per_wall")
