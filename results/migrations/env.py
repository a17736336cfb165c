"""Alembic environment: migrations run on the connection that results.store.upgrade hands over (inside its
transaction and, on PostgreSQL, under its advisory lock), or on JAXBENCH_DB when run by the alembic CLI.

    alembic -c results/migrations/alembic.ini revision --autogenerate -m "describe the change"
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from jaxbench.results import schema
from jaxbench.results.store import database_url

config = context.config
target_metadata = schema.Base.metadata


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        context.run_migrations()
        return
    engine = create_engine(database_url())
    with engine.begin() as own_connection:
        context.configure(connection=own_connection, target_metadata=target_metadata, render_as_batch=True)
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=database_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations()
