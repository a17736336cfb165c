"""The results database: where it is, bringing its schema up to date, and writing ingested runs.

One variable says where the store is: JAXBENCH_DB, a SQLAlchemy URL. Default: a SQLite file,
$XDG_DATA_HOME/jaxbench/results.sqlite (~/.local/share/jaxbench/results.sqlite). A team points it at
PostgreSQL: JAXBENCH_DB=postgresql+psycopg://user:password@host/db.

Several jobs may ingest at once into one SQLite file or one PostgreSQL database: SQLite writers take the
write lock when their transaction begins (BEGIN IMMEDIATE) and wait for it; PostgreSQL writers insert
shared rows (series) in one global order with ON CONFLICT DO NOTHING, so they neither fail nor deadlock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, delete, event, func, insert, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from results import schema
from results.identity import SeriesIdentity
from results.records import ParsedRun

DB_ENV = "JAXBENCH_DB"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same for every jaxbench process migrating one database.
MIGRATION_LOCK_ID = 0x6A617862


def default_url(environ: Mapping[str, str]) -> str:
    data_home = environ.get("XDG_DATA_HOME") or str(
        Path(environ.get("HOME", "~")).expanduser() / ".local/share"
    )
    return f"sqlite:///{Path(data_home) / 'jaxbench' / 'results.sqlite'}"


def database_url(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get(DB_ENV) or default_url(environ)


def display_url(url: str) -> str:
    """The URL without its password, for messages and reports."""
    return make_url(url).render_as_string(hide_password=True)


def _serialise_sqlite_writers(engine: Engine) -> None:
    # pysqlite's own transaction handling starts transactions lazily and as DEFERRED, so two writers can
    # both read, then deadlock upgrading to the write lock. Take the write lock up front instead
    # (SQLAlchemy docs, "Serializable isolation / Savepoints / Transactional DDL" for pysqlite).
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.execute("PRAGMA foreign_keys = ON")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL still survives any crash of the application; only a power loss can cost the
        # last commits. FULL would fsync on every ingested file (SQLite docs, "PRAGMA synchronous").
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def connect(url: str | None = None, *, migrate: bool = True) -> Engine:
    """An engine for the store at `url` (default: JAXBENCH_DB), its schema brought up to date."""
    url = url or database_url()
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 120})
        _serialise_sqlite_writers(engine)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    if migrate:
        upgrade(engine)
    return engine


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every pending Alembic migration up to `revision`, one process at a time."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """A session whose work is committed together, or not at all."""
    with engine.begin() as connection, Session(bind=connection) as session:
        yield session
        session.flush()


def _insert(connection: Connection) -> Any:
    return postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert


def _series_ids(session: Session, identities: dict[str, SeriesIdentity]) -> dict[str, int]:
    """Series id per identity hash, creating the series that are new."""
    connection = session.connection()
    rows = []
    for identity_hash in sorted(identities):  # one global order: concurrent writers cannot deadlock
        identity = identities[identity_hash]
        row = identity.canonical()
        # Every row names its backend: the canonical form leaves out the native one.
        row["backend"] = identity.backend
        rows.append({"identity_hash": identity_hash, **row.pop("hardware"), **row})
    # executemany with bound parameters: the statement is compiled once per process, not once per file.
    statement = _insert(connection)(schema.Series).on_conflict_do_nothing(index_elements=["identity_hash"])
    connection.execute(statement, rows)
    found = session.execute(
        select(schema.Series.identity_hash, schema.Series.id).where(
            schema.Series.identity_hash.in_(identities)
        )
    )
    return {identity_hash: series_id for identity_hash, series_id in found}


def _record_gaps(session: Session, series_ids: list[int], night: dt.date) -> None:
    """Nights without a run between a series' previous night and this one become gaps; this night is not."""
    connection = session.connection()
    previous = session.execute(
        select(schema.Result.series_id, func.max(schema.Run.night))
        .join(schema.Run, schema.Run.id == schema.Result.run_id)
        .where(schema.Result.series_id.in_(series_ids), schema.Run.night < night)
        .group_by(schema.Result.series_id)
    ).all()
    gaps = [
        {"series_id": series_id, "night": last + dt.timedelta(days=d)}
        for series_id, last in sorted(previous)
        for d in range(1, (night - last).days)
    ]
    if gaps:
        statement = _insert(connection)(schema.Gap).on_conflict_do_nothing(
            index_elements=["series_id", "night"]
        )
        connection.execute(statement, gaps)
    session.execute(delete(schema.Gap).where(schema.Gap.series_id.in_(series_ids), schema.Gap.night == night))


def write_run(session: Session, run: ParsedRun) -> int | None:
    """Store one parsed run; returns its id, or None if this file was ingested before."""
    connection = session.connection()
    # Every field of the run but its components and results, which have tables of their own.
    fields = {
        f.name: getattr(run, f.name)
        for f in dataclasses.fields(run)
        if f.name not in ("components", "results")
    }
    fields["ingested_at"] = dt.datetime.now(dt.UTC)
    statement = (
        _insert(connection)(schema.Run)
        .values(**fields)
        .on_conflict_do_nothing(index_elements=["source_hash"])
    )
    run_id = connection.execute(statement.returning(schema.Run.id)).scalar()
    if run_id is None:
        return None
    hashes = [r.series.hash() for r in run.results]
    series_ids = _series_ids(session, {h: r.series for h, r in zip(hashes, run.results, strict=True)})
    # Core executemany rather than ORM objects: ingest is the store's hot path (a backfill is 100k results).
    if run.components:
        rows = [dataclasses.asdict(c) | {"run_id": run_id} for c in run.components]
        connection.execute(insert(schema.Component), rows)
    results = [
        {
            "run_id": run_id,
            "series_id": series_ids[identity_hash],
            "value": r.value,
            "samples": r.samples,
            "spread": r.spread,
            "status": r.status,
            "reason": r.reason,
        }
        for identity_hash, r in zip(hashes, run.results, strict=True)
    ]
    connection.execute(insert(schema.Result), results)
    _record_gaps(session, sorted(set(series_ids.values())), run.night)
    return int(run_id)
