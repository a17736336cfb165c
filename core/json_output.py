"""One output contract for every command that prints information: with `--json` it prints one JSON document
on stdout and nothing else there (messages go to stderr), always in the same envelope:

    {"schema_version": 1, "command": "flags show", "jaxbench": "0.1.0", "data": {...}}

`command` is the subcommand's path as typed, `jaxbench` the version that printed it, and `data` the
command's own content. `schema_version` is this contract's, and covers every command's `data`: it changes
when a field changes meaning or disappears; a field added keeps it. docs/cli.md lists the commands.

    jaxbench flags show --json | jq -r .data.XLA_FLAGS
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import enum
import functools
import json
import math
from pathlib import PurePath

from rich.console import Console

SCHEMA_VERSION = 1
JSON_HELP = (
    "print one JSON document instead: {schema_version, command, jaxbench, data} (docs/cli.md#json-output)"
)

type Json = bool | int | float | str | list[Json] | dict[str, Json] | None


def add_json_option(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
    """`--json` for a command's parser (or one of its mutually exclusive groups), the same on every one."""
    parser.add_argument("--json", action="store_true", help=JSON_HELP)


@functools.cache
def jaxbench_version() -> str:
    """The installed distribution's version, from its metadata (as `jaxbench --version`: no import)."""
    import importlib.metadata  # here: a parser's --help never reads it

    try:
        return importlib.metadata.version("jaxbench")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def envelope(command: str, data: object) -> dict[str, Json]:
    """`data` (plain data, dataclasses, enums, dates, paths) in the envelope of `command`."""
    return {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "jaxbench": jaxbench_version(),
        "data": plain(data),
    }


def render(command: str, data: object) -> str:
    """The envelope as text: indented, non-ASCII kept, no NaN or Infinity (they are not JSON)."""
    return json.dumps(envelope(command, data), indent=2, ensure_ascii=False, allow_nan=False)


def print_json(console: Console, command: str, data: object) -> None:
    """The envelope on `console` as plain text: no markup, highlighting, emoji codes or wrapping. A
    `SafeConsole` (core/terminal.py) writes a control character as its `\\uXXXX` escape, which in a JSON
    string is that character still."""
    console.print(render(command, data), markup=False, highlight=False, emoji=False, soft_wrap=True)


def plain(value: object) -> Json:
    """`value` as JSON values: dataclasses as objects of their fields, enums as their values, dates and times
    in ISO 8601, paths as strings, tuples as lists; a non-finite float as null ("no valid value")."""
    match value:
        case None | bool() | int() | str() if not isinstance(value, enum.Enum):
            return value
        case enum.Enum():
            return plain(value.value)
        case float():
            return value if math.isfinite(value) else None
        case dt.date():  # dt.datetime is a dt.date too; both have isoformat()
            return value.isoformat()
        case PurePath():
            return str(value)
        case list() | tuple():
            return [plain(item) for item in value]
        case dict():
            return {str(key): plain(item) for key, item in value.items()}
        case _ if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {field.name: plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
