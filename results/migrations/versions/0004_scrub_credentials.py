"""scrub credentials from stored environments: runs ingested before ingest scrubbed credentials kept any
allowlisted-prefix variable, secrets included (JAX_AUTH_KEY, NCCL_ACCESS_KEY_ID, XLA_PASS); drop every
variable whose name or value looks like a credential, by the rule ingest applies now (core/credentials.py).
No downgrade brings them back.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 17:30:00.000000
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from jaxbench.core.credentials import looks_like_credential

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_runs = sa.table("runs", sa.column("id", sa.Integer), sa.column("environment", sa.JSON))


def scrubbed(environment: dict[str, Any]) -> dict[str, Any]:
    return {
        name: value
        for name, value in environment.items()
        if not looks_like_credential(name, value if isinstance(value, str) else str(value))
    }


def upgrade() -> None:
    connection = op.get_bind()
    changed = [
        {"run_id": run_id, "environment": scrubbed(environment)}
        for run_id, environment in connection.execute(sa.select(_runs.c.id, _runs.c.environment))
        if isinstance(environment, dict) and scrubbed(environment) != environment
    ]
    if changed:
        connection.execute(
            _runs.update()
            .where(_runs.c.id == sa.bindparam("run_id"))
            .values(environment=sa.bindparam("environment")),
            changed,
        )


def downgrade() -> None:
    """Nothing to undo: the secrets are gone on purpose."""
