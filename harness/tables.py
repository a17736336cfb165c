"""Rich tables and lines whose text comes from users (recipe, size and file names, flag values, paths), shown
as given: rich reads '[...]' in a string as markup, so a status in brackets would vanish from a title and a
stray '[/x]' would raise MarkupError when the table prints, after the work it reports is done.

    jaxbench run llama2        # the summary table: harness/runtime/reporter.py
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table


def add_plain_row(table: Table, *cells: str) -> None:
    """A row whose cells are shown as given, never read as markup."""
    table.add_row(*(escape(cell) for cell in cells))
