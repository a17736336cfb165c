"""A store that cannot be used stops a command with one line naming JAXBENCH_DB and what was expected, and is
left as it was: malformed and unsupported URLs, a server that does not answer, a file that is not a
database or is damaged, someone else's database, a revision this jaxbench does not know."""

from __future__ import annotations

import datetime as dt
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import OperationalError

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.results import commands, store, synthetic


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not a url", "JAXBENCH_DB='not a url': not a database URL; expected a SQLAlchemy URL such as"),
        ("mysql://me:secret@db.example/results", "JAXBENCH_DB=mysql://me:***@db.example/results: the store "),
        ("foo://x", "JAXBENCH_DB=foo://x: the store runs on SQLite or PostgreSQL, not 'foo'; expected "),
        ("postgresql+nodriver://me@db.example/results", "cannot load its driver"),
    ],
    ids=["not-a-url", "mysql", "unknown-dialect", "unknown-driver"],
)
def test_a_url_the_store_cannot_use_is_invalid_input(
    url: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(store.DB_ENV, url)
    with pytest.raises(InvalidInput) as refused:
        store.connect()
    assert expected in str(refused.value) and "secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "sqlite://store.sqlite",
            "a SQLite URL names a file after three slashes, not a host ('store.sqlite')",
        ),
        ("postgresql+psycopg://me:secret@127.0.0.1:port/db", "its port is not a number"),
        ("sqlite:///{tmp}/s.sqlite?mode=ro", "a SQLite store takes no query arguments (got mode)"),
        ("sqlite:///{tmp}/new/sub/..", "new/sub/.. is a folder, not the path of a SQLite file"),
        ("sqlite:///{tmp}", "is a folder, not the path of a SQLite file"),
        ("sqlite+nodriver:///{tmp}/new/s.sqlite", "cannot load its driver"),
    ],
    ids=["host", "port", "query", "dot-dot", "folder", "no-driver"],
)
def test_a_sqlite_url_is_refused_before_anything_is_made(
    url: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(store.DB_ENV, url.format(tmp=tmp_path))
    with pytest.raises(InvalidInput) as refused:
        store.connect()
    assert expected in str(refused.value) and "secret" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_does_not_answer_is_an_external_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"postgresql+psycopg://postgres:secret@127.0.0.1:{unused_port()}/postgres"
    monkeypatch.setenv(store.DB_ENV, url)
    with pytest.raises(ExternalFailure) as failed:
        store.connect()
    message = str(failed.value)
    assert message.startswith(f"JAXBENCH_DB={url.replace('secret', '***')}: the database server failed")
    assert "Connection refused" in message and "\n" not in message and "secret" not in message
    assert failed.value.exit_code == ExitCode.EXTERNAL


def test_a_file_that_is_not_a_database_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "results.sqlite"
    path.write_bytes(b"a thesis, not a database\n" * 200)
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{path}")
    with pytest.raises(InvalidInput, match=rf"^JAXBENCH_DB=sqlite:///{path}: file is not a database; "):
        store.connect()
    assert path.read_bytes() == b"a thesis, not a database\n" * 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.sqlite"]


def someone_elses(url: str) -> None:
    with create_engine(url).begin() as connection:
        connection.execute(text("CREATE TABLE thesis (chapter TEXT)"))


def without_its_revision(url: str) -> None:
    store.connect(url).dispose()
    with create_engine(url).begin() as connection:
        connection.execute(text("DROP TABLE alembic_version"))


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


@pytest.mark.parametrize("make", [someone_elses, without_its_revision])
def test_a_database_without_a_revision_is_never_migrated(
    make: Callable[[str], None], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(store.DB_ENV, store_url)
    make(store_url)
    before = tables(store_url)
    with pytest.raises(InvalidInput, match="but no alembic_version table, so it is not a jaxbench store"):
        store.connect()
    assert tables(store_url) == before


def test_a_revision_this_jaxbench_does_not_know_is_refused(store_url: str) -> None:
    engine = store.connect(store_url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    engine.dispose()
    with pytest.raises(InvalidInput, match=r"Can't locate revision identified by 'ffff'.* or older$"):
        store.connect(store_url)


def damage_the_results(path: Path) -> None:
    """Overwrite the first page of the results table, as a disk or a copy cut short would."""
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
        [(root_page,)] = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = 'results'")
        [(page_size,)] = connection.execute("PRAGMA page_size")
    with path.open("r+b") as handle:
        handle.seek((root_page - 1) * page_size)
        handle.write(b"\xde\xad" * (page_size // 2))


def test_a_damaged_store_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "results.sqlite"
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{path}")
    night = dt.date(2026, 11, 1)
    runs = [synthetic.run_result(night + dt.timedelta(days=i), 0.5) for i in range(3)]
    engine = store.connect()
    commands.ingest(engine, [synthetic.write(tmp_path / "runs", run) for run in runs])
    engine.dispose()
    damage_the_results(path)
    assert cli.main(["detect"]) == ExitCode.INVALID_INPUT
    error = capsys.readouterr().err
    assert error.startswith(f"error: JAXBENCH_DB=sqlite:///{path}: database disk image is malformed; ")
    assert "Traceback" not in error and len(error.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "said", "failure"),
    [
        ("sqlite:///s.sqlite", "database is locked", ExternalFailure),
        ("sqlite:///s.sqlite", "database disk image is malformed", InvalidInput),
        ("postgresql+psycopg://me@db.example/results", "server closed the connection", ExternalFailure),
    ],
    ids=["sqlite-locked", "sqlite-damaged", "postgresql"],
)
def test_a_file_is_the_users_to_fix_and_a_server_may_answer_later(
    url: str, said: str, failure: type[Exception]
) -> None:
    driver = sqlite3.OperationalError if url.startswith("sqlite") else psycopg.OperationalError
    described = store.store_failure(OperationalError("SELECT 1", {}, driver(said)), url)
    assert isinstance(described, failure) and said in str(described)
    assert store.store_failure(ValueError("a bug"), url) is None


def test_messages_say_which_variable_chose_the_store(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path)}
    default = store.default_url(environ)
    assert store.describe_store(default, environ) == f"the default store {default} (JAXBENCH_DB is not set)"
    chosen = "postgresql+psycopg://me:secret@db.example/results"
    described = store.describe_store(chosen, {**environ, store.DB_ENV: chosen})
    assert described == "JAXBENCH_DB=postgresql+psycopg://me:***@db.example/results"
