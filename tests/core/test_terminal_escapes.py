"""Escape sequences stored in a result (a device kind, a cost key, a flag value) reach the terminal escaped:
`jaxbench report`, `hlo-diff`, `compare` and the one-line error never print a control character, while
rich's own colours still work on a terminal.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_terminal_escapes.py
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import time
from pathlib import Path

import pytest
import sqlalchemy
from rich.table import Table
from rich.text import Text

from jaxbench.core.errors import ExitCode
from jaxbench.core.terminal import SafeConsole, printable
from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.harness.runtime.result import Program
from jaxbench.main import main
from jaxbench.results import schema, store, synthetic

CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
"""OSC 52: writes "evil" into the clipboard of the terminal that prints it."""
CLEAR = "\x1b[2J\x1b[H"
RED = "\x1b[31m"
OVERRIDE = "\u202e"
HOSTILE = f"H100{CLIPBOARD}{CLEAR}{RED}x{OVERRIDE}y\x9b\x7f\r"

# Anything a terminal acts on: C0 but tab and line feed, DEL, C1, bidi embeddings, overrides, isolates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\u001b[2J"),
        ("a\x07b", "a\\u0007b"),
        ("\x9b31m", "\\u009b31m"),
        ("\x7f", "\\u007f"),
        ("\r", "\\u000d"),
        ("x\u202ey", "x\\u202ey"),
        ("\u2066", "\\u2066"),
        ("tab\tand\nline", "tab\tand\nline"),
        ("ünïcödé → 東京", "ünïcödé → 東京"),
    ],
)
def test_printable_escapes_what_a_terminal_obeys(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert printable(printable(raw)) == printable(raw)


def test_printable_is_linear() -> None:
    text = HOSTILE * 60_000  # 1.5 MB
    started = time.perf_counter()
    assert CONTROL.search(printable(text)) is None
    assert time.perf_counter() - started < 5  # a translate table: milliseconds


def test_the_console_escapes_strings_texts_and_table_cells_and_keeps_its_own_colours() -> None:
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, width=100, force_terminal=True, color_system="standard")
    table = Table(title=HOSTILE)
    table.add_column("kind")
    table.add_column("value")
    table.add_row(HOSTILE, Text(f"v{CLEAR}", style="red"))
    console.print(table)
    console.print(HOSTILE, markup=False)
    console.print(Text(HOSTILE, style="bold"))
    out = buffer.getvalue()
    without_own_styles = re.sub(r"\x1b\[[0-9;]*m", "", out)  # rich's SGR colours and bold
    assert CONTROL.search(without_own_styles) is None
    assert "\\u001b]52;c;ZXZpbA==\\u0007" in out and "\\u202e" in out
    assert "\x1b[31m" in out  # the red cell: rich's own style


def hostile_result(tmp_path: Path, name: str, flops: float) -> Path:
    summary = ProgramSummary(
        fingerprint=name[0] * 64,
        instructions=10,
        fusions={f"kLoop{CLEAR}": 2},
        ops={"fusion": 2},
        collectives={},
        custom_calls={f"cublas{CLIPBOARD}": 1},
    )
    program = Program(summary=summary, cost={"flops": flops, f"bytes{RED}": 3.0})
    document = synthetic.run_result(
        dt.date(2026, 11, 1),
        0.5,
        device_kind=f"NVIDIA H100{CLIPBOARD}",
        xla_flags=f"--xla_foo={CLEAR}{OVERRIDE}",
        program=program,
    )
    return synthetic.write(tmp_path, document, name)


def test_hlo_diff_and_compare_print_stored_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = hostile_result(tmp_path, "a.json", 1e9), hostile_result(tmp_path, "b.json", 2e9)
    for argv in (
        ["hlo-diff", str(a), str(b)],
        ["hlo-diff", str(a), str(b), "--json"],
        ["compare", str(a), str(b)],
        ["compare", str(a), str(b), "--json"],
    ):
        assert main(argv) == ExitCode.OK, argv
        out = capsys.readouterr().out
        assert CONTROL.search(out) is None, (argv, out)
    assert main(["hlo-diff", str(a), str(b)]) == ExitCode.OK
    assert "bytes\\u001b[31m" in capsys.readouterr().out
    assert main(["hlo-diff", str(a), str(b), "--json"]) == ExitCode.OK
    assert "bytes\\u001b[31m" in json.dumps(json.loads(capsys.readouterr().out))  # still JSON, the same text


def test_report_prints_a_stored_device_kind_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ingest refuses such a device kind now (results/identity.py); a store written before it may hold one."""
    paths = [
        synthetic.write(tmp_path, synthetic.run_result(dt.date(2026, 11, 1) + dt.timedelta(days=i), 0.5))
        for i in range(3)
    ]
    assert main(["ingest", *map(str, paths)]) == ExitCode.OK
    with store.connect().begin() as connection:
        connection.execute(sqlalchemy.update(schema.Series).values(device_kind=HOSTILE))
    capsys.readouterr()
    for fmt in ("table", "markdown", "json"):
        assert main(["report", "--format", fmt]) == ExitCode.OK
        out = capsys.readouterr().out
        assert CONTROL.search(out) is None, (fmt, out)
        assert "H100" in out


def test_an_error_line_quoting_the_input_is_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", f"/no/such/run{CLIPBOARD}.json"]) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err
    assert CONTROL.search(err) is None and "\\u001b]52" in err
