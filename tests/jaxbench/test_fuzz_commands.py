"""Fuzz every subcommand of `jaxbench` from its own parser: each leaf subcommand (`nightly land`, `pr-check`,
`run`, …) gets command lines drawn from its argparse arguments (tests/jaxbench/fuzz_command_lines.py), run
through `main()` in this process.

The work that costs stands in for the end of validation: a child process (git, docker, pytest, sbatch, a
`jaxbench run`), a connection, training or the demo's history raises `ExpensiveStep` instead of starting. The
contract of the input fuzzing (tests/jaxbench/fuzz_contract.py) holds for every command line, plus one of its
own: a command refuses an output folder it cannot write before it starts that work (a pr-check refused its
--out only after every run). A command that blocks on a path it reads (a FIFO) is stopped after HANG_S s.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q -p no:cacheprovider tests/jaxbench/test_fuzz_commands.py
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import traceback
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, seed, settings

from jaxbench.core.errors import ExitCode
from jaxbench.harness.run import runner
from jaxbench.main import main
from jaxbench.results import demo, synthetic
from tests.conftest import REPO
from tests.jaxbench.fuzz_command_lines import (
    FIFO,
    FOLDER,
    LEAVES,
    LINK,
    OUTPUT_DESTS,
    UNDER_A_FILE,
    VALID_BENCHMARK,
    VALID_RESULT,
    command_lines,
)
from tests.jaxbench.fuzz_contract import DOCUMENTED_CODES, Sandbox, as_a_process, exit_of
from tests.support import fuzz_inputs as inputs

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

HANG_S = 20
"""A command that has not returned after this long hangs (on a FIFO it opened, a lock it waits for)."""
EXAMPLES = 60
"""Command lines drawn per subcommand."""


class ExpensiveStep(BaseException):
    """The command reached work that costs: it was not refused before it."""


class Hung(BaseException):
    """The command did not return within HANG_S seconds."""


def _stop(what: str) -> Any:
    def stop(*args: Any, **kwargs: Any) -> Any:
        raise ExpensiveStep(what)

    return stop


@contextlib.contextmanager
def expensive_steps_stopped(patch: pytest.MonkeyPatch) -> Iterator[None]:
    """Child processes, connections and training raise ExpensiveStep; a command is stopped after HANG_S."""
    patch.setattr(subprocess.Popen, "_execute_child", _stop("a child process"))
    patch.setattr(os, "fork", _stop("a fork"))
    patch.setattr(socket.socket, "connect", _stop("a connection"))
    patch.setattr(socket.socket, "connect_ex", _stop("a connection"))
    patch.setattr(runner, "execute", _stop("training"))
    patch.setattr(demo, "documents", _stop("the demo's history"))

    def hung(signum: int, frame: object) -> None:
        raise Hung

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int | None
    """None: it reached an expensive step."""
    stderr: str
    parsed: bool
    reached: str | None = None


def invoke(argv: list[str]) -> Outcome:
    """`jaxbench ARGV` in this process with the expensive steps stopped (the invoke of
    tests/jaxbench/fuzz_contract.py)."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    with pytest.MonkeyPatch.context() as patch, as_a_process() as stderr:
        try:
            with expensive_steps_stopped(patch):
                code, parsed, reached = main(argv), True, None
        except SystemExit as exit_:
            code, parsed, reached = exit_of(exit_), False, None
        except ExpensiveStep as step:
            code, parsed, reached = None, True, str(step)
        except Hung:
            code, parsed, reached = None, True, None
            print(f"hung for {HANG_S} s in:\n{traceback.format_exc(limit=-8)}", file=stderr)
        finally:
            for number, handler in handlers.items():  # a command may take SIGINT/SIGTERM for its children
                signal.signal(number, handler)
    return Outcome(code, stderr.getvalue(), parsed, reached)


def given_outputs(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Where a command line lets the command write: its output arguments (`--out=VALUE` form), else their
    defaults (`runs`)."""
    given = {}
    for token in argv:
        name, equals, value = token.partition("=")
        if equals and name.startswith("--") and name[2:].replace("-", "_") in OUTPUT_DESTS:
            given[name[2:].replace("-", "_")] = value
    defaults = {a.dest: str(a.default) for a in parser._actions if a.dest in OUTPUT_DESTS and a.default}
    return list((defaults | given).values())


def checkout_state() -> dict[str, object]:
    """What a command could destroy in the checkout that runs the tests: its virtualenvs (each folder's
    inode: replaced, it is another) and the pin manifest (its last change). Tests in other pytest-xdist
    workers write elsewhere in the checkout, so no more is compared."""
    state: dict[str, object] = {
        entry.name: entry.inode() for entry in os.scandir(REPO) if entry.name.startswith(".venv")
    }
    return state | {"manifest": (REPO / "containers" / "manifest.yaml").stat().st_mtime_ns}


def check(box: Sandbox, argv: list[str], parser: argparse.ArgumentParser) -> None:
    files, rows, checkout = box.files(), box.rows(), checkout_state()
    outcome = invoke(argv)
    assert checkout_state() == checkout, f"changed the checkout {REPO}: jaxbench {' '.join(argv)}"
    shown = f"jaxbench {' '.join(a if len(a) < 200 else a[:200] + '...' for a in argv)}\n{outcome.stderr}"
    assert not outcome.stderr.startswith("hung"), shown
    assert "Traceback" not in outcome.stderr, shown
    outputs = given_outputs(argv, parser)
    if outcome.reached is not None:
        assert UNDER_A_FILE not in outputs, f"started {outcome.reached} before refusing its output: {shown}"
    else:
        assert outcome.code in DOCUMENTED_CODES, f"exit {outcome.code}: {shown}"
    changed = {name for name in files.keys() | box.files().keys() if files.get(name) != box.files().get(name)}
    allowed = [(box.cwd / value).resolve() for value in outputs if value]
    # Inside an output, or a folder above one, made for it.
    unexpected = sorted(
        name
        for name in changed
        if not any(
            (box.root / name).resolve().is_relative_to(a) or a.is_relative_to((box.root / name).resolve())
            for a in allowed
        )
    )
    assert outcome.code == ExitCode.OK or not unexpected, f"changed {unexpected}: {shown}"
    if outcome.code not in (None, ExitCode.OK):
        assert box.rows() == rows, f"a refused command changed the store: {shown}"
        if outcome.parsed and outcome.code != ExitCode.INTERRUPTED:
            lines = outcome.stderr.strip("\n").split("\n")
            assert len(lines) == 1 and lines[0].startswith("error: "), f"not one line: {shown}"


@pytest.fixture
def commands_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    box = Sandbox(tmp_path)
    box.cwd.mkdir(parents=True)
    monkeypatch.chdir(box.cwd)
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{box.store}")
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    seeded = synthetic.write(box.root / "seed", synthetic.run_result(inputs.NIGHT, 0.25))
    assert invoke(["ingest", str(seeded)]).code == ExitCode.OK
    synthetic.write(box.cwd, synthetic.run_result(inputs.NIGHT, 0.3), VALID_RESULT)
    (box.cwd / VALID_BENCHMARK).write_text(json.dumps({"benchmarks": [], "machine_info": {}}))
    (box.cwd / FOLDER).mkdir()
    os.mkfifo(box.cwd / FIFO)
    (box.cwd / LINK).symlink_to(box.cwd / FOLDER)
    return box


@pytest.mark.slow
@pytest.mark.parametrize("words", [pytest.param(w, id=" ".join(w)) for w in LEAVES])
def test_every_subcommand_keeps_the_contract(words: tuple[str, ...], commands_sandbox: Sandbox) -> None:
    @seed(zlib.crc32(" ".join(words).encode()))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=(Phase.explicit, Phase.generate),
        report_multiple_bugs=False,
    )
    @given(argv=command_lines(words, LEAVES[words]))
    def one(argv: list[str]) -> None:
        check(commands_sandbox, argv, LEAVES[words])

    one()


# --- what this fuzzing found, each on its smallest command line ---------------------------------------------

FOUND_BUGS = {
    "venv --dir of a link: rmtree's OSError, exit 70 (and a folder of the user's was deleted)": [
        "venv",
        "--flavor=maxtext",
        f"--dir={LINK}",
    ],
    "runs list --limit beyond 64 bits: SQLite's OverflowError, exit 70": [
        "runs",
        "list",
        "--limit=99999999999999999999999",
    ],
    "a manifest that is a named pipe nothing writes to: read_text waited forever": [
        "manifest",
        "bump",
        f"--manifest={FIFO}",
    ],
    "overlay --manifest of a named pipe: the same wait": [
        "overlay",
        f"--manifest={FIFO}",
        "--components=optax",
        f"--out={FOLDER}",
    ],
    "triage --github-dir made issues/ and pulls/ before it refused the incident": [
        "triage",
        f"--github-dir={FOLDER}",
        "--",
        "-1",
    ],
    "manifest bump asked git for every remote before it refused its --out": [
        "manifest",
        "bump",
        f"--out={UNDER_A_FILE}",
    ],
    "build asked git and docker before it refused its --records": ["build", f"--records={UNDER_A_FILE}"],
}


@pytest.mark.parametrize("argv", [pytest.param(argv, id=what) for what, argv in FOUND_BUGS.items()])
def test_found_bug_stays_fixed(argv: list[str], commands_sandbox: Sandbox) -> None:
    words = tuple(argv[:2]) if tuple(argv[:2]) in LEAVES else (argv[0],)
    check(commands_sandbox, argv, LEAVES[words])
