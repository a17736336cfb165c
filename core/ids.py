"""Numeric ids given on the command line (a store's run or incident id): one parser for every command.

parse_id("12", "run") -> 12
"""

from __future__ import annotations

from jaxbench.core.errors import InvalidInput

MAX_ID = 2**63 - 1
"""The largest id a store can hold: SQLite's INTEGER and PostgreSQL's bigint are 8 bytes."""


def parse_id(text: str, what: str) -> int:
    """`text` as an id: ASCII digits only (not '²' nor '١', which int() and str.isdigit take), from 1 to
    MAX_ID; InvalidInput naming `what` otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(MAX_ID)) or not 0 < int(text) <= MAX_ID:
        raise InvalidInput(f"{what} {text[:40]!r}: expected a number from 1 to {MAX_ID}")
    return int(text)
