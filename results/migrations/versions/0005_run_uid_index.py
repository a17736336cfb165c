"""index runs.run_uid: ingest looks every file's run id up before it writes (results/batch.py)

Not unique: stores written before runs were deduplicated by their id may hold one run twice under its id,
and a unique index would refuse to build there. jaxbench's own writers are serialised (an exclusive
transaction), so a new duplicate cannot appear through it.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 20:30:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_run_uid"), ["run_uid"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_run_uid"))
