"""How a package offers its subcommands to the `jaxbench` command, which composes them (jaxbench/main.py).

Each package's cli.py builds its parsers and, per subcommand, turns the parsed arguments into typed options
and calls a plain function (which tests call directly); the parsed namespace never goes further.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from rich.console import Console

AddArguments = Callable[[argparse.ArgumentParser], None]
Handler = Callable[[argparse.Namespace, Console], int]


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For subcommands that take none."""


@dataclasses.dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    add_arguments: AddArguments
    run: Handler
    """Typed options from the parsed arguments, then the command's function; returns the exit code."""
    description: str | None = None
    """Longer text for `jaxbench NAME --help` (default: `help`)."""
