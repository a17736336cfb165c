"""The self-bench's deterministic counts, which a stopwatch's noise does not blur: SQL statements an engine
executes, rows SQLite hands back to Python, and the modules a fresh `jaxbench` process imports for a command.
The same data gives the same count on any machine, so a change in one is a change of the code.

    .venv/bin/python -m pytest benchmarks/self -k "ingest or detect or modules"
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """Every statement the engine executes inside the block (an executemany counts once)."""
    executed: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        executed.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield executed
    finally:
        event.remove(engine, "before_cursor_execute", count)


@contextmanager
def rows_read(engine: Engine) -> Iterator[list[int]]:
    """How many rows a SQLite store hands back to Python inside the block (one number in the list): each
    passes the connection's row_factory, here one that counts and returns the row unchanged. The engine's
    pooled connections are closed before and after, so that every connection of the block counts."""
    count = [0]

    def counted(cursor: Any, row: tuple[Any, ...]) -> tuple[Any, ...]:
        count[0] += 1
        return row

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.row_factory = counted

    engine.dispose()
    event.listen(engine, "connect", on_connect)
    try:
        yield count
    finally:
        event.remove(engine, "connect", on_connect)
        engine.dispose()


PROBE = """
import contextlib, io, sys
from jaxbench.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(ARGV)
    except SystemExit:
        pass
print(len(sys.modules))
"""


def modules_imported(argv: list[str]) -> int:
    """The modules (the standard library's included) in a fresh process after `jaxbench ARGV` ran."""
    probe = PROBE.replace("ARGV", repr(argv))
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(done.stdout.strip().splitlines()[-1])
