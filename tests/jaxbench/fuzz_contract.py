"""The contract every fuzzed `jaxbench` command keeps (docs/design.md, "Fuzzing the inputs"), and how the fuzz
tests check it: the command runs in this process as it would in its own (its stderr and the warnings it
would show), in a sandbox whose files and store are compared before and after; whatever the input, the exit
code is a documented one, no traceback, the store unchanged when refused, nothing written outside what the
command may write, one-line refusals.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import io
import os
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.main import main

DOCUMENTED_CODES = frozenset(int(code) for code in ExitCode) - {int(ExitCode.INTERNAL)}
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
"""A SQLite database and the files SQLite keeps beside it; even a reader changes their bytes, so the store is
compared by its rows."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    stderr: str
    parsed: bool
    """False: argparse refused the command line (it prints its usage, then exits 2)."""


QUIET_BY_DEFAULT = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)
"""The warnings a fresh interpreter does not show (outside __main__): every other one reaches stderr."""


@contextlib.contextmanager
def as_a_process() -> Iterator[io.StringIO]:
    """Inside, what a `jaxbench` process would print on stderr, the warnings it would show among it (pytest
    would collect them instead), goes to the StringIO yielded; stdout is kept out of the test's log."""
    stderr = io.StringIO()
    with (
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(stderr),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.resetwarnings()
        for category in QUIET_BY_DEFAULT:
            warnings.simplefilter("ignore", category)
        try:
            yield stderr
        finally:
            for w in caught:
                stderr.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))


def exit_of(exit_: SystemExit) -> int:
    """The exit code a SystemExit stands for (argparse's: 2 with a message, 0 after --help)."""
    return exit_.code if isinstance(exit_.code, int) else 2


def invoke(argv: Sequence[str]) -> Outcome:
    """`jaxbench ARGV` in this process: its exit code and what it printed on stderr."""
    with as_a_process() as stderr:
        try:
            code, parsed = main(list(argv)), True
        except SystemExit as exit_:
            code, parsed = exit_of(exit_), False
    return Outcome(code, stderr.getvalue(), parsed)


def sqlite_files(database: Path) -> set[Path]:
    return {database.with_name(database.name + suffix) for suffix in SQLITE_SUFFIXES}


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """The commands' working folder, three folders below `root` so that '../../..' stays inside it, and a
    SQLite store holding one run; everything under `root` is compared before and after each command."""

    root: Path

    @property
    def store(self) -> Path:
        return self.root / "store.sqlite"

    @property
    def cwd(self) -> Path:
        return self.root / "c1" / "c2" / "cwd"

    @property
    def out(self) -> Path:
        return self.cwd / "out"

    def write(self, name: str, data: bytes) -> str:
        (self.cwd / name).write_bytes(data)
        return str(self.cwd / name)

    def files(self) -> dict[str, str]:
        """Relative path -> sha256 of every file under `root` but the store's, "folder" for a folder,
        "special" for a named pipe and the target for a symbolic link."""
        found = {}
        skip = sqlite_files(self.store)
        for folder, names, files in os.walk(self.root):
            for name in names + files:
                path = Path(folder, name)
                if path in skip:  # the store's files: SQLite may remove its -wal file at any moment
                    continue
                if path.is_symlink():
                    found[str(path.relative_to(self.root))] = f"-> {os.readlink(path)}"
                elif path.is_dir():
                    found[str(path.relative_to(self.root))] = "folder"
                elif not path.is_file():  # a named pipe: opening it would wait for a writer
                    found[str(path.relative_to(self.root))] = "special"
                else:
                    found[str(path.relative_to(self.root))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found

    def rows(self) -> dict[str, list[str]]:
        """Every row of every table of the store, read over a plain read-only connection."""
        with contextlib.closing(sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)) as connection:
            names = "SELECT name FROM sqlite_master WHERE type='table'"
            tables = [name for (name,) in connection.execute(names)]
            return {t: sorted(map(repr, connection.execute(f'SELECT * FROM "{t}"'))) for t in tables}


@dataclasses.dataclass(frozen=True)
class Command:
    """A `jaxbench` command line, and what it may change."""

    argv: list[str]
    out: Path | None = None
    """The command's --out: it may write there."""
    writes: frozenset[Path] = frozenset()
    """Files it may write when it succeeds, besides the store: the database a store URL names."""
    environ: dict[str, str] = dataclasses.field(default_factory=dict)
    never_succeeds: bool = False
    """It must be refused whatever the input: the guard that nothing trains."""

    def may_change(self, relative: str, box: Sandbox, succeeded: bool) -> bool:
        path = box.root / relative
        writes = self.writes if succeeded else frozenset()
        # A folder above a file it may write may be made for it.
        return (self.out is not None and path.is_relative_to(self.out)) or any(
            w.is_relative_to(path) for w in writes
        )


def check(box: Sandbox, command: Command) -> None:
    """Run `command` in `box` and check the contract (docs/design.md, "Fuzzing the inputs")."""
    files, rows = box.files(), box.rows()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in command.environ.items():
            patch.setenv(name, value)
        outcome = invoke(command.argv)
    shown = " ".join(arg if len(arg) < 200 else f"{arg[:200]}..." for arg in command.argv)
    shown = f"{' '.join(f'{k}={v!r}' for k, v in command.environ.items())} jaxbench {shown}\n{outcome.stderr}"
    assert outcome.code in DOCUMENTED_CODES, f"exit {outcome.code}: {shown}"
    assert "Traceback" not in outcome.stderr, shown
    succeeded = outcome.code == ExitCode.OK
    assert not (succeeded and command.never_succeeds), f"succeeded, but must be refused: {shown}"
    after = box.files()
    if command.writes and after != files:
        # The store it opened closes its SQLite connections when collected, and closing the last one folds
        # the -wal file into the database: collected now, that shows as this command's change, not the next's.
        gc.collect()
        after = box.files()
    changed = {name for name in files.keys() | after.keys() if files.get(name) != after.get(name)}
    unexpected = sorted(name for name in changed if not command.may_change(name, box, succeeded))
    assert not unexpected, f"changed {unexpected}: {shown}"
    if succeeded:
        return
    assert box.rows() == rows, f"a refused input changed the store: {shown}"
    if outcome.parsed:
        lines = outcome.stderr.strip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0][7:].strip(), (
            f"not one line: {shown}"
        )


def option(name: str, value: object | None) -> list[str]:
    """`--name=value`, or nothing for None (the `=` form, so that a value like '-h' stays a value)."""
    return [] if value is None else [f"--{name}={value}"]
