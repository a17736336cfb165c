"""Ids on the command line are read one way (core/ids.py): ASCII digits within the store's 64-bit range, so a
25-digit number, a superscript two or an Arabic-Indic one is refused in one line, exit 1, and never read as
another run or incident; a fingerprint prefix is matched as text, never as a LIKE pattern.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_ids.py
"""

from __future__ import annotations

import argparse
import os

import pytest
from sqlalchemy import select

from jaxbench.core.cli import positive_number, whole_number
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.ids import MAX_ID, parse_id
from jaxbench.main import main
from jaxbench.results import schema, store, triage_records
from tests.triage.test_triage_store import add_incident

HUGE, SUPERSCRIPT, ARABIC_ONE = "99999999999999999999999", "²", "١"


@pytest.mark.parametrize("text", ["1", "0042", str(MAX_ID)])
def test_ascii_ids_within_range_are_read(text: str) -> None:
    assert parse_id(text, "run") == int(text)


@pytest.mark.parametrize(
    "text",
    [HUGE, str(MAX_ID + 1), SUPERSCRIPT, ARABIC_ONE, "", "0", "-1", "+1", " 1", "1 ", "1_000", "9" * 5000],
)
def test_anything_else_is_refused_naming_what(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"^run .*: expected a number from 1 to \d+$"):
        parse_id(text, "run")


@pytest.mark.parametrize("given", [HUGE, SUPERSCRIPT, ARABIC_ONE])
@pytest.mark.parametrize(
    "command",
    [
        ["hlo-diff", "{}", "1"],
        ["compare", "1", "{}"],
        ["verdict", "{}", "real"],
        ["triage", "{}"],
    ],
)
def test_every_command_taking_an_id_refuses_it_in_one_line(
    command: list[str], given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Incident 1 and runs 1 and 2 exist: "١" must not quietly mean them.
    engine = store.connect(os.environ["JAXBENCH_DB"])
    add_incident(engine, kind="memory")
    code = main([part.format(given) for part in command])
    err = capsys.readouterr().err.strip()
    assert code == ExitCode.INVALID_INPUT, err
    assert len(err.splitlines()) == 1 and "expected a number from 1 to" in err, err
    with store.transaction(engine) as session:
        assert session.execute(select(schema.Verdict)).first() is None


@pytest.mark.parametrize("prefix", ["%%%%%%", "______", "f00d%%", "f0_d_0"])
def test_a_fingerprint_prefix_is_no_pattern(prefix: str) -> None:
    engine = store.connect(os.environ["JAXBENCH_DB"])
    add_incident(engine)
    with pytest.raises(InvalidInput, match="6 or more hex characters of its fingerprint"):
        triage_records.find_incident(engine, prefix)
    assert triage_records.find_incident(engine, "F00DF0").fingerprint == "f00d" * 16


@pytest.mark.parametrize("text", [HUGE, SUPERSCRIPT, ARABIC_ONE, "1_000", "+3", " 3", "", "-"])
def test_a_whole_number_option_takes_ascii_digits_within_64_bits(text: str) -> None:
    """argparse's type=int took all of these but HUGE, and HUGE overflowed the store (`runs list --limit`)."""
    with pytest.raises(argparse.ArgumentTypeError, match="expected a whole number"):
        whole_number(text)


def test_whole_and_positive_numbers() -> None:
    assert [whole_number(t) for t in ("0", "-2", "0042", str(MAX_ID))] == [0, -2, 42, MAX_ID]
    assert positive_number("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive whole number"):
        positive_number("0")


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list", f"--limit={HUGE}"],
        ["runs", "list", "--limit=0"],
        ["nightly", "triage", f"--incidents={ARABIC_ONE}"],
        ["flops", "llama2", f"--seq={SUPERSCRIPT}"],
    ],
)
def test_number_options_are_refused_by_argparse(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2 and "expected a" in capsys.readouterr().err
