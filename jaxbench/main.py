"""The `jaxbench` command: one parser composed from every package's subcommands (`jaxbench --help` lists
them), dispatch to the subcommand the command line names, and one place that turns an expected failure into
one line and its exit code.

The exit codes and what each means are core/errors.py's `ExitCode` (the README's table lists the same): a
bug is 70 with its traceback; an expected failure is one line, and `jaxbench --debug COMMAND` or
JAXBENCH_DEBUG=1 shows its traceback above that line.

    jaxbench --debug report --format html --out README.md
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Mapping, Sequence

from jaxbench.backfill import cli as backfill_cli
from jaxbench.containers import cli as containers_cli
from jaxbench.core.cli import DEBUG_HELP, Parser, Subcommand, add_subcommands, handler_of, parse
from jaxbench.core.errors import ExitCode, JaxbenchError, expected_failure, one_line
from jaxbench.core.json_output import jaxbench_version, print_json
from jaxbench.core.processes import sigterm_interrupts
from jaxbench.core.terminal import console_for
from jaxbench.core.urls import scrub_urls
from jaxbench.harness import cli as harness_cli
from jaxbench.nightly import cli as nightly_cli
from jaxbench.prcheck import cli as prcheck_cli
from jaxbench.results import cli as results_cli
from jaxbench.triage import cli as triage_cli
from jaxbench.wiring import post_to_tracker, run_wiring

DEBUG_ENV = "JAXBENCH_DEBUG"
DEBUG_VALUES = ("1", "true", "yes", "on")
"""JAXBENCH_DEBUG values that show tracebacks (any case); any other value, or none, does not."""
STORE_LIBRARIES = ("sqlalchemy", "alembic")
INTERNAL_ERROR = "internal error: a bug in jaxbench, not in the input; please report it with the traceback"


def subcommands() -> list[Subcommand]:
    """Every package's subcommands, in workflow order: run the benchmarks, judge them, build the stack, the
    nightly, triage an incident, backfill a history, check a change before it merges."""
    return [
        *harness_cli.subcommands(run_wiring()),
        *results_cli.subcommands(),
        *containers_cli.subcommands(),
        *nightly_cli.subcommands(),
        *triage_cli.subcommands(post_to_tracker),
        *backfill_cli.subcommands(),
        *prcheck_cli.subcommands(),
    ]


def build_parser(commands: Sequence[Subcommand]) -> argparse.ArgumentParser:
    parser = Parser(prog="jaxbench", description="Benchmark JAX recipe models and judge them.")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=DEBUG_HELP,
    )
    parser.add_argument(
        "--version",
        action=ShowVersion,
        help="print this jaxbench's version and the stack it would run, and exit (with --json: as JSON)",
    )
    add_subcommands(parser, commands)
    return parser


class ShowVersion(argparse.Action):
    """`jaxbench --version`: this jaxbench and the stack a run here would use, from the installed
    distributions' metadata (importing none of them: jax's import alone takes seconds)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version_text())
        parser.exit()


VERSION_JSON = ["--json", "--version"]
"""`jaxbench --version --json`, in either order: --version acts as argparse meets it, so main looks first."""


def version_data() -> dict[str, object]:
    """The Python and each stack component's installed version (None: not installed), from the installed
    distributions' metadata."""
    from jaxbench.harness.provenance.collection import (
        collect_versions,  # here: only --version reads the stack
    )

    versions = collect_versions().model_dump()
    python = versions.pop("python")
    return {"python": python, "stack": {name.replace("_", "-"): found for name, found in versions.items()}}


def version_text() -> str:
    """`jaxbench 0.1.0 (Python 3.12.1)` and a line naming each stack component's installed version."""
    data = version_data()
    stack = data["stack"]
    assert isinstance(stack, dict)
    components = ", ".join(f"{name} {found or 'not installed'}" for name, found in stack.items())
    return f"jaxbench {jaxbench_version()} (Python {data['python']})\nstack: {components}"


def double_dash_problem(argv: Sequence[str]) -> str | None:
    """Where '--' stands as a value (`--set=--`, or a second '--'): argparse drops it from the values it
    collects (Python 3.12.1 hands `--night=--` over as [], later ones as '--'), so refuse it here, on every
    Python the same, rather than let a command take a list for a string."""
    options = argv[: argv.index("--")] if "--" in argv else argv
    for token in options:
        name, equals, value = token.partition("=")
        if token.startswith("--") and equals and value == "--":
            return f"argument {name}: expected a value, got '--'"
    if argv.count("--") > 1:
        return "'--' ends the options once; expected a value in place of the second '--'"
    return None


def debug_requested(flag: bool, environ: Mapping[str, str]) -> bool:
    return flag or environ.get(DEBUG_ENV, "").strip().lower() in DEBUG_VALUES


def failure_of(error: Exception) -> JaxbenchError | None:
    """The one-line failure `error` stands for (core/errors.py: expected_failure), the store's included;
    None for a bug."""
    if type(error).__module__.partition(".")[0] in STORE_LIBRARIES:
        from jaxbench.results.store import store_failure  # here only: `jaxbench --help` never loads the store

        return store_failure(error)
    return expected_failure(error)


def report_failure(error: Exception, debug: bool) -> int:
    """One line on stderr and its exit code; a bug's traceback always, any other's with `debug`."""
    failure = failure_of(error)
    if debug or failure is None:
        traceback.print_exception(error)
    # A message may quote the input (a flag value, a URL given with its token): scrubbed, and shown escaped.
    message = f"error: {scrub_urls(one_line(str(failure)))}" if failure is not None else INTERNAL_ERROR
    console_for(stderr=True).print(message, style="bold red", markup=False, highlight=False, soft_wrap=True)
    return int(ExitCode.INTERNAL if failure is None else failure.exit_code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(subcommands())
    argv = sys.argv[1:] if argv is None else list(argv)
    problem = double_dash_problem(argv)
    if problem:
        parser.error(problem)
    if sorted(argv) == VERSION_JSON:
        print_json(console_for(), "--version", version_data())
        return int(ExitCode.OK)
    args = parse(parser, argv)
    console = console_for()
    try:
        # SIGTERM takes Ctrl-C's path (a child process is passed it and waited for: core/processes.py).
        with sigterm_interrupts():
            return int(handler_of(args)(args, console))
    except KeyboardInterrupt:
        # `run` turns its own interruption into a result; anywhere else Ctrl-C or SIGTERM stops the
        # command, and a store write in progress is rolled back by its transaction.
        if debug_requested(args.debug, os.environ):
            traceback.print_exc()
        console_for(stderr=True).print("interrupted", style="bold red", markup=False, highlight=False)
        return int(ExitCode.INTERRUPTED)
    except Exception as error:
        return report_failure(error, debug_requested(args.debug, os.environ))
