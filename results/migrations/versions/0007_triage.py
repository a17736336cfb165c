"""triages and triage_runs: `jaxbench triage INCIDENT` keeps each benchmark run it makes as it makes it, so
that an interrupted triage resumes where it stopped, and its outcome beside the incident's fingerprint

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26 00:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triages",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("incident_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=20), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_triages_incident_fingerprint", "triages", ["incident_fingerprint"])
    op.create_table(
        "triage_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("triage_id", sa.Integer(), sa.ForeignKey("triages.id", ondelete="CASCADE"), nullable=False),
        sa.Column("label", sa.String(length=300), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=30), nullable=False),
        sa.Column("median_step_s", sa.Float(), nullable=True),
        sa.Column("loss_curve", sa.JSON(), nullable=True),
        sa.Column("loss_optimum", sa.Float(), nullable=True),
        sa.Column("program", sa.JSON(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("result_path", sa.String(length=500), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("triage_id", "label", "attempt"),
    )
    op.create_index("ix_triage_runs_triage_id", "triage_runs", ["triage_id"])


def downgrade() -> None:
    op.drop_index("ix_triage_runs_triage_id", table_name="triage_runs")
    op.drop_table("triage_runs")
    op.drop_index("ix_triages_incident_fingerprint", table_name="triages")
    op.drop_table("triages")
