"""Numeric ids given on the command line (a store's run or incident), parsed one way for every command.

Python's `str.isdigit` and `int` take far more than an id: `int("١")` is 1 and `"²".isdigit()` holds, and
a number past 64 bits overflows the store's INTEGER columns. An id here is ASCII digits, within SQLite's
(and PostgreSQL's BIGINT) signed 64-bit range.

    jaxbench verdict 99999999999999999999999 real   # exit 1: incident '999...': expected an id, ...
"""

from __future__ import annotations

import re

from core.errors import InvalidInput

MAX_ID = 2**63 - 1
"""The largest INTEGER SQLite stores (and PostgreSQL's BIGINT)."""

SHOWN_CHARACTERS = 40
"""An error line quotes this much of what was given."""
_DIGITS = re.compile(r"[0-9]+")


def parse_id(text: str, what: str) -> int:
    """The id `text` names, or InvalidInput naming `what` (e.g. "incident") and what was expected."""
    # The length first: int() refuses more than 4,300 digits with a ValueError of its own.
    if _DIGITS.fullmatch(text) is None or len(text.lstrip("0")) > len(str(MAX_ID)) or int(text) > MAX_ID:
        shown = text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."
        raise InvalidInput(f"{what} {shown!r}: expected an id, ASCII digits 0-9 up to {MAX_ID}")
    return int(text)
