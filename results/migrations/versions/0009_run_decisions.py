"""run_decisions: a person's decision on a run (`jaxbench runs quarantine|release|delete`), kept like a
verdict with who, when and why. A quarantined run keeps its rows and is left out of every judgement; a
deleted run's rows are removed while its record stays, with its run id and content hash, so that ingest
does not take it again.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 00:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_decisions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("run_uid", sa.String(length=64), nullable=True),
        sa.Column("source_hash", sa.String(length=64), nullable=False),
        sa.Column("decision", sa.String(length=20), nullable=False),
        sa.Column("author", sa.String(length=200), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    for column in ("run_id", "run_uid", "source_hash"):
        op.create_index(f"ix_run_decisions_{column}", "run_decisions", [column])


def downgrade() -> None:
    for column in ("run_id", "run_uid", "source_hash"):
        op.drop_index(f"ix_run_decisions_{column}", table_name="run_decisions")
    op.drop_table("run_decisions")
