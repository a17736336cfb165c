"""Output into a pipe or a file: lines as long as their content, no highlighting, no colour; on a terminal,
rich's own layout.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_piped_output.py
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.table import Table

from jaxbench.core.terminal import console_for

LONG_NAME = "perf/tokens_per_s_per_device_" + "x" * 120


def test_a_piped_table_keeps_each_cell_on_one_line_without_escape_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    table = Table("series", "value")
    table.add_row(LONG_NAME, "data=1 /tmp/path")
    console_for().print(table)
    console_for().print(f"a status line naming {LONG_NAME} at /tmp/a/path and data=1")
    text = piped.getvalue()
    assert LONG_NAME in text.splitlines()[3]  # the header box, the header, the rule, then the row
    assert f"a status line naming {LONG_NAME} at /tmp/a/path and data=1\n" in text
    assert "\x1b[" not in text


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_rich_lays_out_as_usual(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.setenv("COLUMNS", "80")
    console = console_for(stderr=True)
    assert console.width == 80 and console.is_terminal


def test_a_long_error_of_the_command_is_one_line_in_a_pipe() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jaxbench", "run", "llama2", "--set", f"train.{'global_bach' * 8}=4"],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "COLUMNS": "80"},
        check=False,
    )
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert len(line) > 100 and line.startswith("error: --set train.global_bach") and "\x1b[" not in line
