"""The `jaxbench` command: one parser composed from every package's subcommands, explicit dispatch by name,
and one place that turns an expected failure into one line and its exit code (core/errors.py: ExitCode).

    jaxbench recipes | flops | flags | run | ab | microbench | gpu-check      (harness/cli.py)
    jaxbench ingest | detect | report | compare | detect-series | verdict     (results/cli.py)
    jaxbench manifest | build | push | publish      (containers/cli.py)
    jaxbench nightly plan|alerts|store-pull|land     (nightly/cli.py)

Exit codes: 0 success; 1 invalid input (nothing was run or written); 2 usage (argparse); 3 the work failed
(a run: compile error, OOM, NaN, with its result written; a build or push); 4 `detect` found an open
regression incident; 5 `publish` is missing an architecture; 6 an outside service (git, docker, a
registry, the network) failed; 130 interrupted (a run's result was written).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

import containers.cli
import harness.cli
import nightly.cli
import results.cli
from core.cli import Subcommand
from core.errors import JaxbenchError
from jaxbench.wiring import run_wiring


def subcommands() -> list[Subcommand]:
    """Every subcommand, in workflow order: run the benchmarks, judge them, build the stack, the nightly."""
    return [
        *harness.cli.subcommands(run_wiring()),
        *results.cli.subcommands(),
        *containers.cli.subcommands(),
        *nightly.cli.subcommands(),
    ]


def build_parser(commands: Sequence[Subcommand]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxbench", description="Benchmark JAX recipe models and judge them."
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in commands:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.description or command.help
        )
        command.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    commands = subcommands()
    handlers = {command.name: command.run for command in commands}
    if len(handlers) != len(commands):
        raise AssertionError("two packages register the same subcommand")
    args = build_parser(commands).parse_args(argv)
    # Piped into a file or a CI log there is no terminal width to fit: rich would assume 80 columns and
    # squeeze the tables.
    console = Console() if sys.stdout.isatty() else Console(width=120)
    try:
        return int(handlers[args.command](args, console))
    except JaxbenchError as error:
        errors = Console(stderr=True)
        errors.print(f"error: {error}", style="bold red", markup=False, highlight=False, soft_wrap=True)
        return int(error.exit_code)
