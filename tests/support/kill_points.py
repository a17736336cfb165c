"""Kill points: where the fault suite (tests/results/test_faults.py) SIGKILLs a `jaxbench` command, named by
what the command is doing rather than by a time, so that each kill lands inside the work it aims at and the
same seed kills at the same place on a fast or a loaded machine.

A kill point is the n-th statement, commit, write, rename or rmtree of the process, armed through
JAXBENCH_FAULT_KILL by tests/support/fault_hook/sitecustomize.py as Python starts. Imported at the start of
the killed command, so standard library only (SQLAlchemy when a point needs it). The points: docs/design.md,
"Killing the commands".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/results/test_faults.py
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

KILL_ENV = "JAXBENCH_FAULT_KILL"


class Event(enum.StrEnum):
    STATEMENT = "statement"
    COMMIT = "commit"
    WRITE = "write"
    RENAME = "rename"
    RMTREE = "rmtree"


SQL_EVENTS = frozenset({Event.STATEMENT, Event.COMMIT})
AUDIT_EVENTS = {"open": Event.WRITE, "os.rename": Event.RENAME, "shutil.rmtree": Event.RMTREE}
"""Python's audit events (sys.addaudithook) that stand for the file events."""


@dataclasses.dataclass(frozen=True)
class KillPoint:
    event: Event
    nth: int
    """1 for the first occurrence."""
    under: str | None = None
    """For `write`: only files under this folder count (not Python's bytecode cache, nor a log)."""

    def __str__(self) -> str:
        return f"{self.event} #{self.nth}"

    def to_env(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_env(cls, text: str) -> KillPoint:
        fields = json.loads(text)
        return cls(Event(fields["event"]), int(fields["nth"]), fields.get("under"))


def listen_to_sql(occurred: Callable[[Event], None]) -> Callable[[], None]:
    """Report every statement run and every commit of every engine, those created later included; returns
    the function that stops listening."""
    from sqlalchemy import Engine, event

    def statement(*_: Any) -> None:
        occurred(Event.STATEMENT)

    def commit(_: Any) -> None:
        occurred(Event.COMMIT)

    event.listen(Engine, "after_cursor_execute", statement)
    event.listen(Engine, "commit", commit)

    def stop() -> None:
        event.remove(Engine, "after_cursor_execute", statement)
        event.remove(Engine, "commit", commit)

    return stop


def _opened_for_writing(args: tuple[Any, ...]) -> str | None:
    """The path an `open` audit event opens for writing (builtins.open gives a mode, os.open flags), else
    None."""
    path, mode, flags = args
    if isinstance(path, int):  # a file descriptor: opened before, under its own path
        return None
    writes = isinstance(mode, str) and any(c in mode for c in "wax+")
    writes = writes or bool(isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
    return os.fsdecode(path) if writes else None


def arm(point: KillPoint) -> None:
    """SIGKILL this process at `point`: no handler, no cleanup, no flush, as from `kill -9`."""
    seen = 0

    def occurred(event: Event) -> None:
        nonlocal seen
        if event is point.event:
            seen += 1
            if seen == point.nth:
                os.kill(os.getpid(), signal.SIGKILL)

    if point.event in SQL_EVENTS:
        listen_to_sql(occurred)
        return

    def audit(name: str, args: tuple[Any, ...]) -> None:
        event = AUDIT_EVENTS.get(name)
        if event is not point.event:
            return
        if event is Event.WRITE:
            path = _opened_for_writing(args)
            if path is None or not path.startswith(point.under or ""):
                return
        occurred(event)

    sys.addaudithook(audit)  # for the life of the process: the command it runs in is killed or ends


def arm_from_environment() -> None:
    text = os.environ.get(KILL_ENV)
    if text:
        arm(KillPoint.from_env(text))


@dataclasses.dataclass
class SqlCounts:
    statements: int = 0
    commits_at: list[int] = dataclasses.field(default_factory=list)
    """The number of statements run when each transaction committed."""

    def record(self, event: Event) -> None:
        if event is Event.STATEMENT:
            self.statements += 1
        else:
            self.commits_at.append(self.statements)

    def transaction(self, nth: int) -> range:
        """The statements (numbered from 1, as KillPoint counts them) of the nth committed transaction."""
        start = self.commits_at[nth - 2] + 1 if nth > 1 else 1
        return range(start, self.commits_at[nth - 1] + 1)


@contextmanager
def counting_sql() -> Iterator[SqlCounts]:
    """Counts the statements and commits of every engine in this process while it lasts."""
    counts = SqlCounts()
    stop = listen_to_sql(counts.record)
    try:
        yield counts
    finally:
        stop()
