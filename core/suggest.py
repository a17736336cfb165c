""" "Did you mean" for a name the user typed: the one choice it matches ignoring case, else the closest by
difflib's ratio, else nothing. Shared by every refusal that lists what it expected."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` most likely meant: equal ignoring case first (`7B` → `7b`), then close in
    spelling (`llama` → `llama2`); None where none is close."""
    options = list(choices)
    same = [choice for choice in options if choice.casefold() == word.casefold()]
    if same:
        return same[0]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)`, or "" where nothing is close: to append to a refusal."""
    found = nearest(word, choices)
    return f" (did you mean {found!r}?)" if found is not None else ""
