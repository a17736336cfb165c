"""triage_runs.median_cpu_step_s: the median CPU seconds per timed step of each triage run, so that a
resumed triage that times by CPU time (triage/clocks.py, choose_clock)
replays the same samples as the first time

Runs recorded before have none: a triage holding them times by the wall clock.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 12:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("triage_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("median_cpu_step_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("triage_runs", schema=None) as batch_op:
        batch_op.drop_column("median_cpu_step_s")
