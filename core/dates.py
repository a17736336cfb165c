"""Calendar dates as every flag and variable of jaxbench writes them (DATE, --night, --date)."""

from __future__ import annotations

import datetime as dt
import re

from jaxbench.core.errors import InvalidInput

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(text: str, what: str) -> dt.date:
    """A calendar date written exactly YYYY-MM-DD (no compact or week forms, which fromisoformat also
    takes); `what` names the flag or variable in the error, which quotes `text` (a line break as \\n)."""
    try:
        if _DATE.fullmatch(text):
            return dt.date.fromisoformat(text)
    except ValueError:
        pass
    raise InvalidInput(f"{what} {text!r}: expected YYYY-MM-DD, a real date")
