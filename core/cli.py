"""How a package offers its subcommands to the `jaxbench` command, which composes them (jaxbench/main.py).

Each package's cli.py builds its parsers and, per subcommand, turns the parsed arguments into typed options
and calls a plain function (which tests call directly); the parsed namespace never goes further. A
Subcommand either runs or holds subcommands of its own (`jaxbench nightly plan`); `add_subcommands` builds
either kind into argparse, and `handler_of` finds what the parsed command line runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rich.console import Console

from jaxbench.core.suggest import nearest

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


def positive_minutes(text: str) -> float:
    """A bound in minutes: a positive finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of minutes, got {text!r}")
    return value


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """For subcommands that take none."""


@dataclasses.dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    add_arguments: AddArguments = no_arguments
    run: Handler | None = None
    """Typed options from the parsed arguments, then the command's function; returns the exit code."""
    description: str | None = None
    """Longer text for `jaxbench NAME --help` (default: `help`)."""
    subcommands: tuple[Subcommand, ...] = ()
    """A group's own subcommands (`nightly` holds `plan`, `land`...): one of them runs, never the group."""

    def __post_init__(self) -> None:
        if (self.run is None) == (not self.subcommands):
            raise AssertionError(f"subcommand {self.name}: give it either `run` or `subcommands`")


_HANDLER = "_jaxbench_handler"
"""Where a leaf parser leaves its handler in the parsed namespace (no option has this name)."""
_PARSER = "_jaxbench_parser"
"""... and itself, so that an error in its arguments shows its own usage, not the whole command's."""
DEBUG_HELP = "show the traceback of a failure above its one-line message (also JAXBENCH_DEBUG=1)"


def add_subcommands(parser: argparse.ArgumentParser, commands: Sequence[Subcommand]) -> None:
    """`commands` as the subcommands of `parser`, a group's as subcommands of its own parser, at any depth."""
    names = [command.name for command in commands]
    if len(set(names)) != len(names):
        raise AssertionError(f"two subcommands have the same name among {names}")
    subparsers = parser.add_subparsers(metavar="COMMAND", required=True)
    for command in commands:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.description or command.help
        )
        command.add_arguments(sub)
        if command.subcommands:
            add_subcommands(sub, command.subcommands)
        else:
            # Accepted after the subcommand too; its default leaves the value given before it.
            sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
            sub.set_defaults(**{_HANDLER: command.run, _PARSER: sub})


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


class ParagraphFormatter(argparse.HelpFormatter):
    """A description laid out as written: paragraphs (split at blank lines) filled to the terminal, and an
    indented line (an example command) kept as it is, where argparse's default runs everything into one
    paragraph."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for block in text.strip("\n").split("\n\n"):
            lines = block.splitlines()
            if all(line.startswith(" ") for line in lines):
                blocks.append("\n".join(indent + line for line in lines))
            else:
                blocks.append(super()._fill_text(block, width, indent))
        return "\n\n".join(blocks)


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of a choice (a subcommand, a --backend) names the nearest one:
    Python before 3.14 lists every choice and leaves the reader to spot `report` in `reprot`. Descriptions
    keep their paragraphs and examples (ParagraphFormatter)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", ParagraphFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            choices = re.findall(r"'([^']*)'", found["choices"])
            if (near := nearest(found["word"], choices)) is not None:
                message = message.replace(" (choose from", f" (did you mean {near!r}?; choose from", 1)
        super().error(message)


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """`argv` parsed; an argument no parser takes is refused by the subcommand's own parser (its usage,
    not every subcommand's), with the nearest option it has where one is close."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        leaf: argparse.ArgumentParser = getattr(args, _PARSER, parser)
        options = [option for action in leaf._actions for option in action.option_strings]
        near = [
            f"{word} (did you mean {found}?)" if (found := nearest(word.split("=")[0], options)) else word
            for word in unknown
        ]
        leaf.error(f"unrecognized arguments: {' '.join(near)}")
    return args


def handler_of(args: argparse.Namespace) -> Handler:
    """What the parsed command line runs: its leaf subcommand's handler (add_subcommands)."""
    handler: Handler = getattr(args, _HANDLER)
    return handler
