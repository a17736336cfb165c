"""Fuzz every subcommand of `jaxbench` from its own parser: each leaf subcommand (`nightly land`,
`pr-check`, `run`, …) gets command lines drawn from its argparse arguments, values from pools of valid,
plausible and hostile text (tests/support/fuzz_inputs.py), run through `main()` in this process.

The work that costs stands in for the end of validation: a child process (git, docker, pytest, sbatch, a
`jaxbench run`), a network connection, or training raises `ExpensiveStep` instead of starting. The contract of
tests/jaxbench/test_fuzz.py holds for every command line, plus one of its own: a command refuses an output
folder it cannot write before it starts that work (a pr-check refused its --out only after every run). A
command that blocks on a path it reads (a FIFO) is stopped after HANG_S seconds and fails the test.

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
from hypothesis import strategies as st

from core.errors import ExitCode
from harness.run import runner
from jaxbench.main import build_parser, main, subcommands
from results import synthetic
from tests.conftest import REPO
from tests.jaxbench.test_fuzz import DOCUMENTED_CODES, Sandbox, as_a_process, exit_of
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
    tests/jaxbench/test_fuzz.py)."""
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


# --- the value pools ----------------------------------------------------------------------------------------

VALID_RESULT, VALID_BENCHMARK, FOLDER, FIFO, LINK = "result.json", "bench.json", "folder", "pipe.json", "link"
UNDER_A_FILE = f"{VALID_RESULT}/sub"
"""An output path no command can write: a folder below a regular file."""
OUTPUT_DESTS = frozenset({"out", "work", "dir", "badges", "checkout", "github_output", "records"})
"""Arguments that name where a command writes."""

ALWAYS_GIVEN: dict[tuple[str, ...], tuple[str, ...]] = {
    ("venv",): ("dir",),
    ("manifest", "bump"): ("manifest",),
    ("nightly", "land"): ("checkout", "manifest"),
}
"""Options whose default names this checkout (its .venv-<flavor>, containers/manifest.yaml, the repository
itself): always given, from the sandbox's pools, so that no drawn command changes the checkout that runs
the tests (a `venv --flavor=maxtext` once replaced the checkout's own .venv-maxtext)."""

NASTY = inputs.arguments(inputs.choice(inputs.NASTY_STRINGS))
INTEGERS = st.integers(min_value=-3, max_value=2**70).map(str) | inputs.choice(
    ("0", "1", "2", "²", "١", "1e3", "0x10", "+7", " 7", "")
)
FLOATS = inputs.choice(("0.05", "0", "-1", "1e309", "nan", "inf", "-0.0", "0.5", "x"))
PATHS = inputs.choice((VALID_RESULT, VALID_BENCHMARK, FOLDER, FIFO, LINK, "missing/deep/x", "/", ".."))
OUTPUTS = inputs.choice(("out", "out/new", UNDER_A_FILE, FOLDER, LINK, "..", "/proc/x", "\u202eout"))
IDS = inputs.choice(
    ("1", "2", "0", "-1", "99999999999999999999999", "²", "١", "%%%%%%", "______", "abcdef", VALID_RESULT)
)
RECIPES = inputs.choice(("llama2", "gpt3", "vit", "LLAMA2", "llama2\u200b", "llаma2", "recipe.yaml", "nope"))
SIZES = inputs.choice(("tiny", "1b", "7B", "b16", "huge"))
SOURCES = inputs.choice(
    (
        "optax=fd::3#main",
        "optax=ext::sh -c touch% /tmp/x#main",
        "optax=https://oauth2:TOKEN@github.com/google-deepmind/optax#main",
        "optax=https://github.com/google-deepmind/optax#--upload-pack=x",
        "optax=-oProxyCommand=x#main",
        "optax=/no/such/repository#main",
        "nosuch=https://github.com/a/b#main",
        "optax",
    )
)
REVISIONS = inputs.choice(("HEAD", "main", "HEAD~1", "--upload-pack=x", "-x", "a" * 40, "v0.2.8"))
OVERRIDES = inputs.choice(
    (
        "train.steps=3",
        "train.steps=abc",
        "train.seed=12345678901234567890123456",
        "optimizer.learning_rate=.inf",
        "optimizer.learning_rate=.nan",
        "xla_flags=bogus",
        "train.global_bach=4",
        "a: &a [*a]",
        "x=[&a [1], *a, *a]",
    )
)
CLUSTER_VALUES = inputs.choice(("gpu", "a b", "x\ny", 'a"b', "00:10:00", "99999999999999999999", "-1", "1"))
IMAGES = inputs.choice(("ghcr.io/jaxbench/jax:cpu-2026-11-22", "a b", "x\ny", "UPPER/x", "", "@sha256:x"))
DATES = inputs.choice(("2026-11-02", "2026-02-30", "tonight", "9999-12-31"))
REPOS = inputs.choice(("owner/name", "../x", "a/b/c", "owner/name\n"))
URLS = inputs.choice(("https://example.invalid/x", "javascript:alert(1)", "http://user:pw@h/x", "x"))

BY_DEST: dict[str, st.SearchStrategy[str]] = {
    "recipe": RECIPES,
    "recipes": inputs.choice(("llama2:tiny", "vit:b16", "llama2", "recipe.yaml:tiny", ":", "llama2:tiny:x")),
    "trains": inputs.choice(("native", "maxtext", "levanter", "pax", "NATIVE")),
    "size": SIZES,
    "incident": IDS,
    "incidents": IDS,
    "a": IDS | inputs.choice(("base", "hopper", "--xla_gpu_enable_triton_gemm=false")),
    "b": IDS | inputs.choice(("base", "hopper")),
    "source": SOURCES,
    "base": REVISIONS,
    "head": REVISIONS,
    "set": OVERRIDES,
    "image": IMAGES,
    "base_image": IMAGES,
    "partition": CLUSTER_VALUES,
    "account": CLUSTER_VALUES,
    "time": CLUSTER_VALUES,
    "namespace": CLUSTER_VALUES,
    "date": DATES,
    "night": DATES,
    "created": DATES,
    "repo": REPOS,
    "dashboard_url": URLS,
    "ci_job_url": URLS,
    "pip_index_url": URLS,
    "pip_extra_index_url": URLS,
    "remote": URLS | REPOS,
    "cpus": inputs.choice(("0", "1", "0,1", "99", "²", "0-1", "", "a")),
    "threshold": FLOATS,
    "profile": INTEGERS,
    "flavor": inputs.choice(("cpu", "jax", "maxtext", "pax", "t5x", "nope", "../x")),
    "flavors": inputs.choice(("cpu", "jax,maxtext", "", "nope")),
    "note": NASTY,
    "author": NASTY,
}


def values(action: argparse.Action) -> st.SearchStrategy[str]:
    """What one argument is given: the pool for its name, else by its type, with hostile text mixed in."""
    if action.choices and not isinstance(action.choices, dict):
        # Mostly a valid choice: argparse refuses any other itself.
        choices = inputs.choice([str(c) for c in action.choices])
        return st.one_of(choices, choices, choices, NASTY)
    if action.dest in BY_DEST:
        pool: st.SearchStrategy[str] = BY_DEST[action.dest]
    elif action.dest in OUTPUT_DESTS:
        pool = OUTPUTS
    elif action.type is Path or action.dest in ("files", "csv", "manifest", "plan", "stages", "result"):
        pool = PATHS
    elif action.type is float:
        pool = FLOATS
    elif action.type is not None and action.type is not str:
        pool = INTEGERS
    else:
        pool = inputs.choice(("x", "1", "llama2", VALID_RESULT))
    return st.one_of(pool, pool, NASTY)


@st.composite
def command_lines(draw: st.DrawFn, words: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    """The subcommand `words`, then each optional argument or not, then the positional ones."""
    argv = list(words)
    positional: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if not action.option_strings:
            count = {None: 1, "?": draw(st.integers(0, 1)), "*": draw(st.integers(0, 2))}.get(
                action.nargs, draw(st.integers(1, 2))
            )
            positional += [draw(values(action)) for _ in range(count)]
            continue
        if not (action.required or action.dest in ALWAYS_GIVEN.get(words, ()) or draw(st.booleans())):
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            argv.append(flag)
        elif action.nargs in ("+", "*"):
            argv += [flag, *(draw(values(action)) for _ in range(draw(st.integers(1, 2))))]
        else:
            argv.append(f"{flag}={draw(values(action))}")
    # '--' keeps a positional value such as '-h' a value.
    return argv + (["--", *positional] if positional else [])


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf subcommand (`nightly land`, `run`) with its parser."""
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
        return
    for name, sub in subs[0].choices.items():
        yield from leaves(sub, (*words, name))


LEAVES = dict(leaves(build_parser(subcommands())))


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
