"""Text from a store, a result or a user inside GitHub-flavoured Markdown, shown as exactly that text: no
HTML, no link or image, no mention, no cross-reference, nothing that ends a table cell. Every Markdown writer
(job summaries, the nightly's issues and pull requests) passes such text through `escape_markdown`.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_markdown_escape.py
"""

from __future__ import annotations

import html
import re

from jaxbench.core.terminal import printable

ZERO_WIDTH_SPACE = "\u200b"

# `|` ends a table cell (GFM splits rows before it parses code spans, so `\|` is needed anywhere in a row);
# `[` `]` open links and images (`![x](y)` needs them too); a backtick opens a code span, inside which the
# other escapes would show as backslashes; a backslash would escape what follows it.
_MARKDOWN_SPECIALS = re.compile(r"[\\|\[\]`]")

# GitHub finds mentions (@name, @org/team), issue references (#12, owner/repo#12) and bare links
# (https://…, www.…, name@host) in the text Markdown leaves, after it is parsed, so a backslash escape or an
# HTML entity of "@" does not stop them: both become a plain "@" first. A zero-width space right after the
# trigger does: none of these patterns allows a character between the trigger and the name, number or
# "//", and the page shows the same text. Dependabot breaks the mentions in the release notes it quotes the
# same way.
# `GH-12` is GitHub's other issue reference, in any case: the space goes after its "-".
_GITHUB_AUTOLINK_TRIGGERS = re.compile(r"@|#(?=\d)|:(?=//)|(?i:\bwww)(?=\.)|(?i:\bgh-)(?=\d)")


def escape_markdown(text: str) -> str:
    """`text` as inline Markdown (a table cell, link text, a line of prose) that GitHub renders as the text
    itself, on one line. HTML is escaped rather than stripped: GitHub removes tags such as <script>, so a
    name containing one would vanish."""
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\g<0>", html.escape(text, quote=False))
    inert = _GITHUB_AUTOLINK_TRIGGERS.sub(lambda found: found.group(0) + ZERO_WIDTH_SPACE, escaped)
    # Control characters, and the bidirectional ones that reorder the text around them on the page (an
    # issue title that reads backwards): their `\uXXXX` escape, as a terminal shows them (core/terminal.py).
    # A backslash before "u" escapes nothing in Markdown, so the page shows the escape as written.
    return printable(" ".join(inert.split()))


def markdown_code(text: str | None) -> str:
    """A commit, flag or value as inline code, where GitHub finds no mention or link; "(unset)" for None.
    GFM splits table cells before it parses code spans, so `\\|` is needed inside them too; HTML entities are
    not decoded in code, so text with `<`, `>`, `&`, a backtick, a line break or another control character is
    escaped plain text."""
    if text is None:
        return "(unset)"
    if not text or any(ch in text for ch in "<>&`\r\n") or printable(text) != text:
        return escape_markdown(text) or '""'
    return f"`{text.replace('|', '\\|')}`"
