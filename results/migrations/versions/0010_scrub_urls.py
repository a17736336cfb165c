"""scrub credentials from stored URLs: a component's repository recorded as `https://oauth2:TOKEN@host/…`
(or with `?token=`) reached the components table, and from there the dashboard and the nightly's issues;
a job link, a run's or a triage run's reason (git's and pip's words quote the URL) and a triage's plan
could hold one too. Each is rewritten by the rule ingest applies now (core/urls.py). No downgrade brings
them back.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

from jaxbench.core.urls import scrub_document, scrub_url, scrub_urls

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TEXT_COLUMNS: tuple[tuple[str, str, Callable[[str], str]], ...] = (
    ("components", "repository", scrub_url),
    ("runs", "ci_job_url", scrub_url),
    ("runs", "reason", scrub_urls),
    ("results", "reason", scrub_urls),
    ("triage_runs", "reason", scrub_urls),
)
"""(table, column, scrubber): only rows whose text holds "://" are read, so a large store is not copied."""


def _rewrite(table: sa.TableClause, column: str, changed: list[dict[str, Any]]) -> None:
    if changed:
        op.get_bind().execute(
            table.update()
            .where(table.c.id == sa.bindparam("row_id"))
            .values({column: sa.bindparam("value")}),
            changed,
        )


def upgrade() -> None:
    connection = op.get_bind()
    for name, column, scrub in _TEXT_COLUMNS:
        table = sa.table(name, sa.column("id", sa.Integer), sa.column(column, sa.Text))
        rows = connection.execute(
            sa.select(table.c.id, table.c[column]).where(table.c[column].contains("://"))
        )
        _rewrite(
            table,
            column,
            [{"row_id": row_id, "value": scrub(text)} for row_id, text in rows if scrub(text) != text],
        )
    triages = sa.table("triages", sa.column("id", sa.Integer), sa.column("plan", sa.JSON))
    _rewrite(
        triages,
        "plan",
        [
            {"row_id": row_id, "value": scrub_document(plan)}
            for row_id, plan in connection.execute(sa.select(triages.c.id, triages.c.plan))
            if scrub_document(plan) != plan
        ],
    )


def downgrade() -> None:
    """Nothing to undo: the credentials are gone on purpose."""
