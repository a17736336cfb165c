"""Module docstrings say what a module is for and why it is built so, in at most 12 lines, and no file of the
tree points at a tracker's issue number: figures and their dates live in docs/measurements.md, longer design
reasoning in docs/design.md, history in git.

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_docstrings.py
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCSTRING_LIMIT = 12
"""Lines a module docstring (or a script's header comment) may span, its quotes included."""
FOLDERS = (
    *("core", "harness", "results", "containers", "nightly", "prcheck", "backfill", "triage", "jaxbench"),
    *("tests", "benchmarks", "scripts", "recipes", "docs", ".ci", ".github"),
)
"""Every folder of the project's own files; a virtualenv, runs/, build/ and site/ are not among them."""
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", ".dockerignore")
TEXT_SUFFIXES = {"", ".py", ".md", ".yaml", ".yml", ".toml", ".j2", ".js", ".css", ".mako", ".ini", ".txt"}
ISSUE_NUMBER = re.compile(r"\b[Ii]ssues? [0-9]+")
"""The word issue followed by a number: a pointer into a tracker's history, which belongs in git. A GitHub
reference the code handles (`issue #7`) is not one."""


def _project_files() -> Iterator[Path]:
    for name in TOP_FILES:
        yield REPO / name
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in TEXT_SUFFIXES:
                yield path


def _shebang(text: str) -> str:
    return text.split("\n", 1)[0] if text.startswith("#!") else ""


def _python_docstring_lines(source: str) -> int:
    """Lines the module docstring spans, quotes included; 0 without one."""
    body = ast.parse(source).body
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def _header_comment_lines(text: str) -> int:
    """The comment lines a shell script opens with, after its shebang."""
    lines = text.splitlines()[1:]
    count = 0
    for line in lines:
        if not line.startswith("#"):
            break
        count += 1
    return count


def module_docstring_lines(path: Path) -> int | None:
    """How long the module docstring (Python) or header comment (a shell script) is; None for other files."""
    text = path.read_text()
    shebang = _shebang(text)
    if path.suffix == ".py" or "python" in shebang:
        return _python_docstring_lines(text)
    if shebang.endswith(("sh", "bash")):
        return _header_comment_lines(text)
    return None


def test_module_docstrings_and_script_headers_fit_in_the_limit() -> None:
    lengths = {
        str(path.relative_to(REPO)): length
        for path in _project_files()
        if (length := module_docstring_lines(path)) is not None
    }
    assert {path: n for path, n in sorted(lengths.items()) if n > DOCSTRING_LIMIT} == {}
    assert len(lengths) > 300  # the walk found the project's modules and scripts


def test_no_file_points_at_an_issue_number() -> None:
    mentions = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _project_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
        if ISSUE_NUMBER.search(line)
    ]
    assert mentions == []


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("one.py", '"""One line."""\n', 1),
        ("script", '#!/usr/bin/env python3\n"""What.\n\nWhy.\n"""\nimport os\n', 4),
        ("none.py", "import os\n", 0),
        ("script", "#!/usr/bin/env bash\n# What.\n# Why.\nset -euo pipefail\n# not the header\n", 2),
        ("data.yaml", "# a comment\nkey: value\n", None),
    ],
)
def test_the_measure_counts_the_docstring_or_header(
    tmp_path: Path, name: str, text: str, expected: int | None
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert module_docstring_lines(path) == expected


def test_the_pattern_finds_issue_numbers_and_only_those() -> None:
    assert ISSUE_NUMBER.search(f"the targets of issue {17}") and ISSUE_NUMBER.search(f"Issues {18} and 19")
    assert not ISSUE_NUMBER.search('match="issue #7: not found"')
    assert not ISSUE_NUMBER.search("an issue per incident")


DOC_POINTER = re.compile(r"(?:docs/)?(design|measurements)\.md, \"([^\"]+)\"")
"""A pointer from the code into a section of the design notes or the measurements: the page, a comma and
the section's title in double quotes."""


def _headings(page: Path) -> set[str]:
    """A page's section titles, without the modules a title names in parentheses."""
    titles = (line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("#"))
    return {re.sub(r"\s*\([^)]*\)$", "", title) for title in titles}


def test_every_pointer_into_the_docs_names_a_section_there() -> None:
    sections = {name: _headings(REPO / "docs" / f"{name}.md") for name in ("design", "measurements")}
    pointers = set()
    for path in _project_files():
        # A pointer may wrap onto the next line of a docstring or a comment block.
        text = re.sub(r"\n[ \t]*#?[ \t]*", " ", path.read_text(errors="replace"))
        pointers |= {(str(path.relative_to(REPO)), page, title) for page, title in DOC_POINTER.findall(text)}
    assert [p for p in sorted(pointers) if p[2] not in sections[p[1]]] == []
    assert len(pointers) > 30  # the walk found the docstrings' pointers
