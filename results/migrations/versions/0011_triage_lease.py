"""triages.lease_owner and lease_expires_at: one process at a time runs a triage, and only that process
records its runs and its outcome (results/triage_lease.py)

Triages recorded before hold no lease: any process may take them up.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 00:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("triages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lease_owner", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("triages", schema=None) as batch_op:
        batch_op.drop_column("lease_expires_at")
        batch_op.drop_column("lease_owner")
