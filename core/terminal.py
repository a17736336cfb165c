"""Text from a result, a store or a user shown on a terminal as that text, never obeyed by the terminal: a
device kind, a cost key or a flag value holding `ESC ] 52` (OSC 52 writes the clipboard), `ESC [ 2J`
(clears the screen), a colour or a right-to-left override is shown escaped (`\\u001b`) instead.

Every console of the `jaxbench` command is a `SafeConsole`, which escapes what it renders (strings, rich
`Text`, table cells) and keeps rich's own styling, so no printer needs to remember to do it; `printable` is
the same rule for one string. The `\\uXXXX` form is also a JSON escape, so `--json` output stays JSON.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_terminal_escapes.py
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
"""C0 (ESC among them), DEL and C1 (0x9B is a one-byte CSI on some terminals)."""
_BIDI_CONTROLS = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
"""Marks, embeddings, overrides and isolates: they reorder the text around them (a "Trojan Source")."""
_KEPT = frozenset({0x09, 0x0A})
"""Tab and line feed lay text out; rich expands tabs and breaks lines itself."""
_ESCAPES = {code: f"\\u{code:04x}" for code in [*_CONTROLS, *_BIDI_CONTROLS] if code not in _KEPT}


def printable(text: str) -> str:
    """`text` with every terminal control character (C0 but tab and line feed, DEL, C1, bidi marks,
    embeddings, overrides and isolates) written as its `\\uXXXX` escape. Linear; idempotent."""
    return text.translate(_ESCAPES)


def safe_text(text: str, style: str = "") -> Text:
    """A rich `Text` of `text` made printable before a table measures it: a `SafeConsole` escapes a `Text`
    only as it renders it, after the table has sized its column for the unescaped text."""
    return Text(printable(text), style=style)


class SafeConsole(Console):
    """A rich Console that shows control characters in what it prints escaped (`printable`). Strings are
    escaped before rich lays them out; anything else (a `Text`, a table) as its segments are rendered,
    leaving rich's own control segments (cursor moves of a progress bar) alone."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            yield segment if segment.control else Segment(printable(segment.text), segment.style)


PIPED_WIDTH = 10_000
"""Columns of a console writing into a pipe or a file: no terminal width to fit, and rich's default of 80
would break a metric name or a path mid-word, where neither a reader nor grep finds it again."""


def console_for(*, stderr: bool = False) -> SafeConsole:
    """The console of stdout (or stderr): on a terminal, rich's own width and highlighting; into a pipe or a
    file, lines as long as their content and nothing highlighted (rich adds no colour there either)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return SafeConsole(stderr=stderr)
    return SafeConsole(stderr=stderr, width=PIPED_WIDTH, highlight=False)
