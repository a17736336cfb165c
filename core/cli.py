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


LARGEST_NUMBER = 2**63 - 1
"""The largest whole number an option takes: what a store's INTEGER and a C long hold."""


def whole_number(text: str) -> int:
    """argparse's `type` for a whole-number option: ASCII digits with an optional '-', within 64 bits.
    `int()` would also take '²', '١' (Arabic-Indic one) and '1_000', and numbers no store or library can
    hold. The range a command needs is its own check, with its own message."""
    digits = text.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 19 or int(digits) > LARGEST_NUMBER:
        raise argparse.ArgumentTypeError(
            f"expected a whole number (ASCII digits, within 64 bits), got {text!r}"
        )
    return int(text)


def positive_number(text: str) -> int:
    """argparse's `type` for a count: a whole_number from 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


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
