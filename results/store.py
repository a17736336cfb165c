"""The results database: where it is, bringing its schema up to date, writing ingested runs and deleting
them.

JAXBENCH_DB, a SQLAlchemy URL, says where: by default a SQLite file, $XDG_DATA_HOME/jaxbench/results.sqlite;
a team points it at PostgreSQL (postgresql+psycopg://user:password@host/db). Several jobs may ingest at once
without failing or deadlocking, and a store that cannot be used stops a command with one line naming
JAXBENCH_DB. How writers share the store, and which stores are refused: docs/design.md, "Results store and
dashboard".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_store_errors.py
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import (
    URL,
    Connection,
    Engine,
    create_engine,
    event,
    inspect,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from jaxbench.core.errors import ExternalFailure, InvalidInput, JaxbenchError, file_failure

DB_ENV = "JAXBENCH_DB"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same for every jaxbench process migrating one database.
MIGRATION_LOCK_ID = 0x6A617862
WRITER_LOCK_ID = MIGRATION_LOCK_ID + 1
"""PostgreSQL advisory lock of the store's exclusive writers (`transaction(exclusive=True)`)."""
SQLITE_LOCK_TIMEOUT_S = 120
"""How long a SQLite writer waits for another's write lock (a large ingest holds it for seconds)."""
BACKENDS = ("sqlite", "postgresql")
"""The databases the store's SQL is written for: its upserts use each one's own INSERT ... ON CONFLICT."""
EXPECTED_URL = (
    "a SQLAlchemy URL such as sqlite:////path/to/results.sqlite or postgresql+psycopg://user@host/db"
)


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
    try:
        return make_url(url).render_as_string(hide_password=True)
    # Unparsed (ValueError: a port that is no number), SQLAlchemy cannot find the password: hide whoever is
    # before the '@'.
    except (ArgumentError, ValueError):
        return repr(re.sub(r"(?<=://)[^/]*@", "***@", url))


def describe_store(url: str, environ: Mapping[str, str] | None = None) -> str:
    """How messages name the store at `url`: by the variable that chose it, or as the default."""
    environ = os.environ if environ is None else environ
    if environ.get(DB_ENV) == url:
        return f"{DB_ENV}={display_url(url)}"
    if url == default_url(environ):
        return f"the default store {display_url(url)} ({DB_ENV} is not set)"
    return f"the store {display_url(url)}"


def _parse(url: str) -> URL:
    """`url` parsed, once it names a store this module can open: refused before anything is connected to or
    created (a SQLite file's folders are made on connecting)."""
    try:
        parsed = make_url(url)
    except ArgumentError:  # its message may quote the URL, password and all
        raise InvalidInput(f"{describe_store(url)}: not a database URL; expected {EXPECTED_URL}") from None
    except ValueError:
        raise InvalidInput(
            f"{describe_store(url)}: its port is not a number; expected {EXPECTED_URL}"
        ) from None
    if parsed.get_backend_name() not in BACKENDS:
        raise InvalidInput(
            f"{describe_store(url)}: the store runs on SQLite or PostgreSQL, not "
            f"{parsed.get_backend_name()!r}; expected {EXPECTED_URL}"
        )
    if parsed.get_backend_name() == "sqlite":
        problem = _sqlite_problem(parsed)
        if problem:
            raise InvalidInput(f"{describe_store(url)}: {problem}; expected {EXPECTED_URL}")
    return parsed


def _sqlite_problem(url: URL) -> str | None:
    """What is wrong with a SQLite URL, or None. SQLAlchemy would find some of it only on connecting (a host:
    sqlite://name), some never (its query arguments are ignored with two warnings)."""
    if url.host or url.port or url.username or url.password:
        return f"a SQLite URL names a file after three slashes, not a host ({url.host or url.username!r})"
    if url.query:
        return f"a SQLite store takes no query arguments (got {', '.join(sorted(url.query))})"
    if not url.database or url.database == ":memory:":
        return None
    path = Path(url.database)
    if url.database.endswith(("/", os.sep)) or path.name in ("", ".", "..") or path.is_dir():
        return f"{url.database} is a folder, not the path of a SQLite file"
    return None


def _head_revision() -> str:
    return str(ScriptDirectory(str(MIGRATIONS)).get_current_head())


def store_failure(error: BaseException, url: str | None = None) -> JaxbenchError | None:
    """The one-line failure a SQLAlchemy, DBAPI or Alembic error of the store at `url` (default: JAXBENCH_DB)
    stands for; None for any other exception. A SQLite file is the user's to fix (InvalidInput); a server
    that fails may answer later (ExternalFailure)."""
    url = url or database_url()
    where = describe_store(url)
    if isinstance(error, CommandError):  # Alembic: the store's revision is not among the migrations
        return InvalidInput(
            f"{where}: {error}: written by a newer jaxbench or another program; expected a jaxbench store "
            f"at revision {_head_revision()} or older"
        )
    if isinstance(error, (ModuleNotFoundError, NoSuchModuleError)):
        return InvalidInput(f"{where}: cannot load its driver ({error}); expected {EXPECTED_URL}")
    if isinstance(error, OSError):  # the SQLite file's folder cannot be made
        return InvalidInput(f"{where}: {file_failure(error)}")
    if not isinstance(error, DBAPIError):
        return None
    said = " ".join(str(error.orig).split())  # drivers explain on several lines
    if type(error.orig).__module__.partition(".")[0] != "sqlite3":
        return ExternalFailure(f"{where}: the database server failed: {said}")
    if "database is locked" in said:
        return ExternalFailure(
            f"{where}: {said}: another process held its write lock for over {SQLITE_LOCK_TIMEOUT_S} s"
        )
    return InvalidInput(
        f"{where}: {said}; expected an intact SQLite store (restore a damaged one from a copy), or the path "
        "of a new one"
    )


@contextmanager
def _failures_named(url: str) -> Iterator[None]:
    """Turn the store's failures into one line naming JAXBENCH_DB (store_failure); others pass."""
    try:
        yield
    except Exception as error:
        failure = store_failure(error, url)
        if failure is None:
            raise
        raise failure from error


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


def _tables(url: URL) -> set[str]:
    """The tables of the database at `url`, looked at over a plain connection: not the store's own, which
    switches a SQLite file to WAL, so that a database that turns out not to be a store is left as it was."""
    probe = create_engine(url, poolclass=NullPool)
    try:
        with probe.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        probe.dispose()


def _engine(url: URL) -> Engine:
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    # The driver first (create_engine loads it, and connects to nothing): one that cannot be loaded leaves
    # no folders behind.
    engine = create_engine(url, connect_args={"timeout": SQLITE_LOCK_TIMEOUT_S})
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    _serialise_sqlite_writers(engine)
    return engine


def connect(url: str | None = None, *, migrate: bool = True) -> Engine:
    """An engine for the store at `url` (default: JAXBENCH_DB), its schema brought up to date. InvalidInput
    or ExternalFailure, naming JAXBENCH_DB, when the store cannot be used (store_failure)."""
    url = url or database_url()
    parsed = _parse(url)
    with _failures_named(url):
        engine = _engine(parsed)
        tables = _tables(parsed)
        # Another program's database, or a store that lost its revision: migrating it would write jaxbench's
        # tables into it.
        if tables and "alembic_version" not in tables:
            named = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
            raise InvalidInput(
                f"{describe_store(url)}: has tables ({named}) but no alembic_version table, so it is not "
                "a jaxbench store; expected a jaxbench store, an empty database, or the path of a new SQLite "
                "file"
            )
        if migrate:
            upgrade(engine)
    return engine


def _hold_until_commit(connection: Connection, lock_id: int) -> None:
    """PostgreSQL's advisory lock `lock_id` for the rest of this transaction: one holder at a time."""
    connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock_id})


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every pending Alembic migration up to `revision`, one process at a time."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            _hold_until_commit(connection, MIGRATION_LOCK_ID)
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


@contextmanager
def transaction(engine: Engine, *, exclusive: bool = False) -> Iterator[Session]:
    """A session whose work is committed together, or not at all. `exclusive`: one such writer at a time
    (SQLite takes its write lock up front anyway). An ingest writes a whole batch in one transaction; two
    on PostgreSQL creating the same series, gaps or run ids in another order would deadlock (one aborted),
    or both store one run id, which each looked up before the other committed."""
    with engine.begin() as connection, Session(bind=connection) as session:
        if exclusive and connection.dialect.name == "postgresql":
            _hold_until_commit(connection, WRITER_LOCK_ID)
        yield session
        session.flush()
